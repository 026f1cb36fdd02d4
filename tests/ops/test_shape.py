"""Shape ops (views, splits, joins) against PyTorch, NumPy and finite differences, plus
memory sharing, write-through of views, and errors."""
import numpy as np
import pytest

import ember
from .optable import ALL, OpCase, S, generate, nc, needs_torch, rand, torch

T = torch


def _torch(fn):
    return None if T is None else fn


def _lib(x):
    return ember if isinstance(x, ember.Tensor) else T


def joined(split_fn):
    """A multi-output op as one output (each piece flattened and scaled by its position),
    so the gradient templates see every piece."""
    def fn(x, *args):
        pieces = split_fn(x, *args)
        return _lib(x).cat([p.reshape(-1) * (i + 1) for i, p in enumerate(pieces)])
    return fn


def samples(*build):
    """``samples(lambda r: [...])`` with ``r(shape)`` drawing values of the dtype."""
    def make(rng, d):
        return build[0](lambda shape: rand(rng, shape, d))
    return make


def case(name, fn, torch_fn, build, np_fn=None, **kw):
    return OpCase(name, fn, _torch(torch_fn), samples(build), np_fn=np_fn, dtypes=ALL, **kw)


SPLIT_SAMPLES = lambda r: [S(r((5, 4)), 2), S(r((2, 7)), 3, -1), S(r((4, 3)), [1, 0, 3]),  # noqa: E731
                           S(nc(r((4, 6))), (2, 4), 1), S(r((0, 3)), 0), S(r((3, 2)), 5)]
CHUNK_SAMPLES = lambda r: [S(r((5, 4)), 2), S(r((2, 7)), 3, -1), S(r((6,)), 4),  # noqa: E731
                           S(nc(r((4, 6))), 5, 1), S(r((2, 0)), 3, 1), S(r((2, 3)), 1)]
TSPLIT_SAMPLES = lambda r: [S(r((7, 2)), 3), S(r((2, 5)), (1, 4), 1),  # noqa: E731
                            S(r((2, 6)), (3, 1), -1), S(r((6,)), (-2,)), S(r((4,)), [1, 9]),
                            S(nc(r((5, 3))), 2), S(r((2, 3)), 5, 1)]
UNBIND_SAMPLES = lambda r: [S(r((3, 2))), S(r((2, 3, 4)), -1), S(nc(r((3, 4))), 1),  # noqa: E731
                            S(r((2,)))]

