"""Linear algebra: matmul and its fixed-rank forms (mm, bmm, mv, dot, outer), the fused
multiply-adds (addmm, baddbmm, addmv), einsum and tensordot.

Two primitives do the work: ``matmul`` (NumPy's and PyTorch's rules for 1-D operands and
batch broadcasting) and ``einsum``; everything else checks its arguments and calls one
of them. Half-precision products run in float32 and round once, since NumPy's float16
matmul is slow and loses accuracy; on a GPU they run as they are, on the tensor cores.
Operands must share a dtype, as in PyTorch.
"""
from __future__ import annotations

import math
import numbers
import string

import numpy as np

from .. import dtypes as dt
from ..errors import EmberError, EmberTypeError, ShapeError
from ..tensor import Tensor
from ._xp import gemm, native_half_matmul
from .registry import AbstractValue, apply, apply_in_given_dtypes, autocast_inputs, register
from .shape import broadcast_shapes, permute, reshape, unsqueeze, wrap_dim

__all__ = ["matmul", "mm", "bmm", "mv", "dot", "vdot", "outer", "ger", "addmm", "baddbmm",
           "addmv", "einsum", "tensordot"]
NOT_METHODS = ("einsum", "tensordot")

_F32 = np.dtype(np.float32)


def _is_half(a) -> bool:
    return a.dtype.itemsize == 2 and a.dtype.kind in "fV"


def _same_dtype(op: str, *tensors, allow_bool: bool = False) -> None:
    for t in tensors:
        if not isinstance(t, Tensor):
            raise EmberTypeError(f"{op}: expected Tensor arguments, got {type(t).__name__}")
    first = tensors[0].dtype
    for t in tensors[1:]:
        if t.dtype is not first:
            raise EmberTypeError(f"{op}: expected all tensors to have the same dtype, but got "
                                 f"{' and '.join(x.dtype.name for x in tensors)}")
    if first is dt.bool and not allow_bool:
        raise EmberTypeError(f"{op}: bool tensors are not supported; convert them to an "
                             "integer or floating dtype first")


# matmul ---------------------------------------------------------------------------------------
def _matmul_forward(xp, a, b):
    half = _is_half(a) and not native_half_matmul(xp)
    if half:
        dtype, a, b = a.dtype, a.astype(_F32), b.astype(_F32)
    if a.ndim > 2 and b.ndim == 2 and a.flags.c_contiguous:
        # One large GEMM instead of one per batch entry (x @ W in a Linear layer).
        out = gemm(xp, a.reshape(-1, a.shape[-1]), b).reshape(a.shape[:-1] + b.shape[1:])
    else:
        if a.ndim > 2 or b.ndim > 2:
            # NumPy's batched matmul calls BLAS only for matrices it can hand over as they
            # are, else runs its own slow loop: a copy first is cheaper.
            a, b = _blas_ready(xp, a, True), _blas_ready(xp, b, False)
        out = gemm(xp, a, b)
    return out.astype(dtype) if half else out


def _blas_ready(xp, a, first: bool):
    """``a``, or a contiguous copy where the matrices of ``a`` are not laid out as BLAS
    takes them: rows of unit-stride elements (at any row stride), or for the first
    operand also the transpose of that. BLAS reads a transposed second operand slowly at
    these sizes, so that one is copied too."""
    if a.ndim < 2:
        return a
    item = a.itemsize
    rows, cols = a.strides[-2:]
    n_rows, n_cols = a.shape[-2:]
    if cols == item and rows >= n_cols * item and rows % item == 0:
        return a
    if first and rows == item and cols >= n_rows * item and cols % item == 0:
        return a
    return xp.ascontiguousarray(a)


