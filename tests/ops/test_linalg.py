"""Linear algebra against PyTorch, NumPy and finite differences."""
import numpy as np
import pytest

import ember
from .optable import FLOATS, OpCase, S, generate, nc, needs_torch, rand, torch

T = torch
NUMERIC = FLOATS + ("int64", "int32", "uint8")


def _t(fn):
    return None if T is None else fn()


def pairs(*shape_pairs):
    """Samples of two operands with the given shapes (the first pair also non-contiguous)."""
    def samples(rng, dtype):
        out = [S(rand(rng, a, dtype), rand(rng, b, dtype)) for a, b in shape_pairs]
        a, b = shape_pairs[0]
        return out + [S(nc(rand(rng, a, dtype)), nc(rand(rng, b, dtype)))]
    return samples


def triples(*shapes, **kwargs):
    def samples(rng, dtype):
        return [S(*(rand(rng, s, dtype) for s in group), **kw) for group in shapes
                for kw in ([{}] + [kwargs] if kwargs else [{}])]
    return samples


def einsum_samples(rng, dtype):
    r = lambda *shape: rand(rng, shape, dtype)  # noqa: E731
    # Three operands: PyTorch rounds the pairwise intermediate to the half dtype, ember
    # keeps it in float32, so those are compared in float32 and float64 only.
    chains = [] if dtype in ("float16", "bfloat16") else [
        S("bn,anm,bm->ba", r(2, 3), r(4, 3, 5), r(2, 5)),
        S("ij,jk,kl->il", r(2, 3), r(3, 4), r(4, 2))]
    return chains + [
        S("ij,jk->ik", r(3, 4), r(4, 5)), S("ij,jk", nc(r(3, 4)), r(4, 5)),
        S("bij,bjk->bik", r(2, 3, 4), r(2, 4, 5)), S("ii->i", r(3, 3)), S("ii", r(3, 3)),
        S("ij->ji", r(3, 4)), S("...ij,...jk->...ik", r(2, 1, 3, 4), r(5, 4, 2)),
        S("i,j->ij", r(3), r(4)), S("ij,ij->", r(3, 4), r(3, 4)), S("ijk->", r(2, 3, 4)),
        S("ij->j", r(3, 4)),
        S("i,i", r(5), r(5)), S("ij,j->i", r(3, 4), r(4)), S("ba", r(3, 4)),
        S("ij,ij->ij", r(3, 1), r(3, 4)), S("iij->ij", r(3, 3, 2)), S("...->", r(2, 3)),
        S(",ij->ij", r(), r(2, 3)), S("ij,jk->ik", r(0, 3), r(3, 2)),
        S("Ab,bA->A", r(2, 3), r(3, 2)), S("i j , j k -> i k", r(2, 3), r(3, 2)),
        S("...i,...i->...", r(4, 3), r(3)), S("iji->j", r(2, 3, 2))]


def tensordot_samples(rng, dtype):
    r = lambda *shape: rand(rng, shape, dtype)  # noqa: E731
    return [S(r(2, 3, 4), r(3, 4, 5)), S(r(3, 4), r(4, 5), 1), S(r(3, 4), r(2, 5), 0),
            S(r(3, 4, 2), r(2, 5, 3), dims=([0, 2], [2, 0])), S(r(3, 4), r(4, 3), ([1], [0])),
            S(nc(r(3, 4)), r(4, 5), dims=1), S(r(0, 3), r(3, 2), 1), S(r(3, 0), r(0, 2), 1)]


