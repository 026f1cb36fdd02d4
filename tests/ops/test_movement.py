"""Data-movement ops (pad, flip, roll, repeat, tril, diag, meshgrid, ...) against PyTorch,
NumPy and finite differences, plus known values, views and errors."""
import numpy as np
import pytest

import ember
from .optable import ALL, FLOATS, INTS, OpCase, S, generate, nc, needs_torch, rand, torch

T = torch
F = None if T is None else T.nn.functional
NUMERIC = FLOATS + INTS


def _torch(fn):
    return None if T is None else fn


def pad_samples(mode):
    def samples(rng, d):
        r = lambda shape: rand(rng, shape, d)  # noqa: E731
        if mode == "constant":
            return [S(r((2, 3, 4)), (1, 2)), S(r((2, 3)), (1, 0, 2, 1), value=1.5),
                    S(r((2, 3)), (-1, 2, 0, -1)), S(r(()), ()), S(r((0, 3)), (1, 1, 1, 0)),
                    S(nc(r((3, 4))), (2, 1, 1, 1)), S(r((3, 4)), (-1, -3)),
                    S(r((2, 2, 3)), [0, 0, 0, 0, 1, 1], value=3)]
        common = [S(r((2, 3, 5)), (2, 1), mode=mode), S(r((2, 4)), (3, 0), mode=mode),
                  S(r((1, 2, 3, 4)), (1, 2, 2, 1), mode=mode),
                  S(nc(r((2, 3, 4))), (-1, 2), mode=mode),
                  S(r((1, 1, 3, 3, 4)), (1, 1, 2, 0, 1, 2), mode=mode),
                  S(r((0, 2, 3)), (1, 1), mode=mode), S(r((2, 3)), (0, 0), mode=mode)]
        extra = {"reflect": [S(r((1, 3, 4)), (-2, 3), mode=mode)],
                 "replicate": [S(r((2, 2)), (5, 3), mode=mode),
                               S(nc(r((2, 3, 4))), (2, -3), mode=mode)],
                 "circular": [S(r((2, 3)), (3, 1), mode=mode),
                              S(r((1, 4, 3)), (-1, 2, 2, -1), mode=mode)]}
        return common + extra[mode]
    return samples


def flip_samples(rng, d):
    r = lambda shape: rand(rng, shape, d)  # noqa: E731
    return [S(r((2, 3, 4)), (0, 2)), S(r((2, 3)), (-1,)), S(r(()), ()), S(r((0, 3)), (1,)),
            S(nc(r((3, 4))), (0, 1)), S(r((3,)), [])]


def roll_samples(rng, d):
    r = lambda shape: rand(rng, shape, d)  # noqa: E731
    return [S(r((3, 4)), 1), S(r((3, 4)), (1, -2), (0, 1)), S(r((2, 3, 4)), -5, -1),
            S(r(()), 2), S(r((0, 3)), 1, 0), S(nc(r((4, 3))), (2, 1), (1, 1)),
            S(r((3, 4)), 7, None)]


def rot90_samples(rng, d):
    r = lambda shape: rand(rng, shape, d)  # noqa: E731
    return [S(r((2, 3))), S(r((2, 3, 4)), 2, (0, 2)), S(r((2, 3, 4)), 3, (-1, 1)),
            S(nc(r((3, 4))), -1), S(r((2, 3)), 0), S(r((0, 2)), 5, (1, 0))]


def repeat_samples(rng, d):
    r = lambda shape: rand(rng, shape, d)  # noqa: E731
    return [S(r((2, 3)), 2, 1, 2), S(r(()), 3), S(r(()), ()), S(r((2, 3)), (0, 2)),
            S(nc(r((3, 2))), 1, 2), S(r((1, 3)), [2, 2])]


def tile_samples(rng, d):
    r = lambda shape: rand(rng, shape, d)  # noqa: E731
    return [S(r((2, 3)), (2,)), S(r((2, 3)), (2, 1, 2)), S(r(()), (3,)),
            S(nc(r((3, 2))), (2, 2)), S(r((2, 3)), ())]


def repeat_interleave_samples(rng, d):
    r = lambda shape: rand(rng, shape, d)  # noqa: E731
    return [S(r((2, 3)), 2), S(r((2, 3)), 3, 1), S(r((2, 3)), 2, -2), S(r(()), 3),
            S(r((0, 3)), 2, 0), S(nc(r((3, 4))), 2, 1), S(r((2, 3)), 0, 1),
            S(r((3, 4)), np.array([1, 0, 2]), 0), S(r((3, 4)), np.array([2]), 1),
            S(r((2, 3)), np.array([1, 2, 0, 1, 3, 1])), S(r((2, 3)), np.array(2), 1),
            S(nc(r((3, 4))), np.array([2, 1, 0, 3]), -1)]