def _matmul_shape(sa: tuple, sb: tuple):
    """(result shape, None), or (None, why the shapes do not fit)."""
    if not sa or not sb:
        return None, (f"both arguments need to be at least 1-D, but they are {len(sa)}-D and "
                      f"{len(sb)}-D (shapes {sa} and {sb})")
    inner_b = sb[-2] if len(sb) > 1 else sb[0]
    if sa[-1] != inner_b:
        return None, f"shapes {sa} and {sb} are not aligned: {sa[-1]} != {inner_b}"
    try:
        batch = tuple(np.broadcast_shapes(sa[:-2], sb[:-2]))
    except ValueError:
        return None, (f"the batch dimensions {sa[:-2]} and {sb[:-2]} of shapes {sa} and {sb} "
                      "cannot be broadcast together")
    return batch + sa[-2:-1] + sb[-1:] * (len(sb) > 1), None


def _matmul_infer(a, b):
    shape, why = _matmul_shape(a.shape, b.shape)
    if why:
        raise ShapeError(f"matmul: {why}")
    return AbstractValue(shape, a.dtype)


def _matmul_vjp(n, g):
    a, b = n.saved_inputs()
    if a.ndim == 2 and b.ndim == 2:
        return (matmul(g, b.mT) if n.edges[0] else None,
                matmul(a.mT, g) if n.edges[1] else None)
    # Lift 1-D operands to matrices (as the forward does), then sum out broadcast dims.
    a2 = unsqueeze(a, 0) if a.ndim == 1 else a
    b2 = unsqueeze(b, 1) if b.ndim == 1 else b
    g2 = unsqueeze(g, -1) if b.ndim == 1 else g
    g2 = unsqueeze(g2, -2) if a.ndim == 1 else g2
    from .reduce import sum_to
    ga = gb = None
    if n.edges[0]:
        ga = reshape(sum_to(matmul(g2, b2.mT), tuple(a2.shape)), tuple(a.shape))
    if n.edges[1]:
        if b2.ndim == 2:  # fold a's batch dims into one GEMM
            k, m = b2.shape
            rows = math.prod(a2.shape[:-1])
            gb = matmul(reshape(a2, (rows, k)).mT, reshape(g2, (rows, m)))
        else:
            gb = sum_to(matmul(a2.mT, g2), tuple(b2.shape))
        gb = reshape(gb, tuple(b.shape))
    return ga, gb


_MATMUL = register("matmul", _matmul_forward, _matmul_vjp, infer=_matmul_infer,
                   explain=lambda inputs, params: _matmul_shape(tuple(inputs[0].shape),
                                                                tuple(inputs[1].shape))[1])


def matmul(input, other):
    """Matrix product with PyTorch's rules: 1-D @ 1-D is a dot product, a 1-D operand is
    treated as a row (first) or column (second) vector and that dim is removed from the
    result, and leading batch dims broadcast. Also ``input @ other``.

    >>> ember.matmul(ember.ones(2, 3), ember.ones(3))
    tensor([3., 3.])
    """
    input, other = autocast_inputs("matmul", input, other)
    if not (isinstance(input, Tensor) and isinstance(other, Tensor)) \
            or input._dtype is not other._dtype or input._dtype is dt.bool:
        _same_dtype("matmul", input, other)
    return apply(_MATMUL, input, other)


def _shapes(*tensors) -> str:
    return " and ".join(str(tuple(t.shape)) for t in tensors)


def _check_ranks(op: str, want: tuple, *tensors) -> None:
    _same_dtype(op, *tensors)
    if tuple(t.ndim for t in tensors) != want:
        got = " and ".join(f"{t.ndim}-D" for t in tensors)
        need = " and ".join(f"{r}-D" for r in want)
        raise ShapeError(f"{op}: expected {need} tensors, but got {got} (shapes "
                         f"{_shapes(*tensors)})")


def _check_inner(op: str, a, b, ka: int, kb: int) -> None:
    if ka != kb:
        raise ShapeError(f"{op}: shapes {_shapes(a, b)} are not aligned: {ka} != {kb}")


def mm(input, mat2):
    """The product of matrices ``input`` (n×k) and ``mat2`` (k×m).

    >>> ember.mm(ember.ones(2, 3), ember.ones(3, 4)).shape
    ember.Size([2, 4])
    """
    input, mat2 = autocast_inputs("mm", input, mat2)
    _check_ranks("mm", (2, 2), input, mat2)
    _check_inner("mm", input, mat2, input.shape[1], mat2.shape[0])
    return apply(_MATMUL, input, mat2)