CASES = [
    case("reshape", lambda x, s: ember.reshape(x, s), lambda x, s: T.reshape(x, s),
         lambda r: [S(r((2, 3, 4)), (4, -1)), S(nc(r((3, 4))), (12,)), S(r(()), (1, 1)),
                    S(r((0, 3)), (3, 0)), S(r((1,)), ()), S(nc(r((2, 3, 2))), (2, -1))],
         np_fn=np.reshape),
    case("view", lambda x, *s: x.view(*s), lambda x, *s: x.view(*s),
         lambda r: [S(r((2, 3, 4)), (6, 4)), S(r((2, 3, 4)), -1, 2), S(r(()), ()),
                    S(nc(r((3, 4))), 3, 4, 1), S(nc(r((6,))), 2, 3), S(r((0, 2)), 2, 0, 1)]),
    case("permute", lambda x, d: ember.permute(x, d), lambda x, d: T.permute(x, d),
         lambda r: [S(r((2, 3, 4)), (2, 0, 1)), S(nc(r((3, 4))), (1, 0)), S(r(()), ()),
                    S(r((0, 2, 3)), (-1, 0, 1))],
         np_fn=np.transpose),
    case("transpose", ember.transpose, lambda *a: T.transpose(*a),
         lambda r: [S(r((2, 3, 4)), 0, -1), S(nc(r((3, 4))), 1, 0), S(r(()), 0, -1),
                    S(r((2, 0, 3)), 1, 2), S(r((2, 3)), 1, 1)],
         np_fn=lambda x, a, b: np.swapaxes(x, a, b) if x.ndim else x),
    case("swapaxes", ember.swapaxes, lambda *a: T.swapaxes(*a),
         lambda r: [S(r((2, 3, 4)), -1, 1)]),
    case("t", ember.t, lambda x: T.t(x),
         lambda r: [S(r((2, 3))), S(r((3,))), S(r(())), S(nc(r((3, 4))))]),
    case("adjoint", ember.adjoint, lambda x: T.adjoint(x),
         lambda r: [S(r((2, 3, 4))), S(nc(r((3, 2))))]),
    case("movedim", ember.movedim, lambda *a: T.movedim(*a),
         lambda r: [S(r((2, 3, 4)), 0, -1), S(r((2, 3, 4)), (0, 1), (2, 0)),
                    S(nc(r((3, 4, 2))), (-1,), (0,)), S(r((2, 3)), (0, 1), (1, 0))],
         np_fn=np.moveaxis),
    case("expand", lambda x, *s: x.expand(*s), lambda x, *s: x.expand(*s),
         lambda r: [S(r((2, 1, 4)), 3, 2, 5, 4), S(r((3, 1)), (-1, 4)), S(r(()), 2, 3),
                    S(r((1, 3)), 0, 3), S(nc(r((1, 4))), 2, 2, -1), S(r((2, 3)), 2, 3)]),
    case("broadcast_to", ember.broadcast_to, lambda x, s: T.broadcast_to(x, s),
         lambda r: [S(r((3, 1)), (2, 3, 4)), S(r(()), (2,)), S(nc(r((4, 1))), (4, 3))],
         np_fn=np.broadcast_to),
    case("squeeze", ember.squeeze, lambda *a: T.squeeze(*a),
         lambda r: [S(r((1, 3, 1, 2))), S(r((1, 3, 1, 2)), 2), S(r((1, 3, 1, 2)), (0, -2)),
                    S(r((1, 3, 1, 2)), 1), S(r(())), S(r(()), 0), S(r((1, 1)), (0, 1)),
                    S(nc(r((3, 1))), -1), S(r((1, 0, 1)), (0, 1))]),
    case("unsqueeze", ember.unsqueeze, lambda *a: T.unsqueeze(*a),
         lambda r: [S(r((2, 3)), 0), S(r((2, 3)), -1), S(r((2, 3)), 1), S(r(()), 0),
                    S(nc(r((3, 4))), -2), S(r((0, 3)), 2)],
         np_fn=np.expand_dims),
    case("flatten", ember.flatten, lambda *a: T.flatten(*a),
         lambda r: [S(r((2, 3, 4))), S(r((2, 3, 4)), 1), S(r((2, 3, 4)), -2, -1), S(r(())),
                    S(nc(r((3, 4, 2))), 0, 1), S(r((2, 0, 3)), 1), S(r((2, 3)), 1, 1)]),
    case("ravel", ember.ravel, lambda x: T.ravel(x),
         lambda r: [S(r((2, 3))), S(nc(r((3, 4))))], np_fn=np.ravel),
    case("unflatten", ember.unflatten, lambda *a: T.unflatten(*a),
         lambda r: [S(r((2, 6)), 1, (2, 3)), S(r((2, 6, 2)), -2, (3, -1)),
                    S(nc(r((4, 6))), 0, (2, 2, 1)), S(r((2, 0)), 1, (0, 3))]),
    case("narrow", ember.narrow, lambda *a: T.narrow(*a),
         lambda r: [S(r((4, 5)), 0, 1, 2), S(r((4, 5)), -1, -3, 3), S(r((4, 5)), 1, 5, 0),
                    S(nc(r((4, 5))), 1, 0, 4)]),
    case("select", ember.select, lambda *a: T.select(*a),
         lambda r: [S(r((4, 5)), 0, 1), S(r((4, 5)), -1, -2), S(nc(r((3, 4, 2))), 1, 3),
                    S(r((3,)), 0, 2)]),
    case("split", ember.split, lambda *a: T.split(*a), SPLIT_SAMPLES),
    case("split_grad", joined(ember.split), joined(lambda *a: T.split(*a)), SPLIT_SAMPLES),
    case("chunk", ember.chunk, lambda *a: T.chunk(*a), CHUNK_SAMPLES),
    case("chunk_grad", joined(ember.chunk), joined(lambda *a: T.chunk(*a)), CHUNK_SAMPLES),
    case("tensor_split", ember.tensor_split, lambda *a: T.tensor_split(*a), TSPLIT_SAMPLES),
    case("tensor_split_grad", joined(ember.tensor_split),
         joined(lambda *a: T.tensor_split(*a)), TSPLIT_SAMPLES),
    case("unbind", ember.unbind, lambda *a: T.unbind(*a), UNBIND_SAMPLES),
    case("unbind_grad", joined(ember.unbind), joined(lambda *a: T.unbind(*a)), UNBIND_SAMPLES),
    case("contiguous", lambda x: x.contiguous(), lambda x: x.contiguous(),
         lambda r: [S(nc(r((3, 4)))), S(r((2, 3))), S(nc(r((5,)))), S(r(()))]),
    case("clone", ember.clone, lambda x: T.clone(x),
         lambda r: [S(nc(r((3, 4)))), S(r(())), S(r((0, 2)))]),
    case("cat", lambda a, b, dim=0: ember.cat([a, b], dim),
         lambda a, b, dim=0: T.cat([a, b], dim),
         lambda r: [S(r((2, 3)), r((1, 3))), S(r((2, 3)), r((2, 4)), -1),
                    S(r((2, 3)), r((0, 3))), S(r((2, 3)), r((0,))), S(r((0,)), r((2, 3)), 1),
                    S(nc(r((3, 4))), r((3, 2)), 1), S(r((1, 2, 3)), r((1, 2, 3)), 2)],
         np_fn=None),
    case("stack", lambda a, b, dim=0: ember.stack([a, b], dim),
         lambda a, b, dim=0: T.stack([a, b], dim),
         lambda r: [S(r((2, 3)), r((2, 3))), S(r((2, 3)), r((2, 3)), -1), S(r(()), r(())),
                    S(nc(r((3, 4))), r((3, 4)), 1), S(r((0, 2)), r((0, 2)), 2)],
         np_fn=lambda a, b, dim=0: np.stack([a, b], dim)),
    case("hstack", lambda a, b: ember.hstack([a, b]), lambda a, b: T.hstack([a, b]),
         lambda r: [S(r((2, 3)), r((2, 1))), S(r((3,)), r((2,))), S(r(()), r((2,))),
                    S(nc(r((2, 3))), r((2, 3)))],
         np_fn=lambda a, b: np.hstack([a, b])),
    case("vstack", lambda a, b: ember.vstack([a, b]), lambda a, b: T.vstack([a, b]),
         lambda r: [S(r((2, 3)), r((1, 3))), S(r((3,)), r((3,))), S(r(()), r(())),
                    S(r((2, 3, 2)), nc(r((1, 3, 2))))],
         np_fn=lambda a, b: np.vstack([a, b])),
    case("dstack", lambda a, b: ember.dstack([a, b]), lambda a, b: T.dstack([a, b]),
         lambda r: [S(r((2, 3)), r((2, 3))), S(r((3,)), r((3,))), S(r(()), r(())),
                    S(r((2, 3, 2)), nc(r((2, 3, 1))))],
         np_fn=lambda a, b: np.dstack([a, b])),
    case("atleast_3d", ember.atleast_3d, lambda x: T.atleast_3d(x),
         lambda r: [S(r(())), S(r((3,))), S(r((2, 3))), S(r((1, 2, 3, 1)))],
         np_fn=np.atleast_3d),
]