def triangle_samples(rng, d):
    r = lambda shape: rand(rng, shape, d)  # noqa: E731
    return [S(r((3, 4))), S(r((4, 3)), -1), S(r((2, 3, 4)), 2), S(nc(r((4, 4))), 1),
            S(r((0, 3))), S(r((2, 3)), -5), S(r((2, 3)), 7), S(r((2, 1, 0, 3)), 1)]


def diag_samples(rng, d):
    r = lambda shape: rand(rng, shape, d)  # noqa: E731
    return [S(r((3,))), S(r((3,)), 2), S(r((2,)), -1), S(r((0,))), S(r((3, 4))),
            S(r((3, 4)), 1), S(r((4, 3)), -2), S(r((3, 4)), 5), S(nc(r((4, 4))), -1)]


def diagonal_samples(rng, d):
    r = lambda shape: rand(rng, shape, d)  # noqa: E731
    return [S(r((3, 4))), S(r((3, 4)), 1), S(r((4, 3)), -2), S(r((2, 3, 4)), 0, 0, 2),
            S(r((2, 3, 4)), -1, -1, 0), S(nc(r((3, 4, 2))), 1, 2, 1), S(r((2, 0, 3)), 0, 0, 2),
            S(r((3, 4)), 6)]


def diag_embed_samples(rng, d):
    r = lambda shape: rand(rng, shape, d)  # noqa: E731
    return [S(r((3,))), S(r((2, 3)), 1, 0, 2), S(r((2, 3)), -1, -1, 0),
            S(nc(r((3, 2))), 2), S(r((2, 0)), 1)]


def trace_samples(rng, d):
    r = lambda shape: rand(rng, shape, d)  # noqa: E731
    return [S(r((3, 4))), S(r((4, 3))), S(r((0, 3))), S(nc(r((3, 3))))]


def meshgrid_samples(rng, d):
    r = lambda shape: rand(rng, shape, d)  # noqa: E731
    return [S(r((3,)), r((2,))), S(r((3,)), r((2,)), r((4,)), indexing="xy"),
            S(r(()), r((2,)), indexing="ij"), S(r((0,)), r((3,)), indexing="xy"),
            S(r((3,)), indexing="xy")]


CASES = [
    OpCase("pad_constant", ember.pad, _torch(lambda *a, **k: F.pad(*a, **k)),
           pad_samples("constant"), dtypes=ALL),
    OpCase("pad_reflect", ember.pad, _torch(lambda *a, **k: F.pad(*a, **k)),
           pad_samples("reflect"), dtypes=NUMERIC),
    OpCase("pad_replicate", ember.pad, _torch(lambda *a, **k: F.pad(*a, **k)),
           pad_samples("replicate"), dtypes=NUMERIC),
    OpCase("pad_circular", ember.pad, _torch(lambda *a, **k: F.pad(*a, **k)),
           pad_samples("circular"), dtypes=ALL),
    OpCase("flip", ember.flip, _torch(lambda x, dims: T.flip(x, tuple(dims))), flip_samples,
           np_fn=lambda x, dims: np.flip(x, tuple(dims)), dtypes=ALL),
    OpCase("fliplr", ember.fliplr, _torch(lambda x: T.fliplr(x)),
           lambda rng, d: [S(rand(rng, (3, 4), d)), S(nc(rand(rng, (2, 3, 2), d)))],
           np_fn=np.fliplr, dtypes=ALL),
    OpCase("flipud", ember.flipud, _torch(lambda x: T.flipud(x)),
           lambda rng, d: [S(rand(rng, (3,), d)), S(nc(rand(rng, (2, 3), d)))],
           np_fn=np.flipud, dtypes=ALL),
    OpCase("roll", ember.roll, _torch(lambda x, s, d=None: T.roll(x, s, d if d is not None
                                                                  else ())), roll_samples,
           np_fn=lambda x, s, d=None: np.roll(x, s, d), dtypes=ALL),
    OpCase("rot90", ember.rot90, _torch(lambda *a: T.rot90(*a)), rot90_samples,
           np_fn=lambda x, k=1, dims=(0, 1): np.rot90(x, k, dims), dtypes=ALL),
    OpCase("repeat", lambda x, *s: x.repeat(*s), _torch(lambda x, *s: x.repeat(*s)),
           repeat_samples, dtypes=ALL),
    OpCase("tile", ember.tile, _torch(lambda x, dims: T.tile(x, dims)), tile_samples,
           np_fn=np.tile, dtypes=ALL),
    OpCase("repeat_interleave", ember.repeat_interleave,
           _torch(lambda *a: T.repeat_interleave(*a)), repeat_interleave_samples, dtypes=ALL),
    OpCase("tril", ember.tril, _torch(lambda *a: T.tril(*a)), triangle_samples, np_fn=np.tril,
           dtypes=ALL),
    OpCase("triu", ember.triu, _torch(lambda *a: T.triu(*a)), triangle_samples, np_fn=np.triu,
           dtypes=ALL),
    OpCase("diag", ember.diag, _torch(lambda *a: T.diag(*a)), diag_samples, np_fn=np.diag,
           dtypes=ALL),
    OpCase("diagonal", ember.diagonal, _torch(lambda *a: T.diagonal(*a)), diagonal_samples,
           np_fn=np.diagonal, dtypes=ALL),
    OpCase("diag_embed", ember.diag_embed, _torch(lambda *a: T.diag_embed(*a)),
           diag_embed_samples, dtypes=ALL),
    OpCase("trace", ember.trace, _torch(lambda x: T.trace(x)), trace_samples, np_fn=np.trace,
           dtypes=NUMERIC),
    OpCase("meshgrid", lambda *a, indexing="ij": ember.meshgrid(*a, indexing=indexing),
           _torch(lambda *a, indexing="ij": T.meshgrid(*a, indexing=indexing)),
           meshgrid_samples, np_fn=lambda *a, indexing="ij": np.meshgrid(*a, indexing=indexing),
           dtypes=ALL),
]