def bmm(input, mat2):
    """Batched matrix product of (b×n×k) and (b×k×m) tensors; no broadcasting.

    >>> ember.bmm(ember.ones(5, 2, 3), ember.ones(5, 3, 4)).shape
    ember.Size([5, 2, 4])
    """
    input, mat2 = autocast_inputs("bmm", input, mat2)
    _check_ranks("bmm", (3, 3), input, mat2)
    if input.shape[0] != mat2.shape[0]:
        raise ShapeError(f"bmm: batch sizes differ: {input.shape[0]} != {mat2.shape[0]} "
                         f"(shapes {_shapes(input, mat2)})")
    _check_inner("bmm", input, mat2, input.shape[2], mat2.shape[1])
    return apply(_MATMUL, input, mat2)


def mv(input, vec):
    """The product of matrix ``input`` (n×k) and vector ``vec`` (k).

    >>> ember.mv(ember.ones(2, 3), ember.ones(3))
    tensor([3., 3.])
    """
    input, vec = autocast_inputs("mv", input, vec)
    _check_ranks("mv", (2, 1), input, vec)
    _check_inner("mv", input, vec, input.shape[1], vec.shape[0])
    return apply_in_given_dtypes(_MATMUL, input, vec)  # autocast leaves mv alone


def dot(input, tensor):
    """The inner product of two 1-D tensors of the same size (a 0-d tensor).

    >>> ember.dot(ember.tensor([1.0, 2.0]), ember.tensor([3.0, 4.0]))
    tensor(11.)
    """
    input, tensor = autocast_inputs("dot", input, tensor)
    _check_ranks("dot", (1, 1), input, tensor)
    if input.shape[0] != tensor.shape[0]:
        raise ShapeError(f"dot: inconsistent tensor sizes: shapes {_shapes(input, tensor)} "
                         f"have {input.shape[0]} and {tensor.shape[0]} elements")
    return apply_in_given_dtypes(_MATMUL, input, tensor)  # autocast leaves dot alone


def vdot(input, other):
    """The inner product of two 1-D tensors, the first conjugated where complex (the same
    as :func:`dot` for real tensors).

    >>> ember.vdot(ember.tensor([1.0, 2.0]), ember.tensor([3.0, 4.0]))
    tensor(11.)
    """
    if getattr(input, "dtype", None) is not None and input.dtype.is_complex:
        from .complex_support import conj_physical
        input = conj_physical(input)
    return dot(input, other)


def outer(input, vec2):
    """The outer product of 1-D tensors: ``out[i, j] = input[i] * vec2[j]`` (dtypes
    promote as in multiplication).

    >>> ember.outer(ember.tensor([1.0, 2.0]), ember.tensor([1.0, 10.0]))
    tensor([[ 1., 10.],
            [ 2., 20.]])
    """
    for name, t in (("input", input), ("vec2", vec2)):
        if not isinstance(t, Tensor) or t.ndim != 1:
            got = f"{t.ndim}-D" if isinstance(t, Tensor) else type(t).__name__
            raise ShapeError(f"outer: expected 1-D argument {name}, but got {got}")
    return reshape(input, (-1, 1)) * vec2


ger = outer


def _add_scaled(op: str, input, product, beta, alpha):
    """beta * input + alpha * product; ``input`` must broadcast to the product's shape
    and is ignored (NaN included) when beta is 0."""
    _same_dtype(op, input, product)
    out_shape = tuple(product.shape)
    try:
        fits = broadcast_shapes(tuple(input.shape), out_shape) == out_shape
    except ShapeError:
        fits = False
    if not fits:
        raise ShapeError(f"{op}: input of shape {tuple(input.shape)} does not broadcast to "
                         f"the product's shape {out_shape}")
    if alpha != 1:
        product = product * alpha
    if beta == 0:
        return product
    return product + (input if beta == 1 else input * beta)