generate(CASES, globals())


def test_cat_promotes_dtypes():
    out = ember.cat([ember.ones(2, dtype=ember.int32), ember.ones(1, dtype=ember.float16)])
    assert out.dtype is ember.float16 and out.tolist() == [1, 1, 1]
    assert ember.stack([ember.tensor([1]), ember.tensor([True])]).dtype is ember.int64


# Views share memory with their input ----------------------------------------------------
VIEWS = {
    "view": lambda x: x.view(4, 6),
    "reshape": lambda x: x.reshape(6, -1),
    "permute": lambda x: x.permute(2, 0, 1),
    "transpose": lambda x: x.transpose(0, 2),
    "t": lambda x: x[0].t(),
    "movedim": lambda x: x.movedim(0, -1),
    "expand": lambda x: x[:, :1].expand(2, 5, 4),
    "broadcast_to": lambda x: _lib(x).broadcast_to(x[0, 0], (3, 4)),
    "squeeze": lambda x: x[:, 1:2].squeeze((1, 2)),
    "unsqueeze": lambda x: x.unsqueeze(1),
    "flatten": lambda x: x.flatten(1),
    "unflatten": lambda x: x.unflatten(2, (2, 2)),
    "narrow": lambda x: x.narrow(2, 1, 2),
    "select": lambda x: x.select(1, -1),
    "diagonal": lambda x: x.diagonal(1, 1, 2),
    "contiguous_of_contiguous": lambda x: x.contiguous(),
    "view_dtype": lambda x: x.view(_lib(x).int64),
}
MULTI_VIEWS = {
    "split": lambda x: x.split(2, 2), "split_sections": lambda x: x.split([1, 2], 1),
    "chunk": lambda x: x.chunk(3, 1), "tensor_split": lambda x: x.tensor_split((1, -1), 2),
    "unbind": lambda x: x.unbind(1),
}


def _base(lib):
    return lib.arange(24, dtype=lib.float64).reshape(2, 3, 4).clone()