CASES = [
    OpCase("matmul", ember.matmul, _t(lambda: T.matmul),
           pairs(((3, 4), (4, 5)), ((4,), (4,)), ((3, 4), (4,)), ((4,), (4, 5)),
                 ((2, 3, 4), (4, 5)), ((4,), (2, 4, 5)), ((2, 3, 4), (4,)),
                 ((2, 1, 3, 4), (5, 4, 2)), ((3, 4), (2, 4, 5)), ((0, 3), (3, 2)),
                 ((3, 0), (0, 2)), ((1, 1), (1, 1)), ((2, 3, 4), (2, 4, 5))),
           np_fn=np.matmul, dtypes=NUMERIC),
    OpCase("mm", ember.mm, _t(lambda: T.mm), pairs(((3, 4), (4, 5)), ((1, 3), (3, 1)),
                                                  ((0, 2), (2, 3))),
           np_fn=np.matmul, dtypes=NUMERIC),
    OpCase("bmm", ember.bmm, _t(lambda: T.bmm), pairs(((2, 3, 4), (2, 4, 5)),
                                                     ((1, 1, 3), (1, 3, 2))),
           np_fn=np.matmul, dtypes=NUMERIC),
    OpCase("mv", ember.mv, _t(lambda: T.mv), pairs(((3, 4), (4,)), ((0, 2), (2,))),
           np_fn=np.matmul, dtypes=NUMERIC),
    OpCase("dot", ember.dot, _t(lambda: T.dot), pairs(((5,), (5,)), ((0,), (0,))),
           np_fn=np.dot, dtypes=NUMERIC),
    OpCase("vdot", ember.vdot, _t(lambda: T.vdot), pairs(((5,), (5,))), np_fn=np.vdot),
    OpCase("outer", ember.outer, _t(lambda: T.outer), pairs(((3,), (4,)), ((0,), (2,))),
           np_fn=np.outer, dtypes=NUMERIC),
    OpCase("ger", ember.ger, _t(lambda: T.ger), pairs(((3,), (4,)))),
    OpCase("addmm", ember.addmm, _t(lambda: T.addmm),
           triples(((3, 5), (3, 4), (4, 5)), ((5,), (3, 4), (4, 5)), ((1, 1), (2, 3), (3, 1)),
                   beta=0.5, alpha=2.0)),
    OpCase("addmm_beta0", lambda i, a, b: ember.addmm(i, a, b, beta=0),
           _t(lambda: lambda i, a, b: T.addmm(i, a, b, beta=0)),
           lambda rng, d: [S(np.full((3, 2), np.nan).astype(ember.dtypes.as_dtype(d).np),
                             rand(rng, (3, 4), d), rand(rng, (4, 2), d))], grad=False),
    OpCase("baddbmm", ember.baddbmm, _t(lambda: T.baddbmm),
           triples(((2, 3, 5), (2, 3, 4), (2, 4, 5)), ((5,), (2, 3, 4), (2, 4, 5)),
                   beta=2.0, alpha=-1.0)),
    OpCase("addmv", ember.addmv, _t(lambda: T.addmv),
           triples(((3,), (3, 4), (4,)), ((1,), (3, 4), (4,)), beta=0.5, alpha=3.0)),
    OpCase("einsum", ember.einsum, _t(lambda: T.einsum), einsum_samples, dtypes=NUMERIC),
    OpCase("tensordot", ember.tensordot, _t(lambda: T.tensordot), tensordot_samples,
           np_fn=lambda a, b, dims=2: np.tensordot(a, b, dims), dtypes=NUMERIC),
]

generate(CASES, globals())


# Known values and rules ---------------------------------------------------------------------
def test_matmul_rules_for_1d_operands():
    a = ember.tensor([[1.0, 2.0], [3.0, 4.0]])
    v = ember.tensor([1.0, 10.0])
    assert (v @ v).shape == () and (v @ v).item() == 101.0
    assert (a @ v).tolist() == [21.0, 43.0]
    assert (v @ a).tolist() == [31.0, 42.0]
    batch = ember.stack([a, 2 * a])
    assert (batch @ v).tolist() == [[21.0, 43.0], [42.0, 86.0]]
    assert (v @ batch).shape == (2, 2)
    assert ember.matmul(ember.ones(2, 1, 3, 4), ember.ones(5, 4, 6)).shape == (2, 5, 3, 6)