def addmm(input, mat1, mat2, *, beta=1, alpha=1):
    """``beta * input + alpha * (mat1 @ mat2)`` for matrices; ``input`` broadcasts.

    >>> ember.addmm(ember.zeros(3), ember.ones(2, 4), ember.ones(4, 3), alpha=0.5)
    tensor([[2., 2., 2.],
            [2., 2., 2.]])
    """
    input, mat1, mat2 = autocast_inputs("addmm", input, mat1, mat2)
    return _add_scaled("addmm", input, mm(mat1, mat2), beta, alpha)


def baddbmm(input, batch1, batch2, *, beta=1, alpha=1):
    """``beta * input + alpha * bmm(batch1, batch2)``; ``input`` broadcasts.

    >>> ember.baddbmm(ember.zeros(1, 3), ember.ones(5, 2, 4), ember.ones(5, 4, 3)).shape
    ember.Size([5, 2, 3])
    """
    input, batch1, batch2 = autocast_inputs("baddbmm", input, batch1, batch2)
    return _add_scaled("baddbmm", input, bmm(batch1, batch2), beta, alpha)


def addmv(input, mat, vec, *, beta=1, alpha=1):
    """``beta * input + alpha * (mat @ vec)``; ``input`` broadcasts.

    >>> ember.addmv(ember.ones(2), ember.ones(2, 3), ember.ones(3))
    tensor([4., 4.])
    """
    input, mat, vec = autocast_inputs("addmv", input, mat, vec)
    return _add_scaled("addmv", input, mv(mat, vec), beta, alpha)


# einsum -----------------------------------------------------------------------------------------
_LETTERS = string.ascii_letters
_OPTIMIZE_SIZE = 2048  # below this many elements, planning a contraction costs more than it saves


def _einsum_forward(xp, *arrays, equation):
    half = _is_half(arrays[0])
    if half:
        dtype, arrays = arrays[0].dtype, [a.astype(_F32) for a in arrays]
    optimize = len(arrays) > 2 or (len(arrays) == 2 and
                                   arrays[0].size + arrays[1].size >= _OPTIMIZE_SIZE)
    out = xp.asarray(xp.einsum(equation, *arrays, optimize="greedy" if optimize else False))
    if half:
        return out.astype(dtype)
    # einsum may hand back a view of an operand ("ij->ji", "ii->i"); results own memory.
    return out.copy() if any(xp.may_share_memory(out, a) for a in arrays) else out


def _einsum_error(message: str, equation: str) -> EmberError:
    return EmberError(f"einsum(): {message} (equation '{equation}')")


def _parse_einsum(equation: str, shapes: list) -> str:
    """``equation`` with implicit output made explicit and each ``...`` replaced by
    letters, after checking it against the operands' shapes."""
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    for c in eq:
        if c not in _LETTERS and c not in ",.->":
            raise _einsum_error(f"invalid subscript {c!r}; subscripts must be letters", equation)
    terms = lhs.split(",")
    if len(terms) != len(shapes):
        raise _einsum_error(f"the equation has {len(terms)} operand(s) but {len(shapes)} "
                            "were given", equation)
    spare = [c for c in _LETTERS if c not in eq]
    split = []
    for i, (term, shape) in enumerate(zip(terms, shapes)):
        pre, dots, post = term.partition("...")
        if "." in pre or "." in post:
            raise _einsum_error(f"operand {i} has an invalid ellipsis", equation)
        n_ell = len(shape) - len(pre) - len(post)
        if n_ell < 0 or (not dots and n_ell):
            raise _einsum_error(f"the number of subscripts ({len(pre) + len(post)}) does not "
                                f"match the number of dimensions ({len(shape)}) for operand "
                                f"{i}{'' if dots else ' and no ellipsis was given'}", equation)
        split.append((pre, n_ell, post))
    width = max([k for _, k, _ in split], default=0)
    ell = "".join(spare[:width])
    inputs = [pre + ell[width - k:] + post for pre, k, post in split]
    if arrow:
        if "." in rhs.replace("...", "", 1):
            raise _einsum_error("the output has an invalid ellipsis", equation)
        rhs = rhs.replace("...", ell)
        for c in rhs:
            if rhs.count(c) > 1:
                raise _einsum_error(f"output subscript {c} appears more than once", equation)
            if not any(c in t for t in inputs):
                raise _einsum_error(f"output subscript {c} does not appear in the equation "
                                    "for any input operand", equation)
    else:
        joined = "".join(inputs)
        rhs = ell + "".join(sorted(c for c in set(joined) if joined.count(c) == 1
                                   and c not in ell))
    sizes: dict = {}
    for i, (term, shape) in enumerate(zip(inputs, shapes)):
        own: dict = {}
        for c, s in zip(term, shape):
            if own.setdefault(c, s) != s:
                raise ShapeError(f"einsum(): subscript {c} is repeated for operand {i} but "
                                 f"the sizes don't match, {own[c]} != {s}")
            seen = sizes.get(c, 1)
            if s != seen and 1 not in (s, seen):
                raise ShapeError(f"einsum(): subscript {c} has size {s} for operand {i} which "
                                 f"does not broadcast with previously seen size {seen} "
                                 f"(shapes {', '.join(str(tuple(x)) for x in shapes)})")
            sizes[c] = s if seen == 1 else seen
    return ",".join(inputs) + "->" + rhs