generate(CASES, globals())


# Known values ----------------------------------------------------------------------------
def _values(t):
    return t.detach().numpy().tolist()


def test_pad_known_values():
    x = ember.tensor([[[1.0, 2.0, 3.0]]])
    assert _values(ember.pad(x, (2, 2), mode="reflect")) == [[[3, 2, 1, 2, 3, 2, 1]]]
    assert _values(ember.pad(x, (2, 1), mode="replicate")) == [[[1, 1, 1, 2, 3, 3]]]
    assert _values(ember.pad(x, (2, 1), mode="circular")) == [[[2, 3, 1, 2, 3, 1]]]
    assert _values(ember.pad(x, (1, -2), value=7.0)) == [[[7, 1]]]
    assert _values(ember.pad(x, (0, 0, 1, 0))) == [[[0, 0, 0], [1, 2, 3]]]
    ints = ember.pad(ember.tensor([[1, 2]]), (1, 1), value=2.7)
    assert ints.dtype is ember.int64 and _values(ints) == [[2, 1, 2, 2]]


def test_pad_backward_accumulates_repeated_elements():
    x = ember.tensor([[[1.0, 2.0, 3.0]]], requires_grad=True)
    ember.pad(x, (2, 2), mode="reflect").sum().backward()
    assert _values(x.grad) == [[[2, 3, 2]]]
    x.grad = None
    ember.pad(x, (2, 1), mode="replicate").sum().backward()
    assert _values(x.grad) == [[[3, 1, 2]]]
    x.grad = None
    ember.pad(x, (3, 2), mode="circular").sum().backward()
    assert _values(x.grad) == [[[3, 3, 2]]]