def test_operators_and_methods():
    a = ember.tensor([[1.0, 2.0], [3.0, 4.0]])
    assert (a @ a).tolist() == [[7.0, 10.0], [15.0, 22.0]]
    assert ember.Tensor.__rmatmul__(a, ember.eye(2)).tolist() == a.tolist()
    assert a.mm(a).tolist() == (a @ a).tolist()
    assert a.matmul(a[0]).tolist() == [5.0, 11.0]
    assert a[0].dot(a[1]).item() == 11.0
    assert a[0].outer(a[1]).tolist() == [[3.0, 4.0], [6.0, 8.0]]
    assert not hasattr(ember.Tensor, "einsum") and not hasattr(ember.Tensor, "tensordot")
    y = a.clone()
    y @= ember.eye(2)
    assert y.tolist() == a.tolist()


def test_grads_known_values():
    a = ember.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    v = ember.tensor([1.0, -1.0], requires_grad=True)
    (a @ v).sum().backward()
    assert a.grad.tolist() == [[1.0, -1.0], [1.0, -1.0]]
    assert v.grad.tolist() == [4.0, 6.0]


def test_einsum_known_values():
    m = ember.arange(9.0).reshape(3, 3)
    assert ember.einsum("ii", m).item() == 12.0
    assert ember.einsum("ii->i", m).tolist() == [0.0, 4.0, 8.0]
    assert ember.einsum("ij->ji", m).tolist() == m.t().tolist()
    assert ember.einsum("ij,jk->ik", [m, ember.eye(3)]).tolist() == m.tolist()
    assert ember.einsum("ba", ember.ones(2, 3)).shape == (3, 2)  # implicit: alphabetical
    assert ember.einsum("...ij->ij", ember.ones(4, 2, 3)).tolist() == [[4.0] * 3] * 2
    ints = ember.ones(3, 3, dtype=ember.int32)
    assert ember.einsum("ij->i", ints).dtype is ember.int64  # a sum, as in torch
    assert ember.einsum("ij->ji", ints).dtype is ember.int32
    assert ember.einsum("ij,jk", ints, ints).dtype is ember.int32
    assert ember.einsum("ij->j", ember.ones(2, 2, dtype=ember.bool)).tolist() == [2, 2]


def test_einsum_result_owns_its_memory():
    m = ember.zeros(3, 3)
    d = ember.einsum("ii->i", m)
    d += 1
    assert m.sum().item() == 0.0


def test_einsum_diagonal_grad():
    x = ember.arange(9.0).reshape(3, 3).requires_grad_()
    ember.einsum("ii->", x).backward()
    assert x.grad.tolist() == np.eye(3).tolist()


def test_half_matmul_accumulates_in_float32():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((8, 2048)).astype(np.float16)
    b = rng.standard_normal((2048, 8)).astype(np.float16)
    exact = a.astype(np.float64) @ b.astype(np.float64)
    got = ember.from_numpy(a) @ ember.from_numpy(b)
    assert got.dtype is ember.float16
    # within one float16 ulp of the exact product: float16 accumulation is far worse
    ulp = np.spacing(np.abs(exact).astype(np.float16)).astype(np.float64)
    assert np.all(np.abs(got.numpy().astype(np.float64) - exact) <= ulp)
    bf = ember.from_numpy(a).to(ember.bfloat16)
    assert (bf @ bf.t()).dtype is ember.bfloat16