def _einsum_vjp(n, g):
    """The gradient of operand i is an einsum of the output gradient with the other
    operands. Subscripts of operand i that nothing else carries (summed inside it, or
    broadcast from size 1) come back through a ones vector under a fresh letter, and
    repeated subscripts (a diagonal) through an identity matrix."""
    from .creation import eye, ones
    operands = n.saved_inputs()
    lhs, rhs = n.params["equation"].split("->")
    terms = lhs.split(",")
    sizes: dict = {}
    for term, x in zip(terms, operands):
        for c, s in zip(term, x.shape):
            sizes[c] = s if sizes.get(c, 1) == 1 else sizes[c]
    fresh_letters = [c for c in _LETTERS if c not in n.params["equation"]]
    kw = dict(dtype=g.dtype, device=g.device)
    grads = []
    for i, (term, x) in enumerate(zip(terms, operands)):
        if n.edges[i] is None:
            grads.append(None)
            continue
        others = [j for j in range(len(terms)) if j != i]
        carried = set(rhs).union(*(terms[j] for j in others))
        fresh = iter(fresh_letters)
        out, extra_terms, extra, name = [], [], [], {}
        for c, s in zip(term, x.shape):
            if c in name:  # repeated: the gradient lies on the diagonal
                f = next(fresh)
                extra_terms.append(name[c] + f)
                extra.append(eye(s, **kw))
            elif c in carried and sizes[c] == s:
                f = c
            else:
                f = next(fresh)
                extra_terms.append(f)
                extra.append(ones(s, **kw))
            name.setdefault(c, f)
            out.append(f)
        eq = ",".join([rhs] + [terms[j] for j in others] + extra_terms) + "->" + "".join(out)
        grad = einsum(eq, g, *[operands[j] for j in others], *extra)
        if tuple(grad.shape) != tuple(x.shape):  # a subscript the others carry only at size 1
            grad = grad.expand(*x.shape)
        grads.append(grad)
    return tuple(grads)


_EINSUM = register("einsum", _einsum_forward, _einsum_vjp)


_SUBSCRIPT_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


def _sublist_equation(args: tuple):
    """``(a, [0, 1], b, [1, 2], [0, 2])`` as ``("ab,bc->ac", (a, b))``: subscripts are
    ints in [0, 52) (a-z, then A-Z) or ``...``."""
    def letters(sublist):
        if not isinstance(sublist, (list, tuple)):
            raise EmberTypeError(f"einsum(): expected a list of subscripts after each "
                                 f"operand, got {type(sublist).__name__}")
        out = []
        for s in sublist:
            if s is Ellipsis:
                out.append("...")
            elif isinstance(s, int) and not isinstance(s, bool) and 0 <= s < 52:
                out.append(_SUBSCRIPT_LETTERS[s])
            else:
                raise EmberError(f"einsum(): subscripts must be integers in [0, 52) or "
                                 f"Ellipsis, got {s!r}")
        return "".join(out)
    operands, subs = list(args[0:len(args) - len(args) % 2:2]), list(args[1::2])
    out = "->" + letters(args[-1]) if len(args) % 2 else ""
    if len(subs) != len(operands):
        raise EmberError("einsum(): the sublist form alternates operands and subscript lists")
    return ",".join(letters(s) for s in subs) + out, tuple(operands)