def test_movement_known_values():
    x = ember.tensor([[1, 2, 3], [4, 5, 6]])
    assert _values(ember.flip(x, (0, 1))) == [[6, 5, 4], [3, 2, 1]]
    assert _values(ember.roll(x, 1)) == [[6, 1, 2], [3, 4, 5]]
    assert _values(ember.roll(x, (1, -1), (0, 1))) == [[5, 6, 4], [2, 3, 1]]
    assert _values(ember.rot90(x)) == [[3, 6], [2, 5], [1, 4]]
    assert _values(x.repeat(1, 2)) == [[1, 2, 3, 1, 2, 3], [4, 5, 6, 4, 5, 6]]
    assert tuple(x.repeat(2, 1, 1).shape) == (2, 2, 3)
    assert _values(ember.tile(ember.tensor([1, 2]), (2,))) == [1, 2, 1, 2]
    assert _values(ember.repeat_interleave(ember.tensor([1, 2]), 2)) == [1, 1, 2, 2]
    assert _values(x.repeat_interleave(ember.tensor([0, 2]), dim=0)) == [[4, 5, 6], [4, 5, 6]]
    assert _values(ember.repeat_interleave(ember.tensor([2, 0, 1]))) == [0, 0, 2]
    assert _values(ember.tril(x)) == [[1, 0, 0], [4, 5, 0]]
    assert _values(ember.triu(x, 1)) == [[0, 2, 3], [0, 0, 6]]
    assert _values(ember.diag(ember.tensor([1, 2]), -1)) == [[0, 0, 0], [1, 0, 0], [0, 2, 0]]
    assert _values(ember.diag(x, 1)) == [2, 6]
    assert _values(ember.diagonal(x, -1)) == [4]
    assert _values(ember.diag_embed(ember.tensor([[1, 2]]))) == [[[1, 0], [0, 2]]]
    tr = ember.trace(ember.tensor([[1, 2], [3, 4]], dtype=ember.int32))
    assert tr.dtype is ember.int64 and tr.item() == 5
    gx, gy = ember.meshgrid(ember.tensor([1, 2, 3]), ember.tensor([4, 5]), indexing="xy")
    assert _values(gx) == [[1, 2, 3], [1, 2, 3]] and _values(gy) == [[4, 4, 4], [5, 5, 5]]


def test_repeat_and_pad_are_not_where_pytorch_has_none():
    assert not hasattr(ember, "repeat") and "repeat" not in ember.ops.movement.__all__
    assert ember.Tensor.repeat is ember.ops.movement.repeat
    assert not hasattr(ember.Tensor, "pad") and not hasattr(ember.Tensor, "meshgrid")
    assert ember.ones(2).flip(0).shape == (2,) and ember.ones(2, 2).diagonal().shape == (2,)


# Views ----------------------------------------------------------------------------------
def test_diagonal_is_a_writable_view():
    x = ember.zeros(3, 4)
    d = x.diagonal(1)
    assert np.shares_memory(d.numpy(), x.numpy())
    d[0] = 5.0
    d.add_(1.0)
    assert _values(x) == [[0, 6, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]]
    x[1, 2] = -3.0
    assert _values(d) == [6, -3, 1]
    batched = ember.zeros(2, 3, 3)
    batched.diagonal(0, -2, -1).fill_(2.0)
    assert _values(batched.sum((1, 2))) == [6, 6]


def test_meshgrid_outputs_are_views_of_the_inputs():
    a, b = ember.arange(3.0), ember.arange(2.0)
    ga, gb = ember.meshgrid(a, b)
    assert np.shares_memory(ga.numpy(), a.numpy()) and np.shares_memory(gb.numpy(), b.numpy())
    a[0] = 10.0
    assert _values(ga[:, 0]) == [10, 1, 2]


def test_copying_ops_do_not_alias():
    x = ember.arange(6.0).reshape(2, 3)
    for out in (ember.flip(x, (0,)), ember.roll(x, 1), x.repeat(1, 1), ember.tile(x, ()),
                ember.tril(x), ember.diag(x), ember.pad(x, (0, 0)), ember.rot90(x, 0),
                ember.repeat_interleave(x, 1, 0)):
        assert not np.shares_memory(out.numpy(), x.numpy())


@needs_torch
def test_inplace_through_diagonal_view_grad_matches_torch():
    data = np.arange(9.0).reshape(3, 3)
    grads = []
    for lib in (ember, T):
        leaf = lib.tensor(data, requires_grad=True)
        x = leaf * 1.0
        x.diagonal().mul_(3.0)
        (x * x).sum().backward()
        grads.append(leaf.grad.detach().numpy())
    np.testing.assert_allclose(grads[0], grads[1])