@needs_torch
@pytest.mark.parametrize("layout", ["rows", "transposed", "flipped", "broadcast"])
def test_batched_matmul_of_strided_views_matches_torch(layout):
    """Batched operands that are views (attention's q, k, v split from one projection,
    transposed, reversed, expanded), which the forward hands to BLAS as they are or
    copies first; values and gradients of both operands against PyTorch."""
    rng = np.random.default_rng(0)
    qkv = rng.standard_normal((3, 5, 3 * 8)).astype(np.float32)
    other = rng.standard_normal((3, 2, 4, 5)).astype(np.float32)
    up = rng.standard_normal((3, 2, 5, 5)).astype(np.float32)

    def run(lib, make):
        base = make(qkv).requires_grad_(True)
        w = make(other).requires_grad_(True)
        q, k = base.split(8, dim=2)[:2]
        q = q.reshape(3, 5, 2, 4).transpose(1, 2)    # rows 24 apart: a view
        k = k.reshape(3, 5, 2, 4).transpose(1, 2)
        if layout == "rows":
            a, b = q, k.transpose(-2, -1)            # second operand transposed
        elif layout == "transposed":
            a, b = w.transpose(-2, -1), q.transpose(-2, -1)    # both operands transposed
        elif layout == "flipped":
            a, b = q.flip(-1), w.flip(-2)
        else:
            a, b = q, w[:1, :1].expand(3, 2, 4, 5)
        out = a @ b
        out.backward(lib.from_numpy(up[..., :out.shape[-1]].copy()))
        return out, base.grad, w.grad

    got = run(ember, ember.from_numpy)
    want = run(torch, torch.from_numpy)
    for g, w in zip(got, want):
        if w is None:
            assert g is None
            continue
        np.testing.assert_allclose(g.detach().numpy(), w.detach().numpy(), rtol=1e-5,
                                   atol=1e-5)


def test_tensordot_known_values():
    a = ember.arange(6.0).reshape(2, 3)
    b = ember.arange(6.0).reshape(3, 2)
    assert ember.tensordot(a, b, 1).tolist() == (a @ b).tolist()
    assert ember.tensordot(a, a, ([0, 1], [0, 1])).item() == 55.0
    assert ember.tensordot(a, b, 0).shape == (2, 3, 3, 2)


# Errors ---------------------------------------------------------------------------------------
def test_matmul_misaligned():
    with pytest.raises(ember.ShapeError,
                       match=r"^matmul: shapes \(3, 4\) and \(5, 6\) are not aligned: 4 != 5$"):
        ember.ones(3, 4) @ ember.ones(5, 6)
    with pytest.raises(ember.ShapeError, match=r"matmul: shapes \(3,\) and \(4, 2\) are not"):
        ember.ones(3) @ ember.ones(4, 2)
    with pytest.raises(ember.ShapeError, match=r"matmul: the batch dimensions \(2,\) and \(3,\)"):
        ember.ones(2, 3, 4) @ ember.ones(3, 4, 5)
    with pytest.raises(ember.ShapeError, match="matmul: both arguments need to be at least 1-D"):
        ember.ones(()) @ ember.ones(3)


def test_fixed_rank_products_check_ranks_and_sizes():
    with pytest.raises(ember.ShapeError, match=r"bmm: expected 3-D and 3-D tensors, but got "
                                               r"2-D and 3-D \(shapes \(3, 4\) and \(3, 4, 4\)\)"):
        ember.bmm(ember.ones(3, 4), ember.ones(3, 4, 4))
    with pytest.raises(ember.ShapeError, match=r"bmm: batch sizes differ: 2 != 3"):
        ember.bmm(ember.ones(2, 3, 4), ember.ones(3, 4, 4))
    with pytest.raises(ember.ShapeError, match=r"bmm: shapes \(2, 3, 4\) and \(2, 5, 4\) are "
                                               r"not aligned: 4 != 5"):
        ember.bmm(ember.ones(2, 3, 4), ember.ones(2, 5, 4))
    with pytest.raises(ember.ShapeError, match=r"mm: expected 2-D and 2-D tensors, but got 1-D"):
        ember.mm(ember.ones(3), ember.ones(3, 4))
    with pytest.raises(ember.ShapeError, match=r"mm: shapes \(3, 4\) and \(5, 4\) are not aligned"):
        ember.mm(ember.ones(3, 4), ember.ones(5, 4))
    with pytest.raises(ember.ShapeError, match=r"mv: shapes \(3, 4\) and \(5,\) are not aligned"):
        ember.mv(ember.ones(3, 4), ember.ones(5))
    with pytest.raises(ember.ShapeError, match=r"mv: expected 2-D and 1-D tensors"):
        ember.mv(ember.ones(3, 4), ember.ones(4, 1))
    with pytest.raises(ember.ShapeError, match=r"dot: inconsistent tensor sizes"):
        ember.dot(ember.ones(3), ember.ones(4))
    with pytest.raises(ember.ShapeError, match=r"dot: expected 1-D and 1-D tensors"):
        ember.dot(ember.ones(3, 1), ember.ones(3))
    with pytest.raises(ember.ShapeError, match=r"outer: expected 1-D argument input, but got 2-D"):
        ember.outer(ember.ones(3, 2), ember.ones(3))
    with pytest.raises(ember.ShapeError, match=r"addmm: input of shape \(2, 5\) does not "
                                               r"broadcast"):
        ember.addmm(ember.ones(2, 5), ember.ones(3, 4), ember.ones(4, 5))