def einsum(equation: str, *operands):
    """Sum of products over the subscripts in ``equation`` (Einstein summation):
    ``"ij,jk->ik"`` is a matrix product, ``"ii->i"`` a diagonal, ``"...ij->...ji"`` a
    batched transpose. Without ``->`` the output holds the subscripts that appear once,
    in alphabetical order. Operands may also be given as one list. Size-1 dims broadcast.

    >>> ember.einsum("ij,j->i", ember.ones(2, 3), ember.tensor([1.0, 2.0, 3.0]))
    tensor([6., 6.])
    """
    if not isinstance(equation, str):  # the sublist form: einsum(a, [0, 1], b, [1, 2], [0, 2])
        equation, operands = _sublist_equation((equation,) + operands)
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    if not operands:
        raise EmberError("einsum(): must provide at least one operand")
    operands = autocast_inputs("einsum", *operands)
    _same_dtype("einsum", *operands, allow_bool=len(operands) == 1)
    eq = _parse_einsum(equation, [tuple(t.shape) for t in operands])
    x = operands[0]
    if len(operands) == 1 and not x.dtype.is_floating_point and \
            set(eq.partition("->")[2]) != set(eq.partition("->")[0]):
        # A sum over one integer operand gives int64, as ember.sum does.
        operands = (x.to(dt.int64),)
    return apply(_EINSUM, *operands, equation=eq)


def tensordot(a, b, dims=2):
    """Contract dims of ``a`` with dims of ``b``: ``dims=n`` pairs the last n dims of
    ``a`` with the first n of ``b``; ``dims=([1, 0], [0, 2])`` names them. The result
    holds ``a``'s free dims, then ``b``'s.

    >>> ember.tensordot(ember.ones(2, 3, 4), ember.ones(3, 4, 5)).shape
    ember.Size([2, 5])
    """
    _same_dtype("tensordot", a, b)
    if isinstance(dims, numbers.Integral):
        if not 0 <= dims <= min(a.ndim, b.ndim):
            raise EmberError(f"tensordot: dims must be in [0, {min(a.ndim, b.ndim)}] for "
                             f"shapes {_shapes(a, b)}, got {dims}")
        dims_a, dims_b = list(range(a.ndim - dims, a.ndim)), list(range(dims))
    else:
        dims_a, dims_b = ([d] if isinstance(d, numbers.Integral) else list(d) for d in dims)
        if len(dims_a) != len(dims_b):
            raise EmberError(f"tensordot: both dim lists must have the same length, got "
                             f"{dims_a} and {dims_b}")
        dims_a = [wrap_dim(d, a.ndim, "tensordot") for d in dims_a]
        dims_b = [wrap_dim(d, b.ndim, "tensordot") for d in dims_b]
    for da, db in zip(dims_a, dims_b):
        if a.shape[da] != b.shape[db]:
            raise ShapeError(f"tensordot: contracted dimensions need to match, but first has "
                             f"size {a.shape[da]} in dim {da} and second has size "
                             f"{b.shape[db]} in dim {db} (shapes {_shapes(a, b)})")
    free_a = [d for d in range(a.ndim) if d not in dims_a]
    free_b = [d for d in range(b.ndim) if d not in dims_b]
    k = math.prod(a.shape[d] for d in dims_a)
    a2 = reshape(permute(a, tuple(free_a + dims_a)), (math.prod(a.shape[d] for d in free_a), k))
    b2 = reshape(permute(b, tuple(dims_b + free_b)), (k, math.prod(b.shape[d] for d in free_b)))
    out = apply(_MATMUL, a2, b2)
    return reshape(out, tuple(a.shape[d] for d in free_a) + tuple(b.shape[d] for d in free_b))


Tensor.__matmul__ = matmul
Tensor.__rmatmul__ = lambda self, other: matmul(other, self)