@needs_torch
@pytest.mark.parametrize("name", sorted(VIEWS))
def test_view_writes_through_to_its_base(name):
    results = []
    for lib in (ember, T):
        x = _base(lib)
        v = VIEWS[name](x)
        if lib is ember:
            assert np.shares_memory(v.numpy(), x.numpy()), f"{name} copied"
        x.add_(100)  # the base's change shows in the view
        seen = v.clone()
        if name != "expand" and name != "broadcast_to":  # expanded views are not writable
            v.fill_(-1)
        results.append((x.numpy().copy(), seen.numpy().copy()))
    np.testing.assert_array_equal(results[0][0], results[1][0])
    np.testing.assert_array_equal(results[0][1], results[1][1])


@needs_torch
@pytest.mark.parametrize("name", sorted(MULTI_VIEWS))
def test_split_pieces_write_through_to_their_base(name):
    results = []
    for lib in (ember, T):
        x = _base(lib)
        for i, piece in enumerate(MULTI_VIEWS[name](x)):
            if lib is ember:
                assert piece.numel() == 0 or np.shares_memory(piece.numpy(), x.numpy())
            piece.mul_(-(i + 1))
        results.append(x.numpy().copy())
    np.testing.assert_array_equal(results[0], results[1])


def test_copies_do_not_share_memory():
    x = ember.arange(6.0).reshape(2, 3)
    for out in (x.clone(), x.t().contiguous(), ember.cat([x, x]), ember.stack([x]),
                x.t().reshape(-1)):
        assert not np.shares_memory(out.numpy(), x.numpy())
    assert x.contiguous() is x


@needs_torch
@pytest.mark.parametrize("name", ["transpose", "narrow", "select", "diagonal", "unflatten",
                                  "squeeze"])
def test_inplace_through_view_grad_matches_torch(name):
    grads = []
    for lib in (ember, T):
        leaf = lib.tensor(np.linspace(-1, 1, 24).reshape(2, 3, 4), requires_grad=True)
        x = leaf * 2.0
        VIEWS[name](x).mul_(3.0)
        (x * x).sum().backward()
        grads.append(leaf.grad.numpy())
    np.testing.assert_allclose(grads[0], grads[1])


def test_view_dtype_reinterprets_bits():
    x = ember.tensor([1.0, 2.0])
    assert x.view(ember.int32).tolist() == [1065353216, 1073741824]
    assert x.view(ember.int16).shape == (4,) and x.view(ember.float64).shape == (1,)
    assert ember.tensor([True, False]).view(ember.uint8).tolist() == [1, 0]
    assert not ember.ones(2, requires_grad=True).view(ember.int32).requires_grad


def test_non_viewable_view_raises_naming_the_op():
    x = ember.arange(6.0).reshape(2, 3)
    with pytest.raises(ember.ShapeError, match=r"view: .*stride.*use \.reshape"):
        x.t().view(6)
    with pytest.raises(ember.ShapeError, match="view: "):
        ember.arange(24.0).reshape(2, 3, 4).permute(2, 1, 0).view(4, 6)
    assert x.t().reshape(6).tolist() == [0, 3, 1, 4, 2, 5]


def test_known_values():
    x = ember.arange(6).reshape(2, 3)
    assert x.tolist() == [[0, 1, 2], [3, 4, 5]]
    assert x.t().tolist() == [[0, 3], [1, 4], [2, 5]]
    assert [p.tolist() for p in x.split([1, 2], 1)] == [[[0], [3]], [[1, 2], [4, 5]]]
    assert [p.shape for p in ember.zeros(2, 0).chunk(3, 1)] == [(2, 0)] * 3
    assert [p.tolist() for p in ember.arange(6).tensor_split((-2,))] == [[0, 1, 2, 3], [4, 5]]
    assert [p.tolist() for p in ember.arange(5).tensor_split(ember.tensor(2))] == \
        [[0, 1, 2], [3, 4]]
    assert ember.cat([x, ember.zeros(0, dtype=ember.int64)]).tolist() == x.tolist()
    assert ember.cat([x, ember.zeros(0)]).dtype is ember.float32
    assert ember.squeeze(ember.zeros(1, 2, 1, 3), (0, 2)).shape == (2, 3)
    assert ember.movedim(ember.zeros(2, 3, 4), (0, 1), (2, 0)).shape == (3, 4, 2)


# Errors ----------------------------------------------------------------------------------
X = ember.zeros(2, 3, 4)