# Gradients of gradients with respect to the upstream gradient: checks each backward
# primitive's own VJP (the finite-difference template cannot, the ops being linear).
DOUBLE_BACKWARD = {
    "pad_reflect": (lambda lib, x: _pad(lib)(x, (2, 1, 1, 0), mode="reflect"), (1, 3, 4)),
    "pad_replicate": (lambda lib, x: _pad(lib)(x, (3, -1), mode="replicate"), (2, 2, 3)),
    "pad_circular": (lambda lib, x: _pad(lib)(x, (2, 1, -1, 2), mode="circular"), (1, 3, 3)),
    "pad_constant": (lambda lib, x: _pad(lib)(x, (2, -1, 0, 1), value=3.0), (3, 4)),
    "repeat_interleave": (lambda lib, x: lib.repeat_interleave(
        x, lib.tensor([2, 0, 3]), dim=1), (2, 3)),
    "repeat_interleave_int": (lambda lib, x: lib.repeat_interleave(x, 3, dim=0), (2, 3)),
    "repeat": (lambda lib, x: x.repeat(2, 1, 3), (2, 3)),
    "diagonal": (lambda lib, x: lib.diagonal(x, 1, 2, 0), (3, 2, 4)),
    "diag_embed": (lambda lib, x: lib.diag_embed(x, -1, 0, 2), (2, 3)),
    "roll": (lambda lib, x: lib.roll(x, (1, -2), (0, 1)), (3, 4)),
    "flip": (lambda lib, x: lib.flip(x, (1,)), (3, 4)),
    "tril": (lambda lib, x: lib.tril(x, -1), (3, 4)),
}


def _pad(lib):
    return ember.pad if lib is ember else F.pad