def test_dtype_errors():
    with pytest.raises(ember.EmberTypeError, match="matmul: expected all tensors to have the "
                                                   "same dtype, but got float32 and float64"):
        ember.ones(3, 4) @ ember.ones(4, 5, dtype=ember.float64)
    with pytest.raises(ember.EmberTypeError, match="dot: .*same dtype"):
        ember.dot(ember.ones(3), ember.ones(3, dtype=ember.float64))
    with pytest.raises(ember.EmberTypeError, match="matmul: bool"):
        ember.ones(2, 2, dtype=ember.bool) @ ember.ones(2, 2, dtype=ember.bool)
    with pytest.raises(ember.EmberTypeError, match="matmul: expected Tensor"):
        ember.matmul(ember.ones(2, 2), np.ones((2, 2)))
    assert ember.outer(ember.ones(2, dtype=ember.int64), ember.ones(2)).dtype is ember.float32


def test_einsum_errors():
    with pytest.raises(ember.EmberError, match=r"einsum\(\): the number of subscripts \(2\) does "
                                               r"not match the number of dimensions \(1\) for "
                                               r"operand 0"):
        ember.einsum("ij", ember.ones(3))
    with pytest.raises(ember.EmberError, match=r"output subscript k does not appear"):
        ember.einsum("ij->ik", ember.ones(3, 3))
    with pytest.raises(ember.ShapeError, match=r"subscript j has size 4 for operand 1 which does "
                                               r"not broadcast with previously seen size 2"):
        ember.einsum("ij,ij->ij", ember.ones(3, 2), ember.ones(3, 4))
    with pytest.raises(ember.EmberError, match=r"2 operand\(s\) but 1 were given"):
        ember.einsum("ij,jk", ember.ones(3, 3))
    with pytest.raises(ember.EmberError, match="invalid subscript '1'"):
        ember.einsum("i1", ember.ones(3, 3))
    with pytest.raises(ember.ShapeError, match="repeated for operand 0"):
        ember.einsum("ii", ember.ones(3, 4))


def test_tensordot_errors():
    with pytest.raises(ember.ShapeError, match=r"tensordot: contracted dimensions need to match, "
                                               r"but first has size 4 in dim 1 and second has "
                                               r"size 5 in dim 0"):
        ember.tensordot(ember.ones(3, 4), ember.ones(5, 5), 1)
    with pytest.raises(ember.EmberError, match=r"tensordot: dims must be in \[0, 2\]"):
        ember.tensordot(ember.ones(3, 4), ember.ones(4, 5), 3)


@needs_torch
def test_method_surface_matches_torch():
    for name in ("matmul", "mm", "bmm", "mv", "dot", "vdot", "outer", "ger", "addmm",
                 "baddbmm", "addmv", "__matmul__", "__rmatmul__"):
        assert hasattr(T.Tensor, name) and hasattr(ember.Tensor, name), name
    for name in ("einsum", "tensordot"):
        assert not hasattr(T.Tensor, name) and not hasattr(ember.Tensor, name), name