@pytest.mark.parametrize("call, error, match", [
    (lambda: X.view(5, -1), ember.ShapeError, r"view: shape '\[5, -1\]' is invalid for input "
                                              "of size 24"),
    (lambda: X.view(-1, -1), ember.ShapeError, "view: only one dimension can be inferred"),
    (lambda: X.reshape(-1, 0), ember.ShapeError, "reshape: shape"),
    (lambda: ember.zeros(3).view(ember.float64), ember.ShapeError, "view: self.size\\(-1\\) must be "
                                                      "divisible by 2"),
    (lambda: ember.tensor(1.0).view(ember.int16), ember.ShapeError, "view: self.dim\\(\\)"),
    (lambda: X.permute(2, 0), ember.ShapeError, "permute: number of dims don't match"),
    (lambda: X.permute(0, 0, 1), ember.EmberError, "permute: dim .* multiple times"),
    (lambda: X.transpose(0, 3), ember.EmberIndexError, r"transpose: Dimension out of range "
                                                       r"\(expected to be in range of \[-3, 2\]"),
    (lambda: X.t(), ember.ShapeError, "t: expects a tensor with <= 2 dimensions"),
    (lambda: X.movedim((0, 1), (0,)), ember.EmberError, "movedim: Invalid source or dest"),
    (lambda: X.expand(2, 5, 4), ember.ShapeError, r"expand: the expanded size of the tensor "
                                                  r"\(5\) must match the existing size \(3\)"),
    (lambda: X.expand(3, 4), ember.ShapeError, "expand: the number of sizes provided"),
    (lambda: X[:, :1].expand(-1, 2, -1, 4), ember.ShapeError, "expand: -1 is not allowed"),
    (lambda: X.squeeze(3), ember.EmberIndexError, "squeeze: Dimension out of range"),
    (lambda: X.squeeze((0, 0)), ember.EmberError, "squeeze: dim .* multiple times"),
    (lambda: X.unsqueeze(4), ember.EmberIndexError, "unsqueeze: Dimension out of range"),
    (lambda: X.flatten(2, 1), ember.EmberError, "flatten: start_dim cannot come after"),
    (lambda: X.unflatten(1, (2, -1)), ember.ShapeError, "unflatten: shape"),
    (lambda: X.narrow(1, 2, 2), ember.EmberIndexError, r"narrow: start \(2\) \+ length \(2\) "
                                                       r"exceeds dimension size \(3\)"),
    (lambda: X.narrow(1, 0, -1), ember.EmberError, "narrow: length must be non-negative"),
    (lambda: X.select(1, 3), ember.EmberIndexError, "select: index 3 out of range"),
    (lambda: ember.tensor(1.0).select(0, 0), ember.EmberIndexError, "select: .*0-dim"),
    (lambda: X.split([1, 1], 1), ember.ShapeError, "split: split_with_sizes expects "
                                                   "split_sizes to sum exactly to 3"),
    (lambda: X.split([2, -1, 2], 1), ember.ShapeError, "split: .*non-negative entries"),
    (lambda: X.split(0, 1), ember.EmberError, "split: split_size must be positive"),
    (lambda: ember.tensor(1.0).split(1), ember.ShapeError, "split: expects at least a 1-dim"),
    (lambda: X.chunk(0), ember.EmberError, "chunk: chunks must be greater than 0"),
    (lambda: X.tensor_split(0, 2), ember.EmberError, "tensor_split: number of sections"),
    (lambda: X.unbind(3), ember.EmberIndexError, "unbind: Dimension out of range"),
    (lambda: ember.cat([]), ember.EmberError, "cat: expected a non-empty list"),
    (lambda: ember.cat([X, X[0]]), ember.ShapeError, "cat: Tensors must have same number"),
    (lambda: ember.cat([X, X[:, :1]], 0), ember.ShapeError, "cat: Sizes of tensors must "
                                                            "match except in dimension 0"),
    (lambda: ember.cat([ember.tensor(1.0)]), ember.EmberError, "cat: zero-dimensional"),
    (lambda: ember.stack([X, X[:1]]), ember.ShapeError, "stack: expects each tensor to be "
                                                        "equal size"),
    (lambda: ember.stack([X, X], 4), ember.EmberIndexError, "stack: Dimension out of range"),
    (lambda: ember.stack([]), ember.EmberError, "stack: expected a non-empty list"),
    (lambda: ember.broadcast_shapes((2, 1), (3, 3)), ember.ShapeError,
     r"broadcast_shapes: shapes \(2, 1\), \(3, 3\) cannot be broadcast"),
])
def test_errors(call, error, match):
    with pytest.raises(error, match=match):
        call()