@needs_torch
@pytest.mark.parametrize("name", sorted(DOUBLE_BACKWARD))
def test_double_backward_matches_torch(name):
    fn, shape = DOUBLE_BACKWARD[name]
    rng = np.random.default_rng(0)
    x0 = rng.standard_normal(shape)
    results = []
    for lib in (ember, T):
        x = lib.tensor(x0, requires_grad=True)
        out = fn(lib, x)
        u = lib.tensor(np.random.default_rng(1).standard_normal(tuple(out.shape)),
                       requires_grad=True)
        (g,) = lib.autograd.grad(out, [x], u, create_graph=True)
        w = lib.tensor(np.random.default_rng(2).standard_normal(shape))
        (gu,) = lib.autograd.grad((g * w).sum(), [u])
        results.append((g.detach().numpy(), gu.detach().numpy()))
    np.testing.assert_allclose(results[0][0], results[1][0], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(results[0][1], results[1][1], rtol=1e-12, atol=1e-12)


# Errors ----------------------------------------------------------------------------------
X3 = ember.zeros(1, 2, 3)


@pytest.mark.parametrize("call, error, match", [
    (lambda: ember.pad(X3, (1,)), ember.ShapeError, "pad: Padding length must be divisible"),
    (lambda: ember.pad(X3, (1,) * 8), ember.ShapeError, "pad:.*less than or equal to two"),
    (lambda: ember.pad(X3, (1, 1), mode="wrap"), ember.EmberError, "pad: Unrecognised"),
    (lambda: ember.pad(X3, (1.5, 1)), ember.EmberTypeError, "pad: argument 'pad'"),
    (lambda: ember.pad(X3, (-2, -2)), ember.ShapeError, r"pad:.*negative output size"),
    (lambda: ember.pad(X3, (3, 0), mode="reflect"), ember.ShapeError,
     r"pad: Padding size should be less.*\(3, 0\) at dimension 2"),
    (lambda: ember.pad(X3, (4, 0), mode="circular"), ember.ShapeError, "pad: .*wrapping"),
    (lambda: ember.pad(X3, (-3, 1), mode="circular"), ember.ShapeError, "pad: negative"),
    (lambda: ember.pad(X3, (-4, 0), mode="replicate"), ember.ShapeError, "pad: .*too small"),
    (lambda: ember.pad(X3, (1, 1), mode="reflect", value=1.0), ember.EmberError,
     "pad: Padding mode \"reflect\" doesn't take in value"),
    (lambda: ember.pad(ember.zeros(3), (1, 1), mode="replicate"), ember.ShapeError,
     "pad: Padding size 2 is not supported for 1D"),
    (lambda: ember.pad(X3, (1, 1) * 3, mode="replicate"), ember.ShapeError,
     "pad: Padding size 6 is not supported for 3D"),
    (lambda: ember.pad(ember.zeros(1, 2, 0), (1, 1), mode="reflect"), ember.ShapeError,
     "pad: reflect padding needs non-empty"),
    (lambda: ember.pad(ember.zeros(2, dtype=ember.uint8), (1, 1), value=-2), ember.EmberError,
     "pad: value -2 cannot be converted to type uint8 without overflow"),
    (lambda: ember.flip(X3, (0, -3)), ember.EmberError, "flip: dim .* multiple times"),
    (lambda: ember.flip(X3, (3,)), ember.EmberIndexError, "flip: Dimension out of range"),
    (lambda: ember.fliplr(ember.zeros(3)), ember.ShapeError, "fliplr: Input must be >= 2-d"),
    (lambda: ember.flipud(ember.zeros(())), ember.ShapeError, "flipud: Input must be >= 1-d"),
    (lambda: ember.roll(X3, (1, 2)), ember.EmberError, "roll: shifts and dimensions must align"),
    (lambda: ember.roll(X3, 1, (0, 1)), ember.EmberError, "roll: shifts and dimensions"),
    (lambda: ember.roll(X3, ()), ember.EmberError, "roll: `shifts` required"),
    (lambda: ember.roll(ember.zeros(()), 1, 0), ember.EmberIndexError, "roll: Dimension"),
    (lambda: ember.rot90(X3, 1, (0, 0)), ember.EmberError, "rot90: .*dims to be different"),
    (lambda: ember.rot90(ember.zeros(3)), ember.ShapeError, "rot90: expected total dims >= 2"),
    (lambda: ember.rot90(X3, 1, (0, 1, 2)), ember.EmberError, "rot90: .*rotation dims == 2"),
    (lambda: X3.repeat(2, 2), ember.ShapeError, "repeat: Number of dimensions of repeat"),
    (lambda: X3.repeat(1, -1, 1), ember.ShapeError, "repeat: repeats must be non-negative"),
    (lambda: ember.repeat_interleave(X3, -1), ember.EmberError, "repeat_interleave: .*negative"),
    (lambda: ember.repeat_interleave(X3, ember.tensor([1, -1]), 1), ember.EmberError,
     "repeat_interleave: repeats can not be negative"),
    (lambda: ember.repeat_interleave(X3, ember.tensor([1, 2, 3]), 1), ember.ShapeError,
     "repeat_interleave: repeats must have the same size"),
    (lambda: ember.repeat_interleave(X3, ember.tensor([1.0, 2.0]), 1), ember.EmberTypeError,
     "repeat_interleave: repeats must be an integer tensor"),
    (lambda: ember.repeat_interleave(X3, ember.tensor([[1, 2]]), 1), ember.ShapeError,
     "repeat_interleave: repeats must be 0-dim or 1-dim"),
    (lambda: ember.repeat_interleave(X3, 2.0), ember.EmberTypeError,
     "repeat_interleave: repeats must be an int"),
    (lambda: ember.repeat_interleave(X3, 2, 0, output_size=3), ember.ShapeError,
     "repeat_interleave: Invalid output_size, expected 2"),
    (lambda: ember.repeat_interleave(ember.tensor([1.0, 2.0])), ember.EmberError,
     "repeat_interleave: called with repeats only"),
    (lambda: ember.repeat_interleave(ember.zeros(()), 2, 0), ember.EmberIndexError,
     "repeat_interleave: Dimension specified as 0"),
    (lambda: ember.tril(ember.zeros(3)), ember.ShapeError, "tril: input tensor must have at"),
    (lambda: ember.triu(ember.zeros(())), ember.ShapeError, "triu: input tensor must have at"),
    (lambda: ember.diag(X3), ember.ShapeError, r"diag: Supports 1D or 2D tensors. Got 3D"),
    (lambda: ember.diagonal(X3, 0, 1, -2), ember.EmberError, "diagonal: diagonal dimensions "
                                                             "cannot be identical"),
    (lambda: ember.diagonal(ember.zeros(3)), ember.EmberIndexError, "diagonal: Dimension out"),
    (lambda: ember.diag_embed(ember.zeros(())), ember.EmberIndexError, "diag_embed: Dimension"),
    (lambda: ember.trace(X3), ember.ShapeError, "trace: expected a matrix, but got tensor "
                                                "with dim 3"),
    (lambda: ember.trace(ember.zeros(2, 2, dtype=ember.bool)), ember.EmberTypeError,
     "trace: not implemented for 'Bool'"),
    (lambda: ember.meshgrid(X3), ember.ShapeError, "meshgrid: Expected 0D or 1D tensor"),
    (lambda: ember.meshgrid(ember.zeros(2), ember.zeros(2, dtype=ember.int64)),
     ember.EmberTypeError, "meshgrid: expects all tensors to have the same dtype"),
    (lambda: ember.meshgrid(ember.zeros(2), indexing="ji"), ember.EmberError,
     'meshgrid: indexing must be one of "xy" or "ij"'),
    (lambda: ember.meshgrid(), ember.EmberError, "meshgrid: expects a non-empty list"),
])
def test_errors(call, error, match):
    with pytest.raises(error, match=match):
        call()
