"""The Tensor methods of ``ember/ops/methods_more.py`` that change or share memory: the
in-place shape ops and ``resize_``, ``unfold``, ``as_strided``, the view scatters, and
the index writes (``put``, ``index_put``, ``index_reduce``, ``fill_diagonal_``); values,
strides, memory sharing, version counters and gradients against PyTorch, autograd's
in-place rules, ``ember.jit`` against eager, and errors. The math and small methods are
in ``test_tensor_methods_more_math.py``."""
import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")

rng = np.random.default_rng(0)


def pair(shape, dtype="float64", grad=False):
    """The same random values as an ember and a torch tensor."""
    a = rng.standard_normal(shape).astype(dtype)
    e, t = ember.tensor(a), torch.tensor(a)
    if grad:
        e.requires_grad_()
        t.requires_grad_()
    return e, t


def same_strides(e, t):
    """Strides agree (a size-1 dim's stride is arbitrary)."""
    assert [s for s, n in zip(e.stride(), e.shape) if n > 1] == \
        [s for s, n in zip(t.stride(), t.shape) if n > 1]


def close(e, t, rtol=1e-10, atol=1e-12):
    t = t.detach().numpy() if isinstance(t, torch.Tensor) else np.asarray(t)
    e = e.detach().numpy() if isinstance(e, ember.Tensor) else np.asarray(e)
    assert e.shape == t.shape, (e.shape, t.shape)
    np.testing.assert_allclose(e, t, rtol=rtol, atol=atol)


def grads_match(fe, ft, *shapes, weight=True):
    """``fe`` and ``ft`` on the same float64 inputs: values and gradients agree."""
    es, ts = zip(*(pair(s, grad=True) for s in shapes))
    oe, ot = fe(*es), ft(*ts)
    close(oe, ot)
    w = rng.standard_normal(tuple(ot.shape))
    ge = ember.autograd.grad((oe * ember.tensor(w)).sum(), list(es), allow_unused=True)
    gt = torch.autograd.grad((ot * torch.tensor(w)).sum(), list(ts), allow_unused=True)
    for a, b in zip(ge, gt):
        if b is None:
            assert a is None or not a.numpy().any()
        else:
            close(a, b)


# In-place shape ops ----------------------------------------------------------------------
SHAPE_OPS = [("t_", (2, 3), ()), ("t_", (4,), ()), ("t_", (), ()),
             ("transpose_", (2, 3, 4), (0, 2)), ("transpose_", (2, 3), (-1, 0)),
             ("swapaxes_", (1, 2, 0), (1, 2)), ("swapdims_", (3, 1), (0, 1)),
             ("squeeze_", (2, 1, 3, 1), ()), ("squeeze_", (2, 1, 3, 1), (1,)),
             ("squeeze_", (2, 1, 3, 1), ((1, 3),)), ("squeeze_", (2, 3), (0,)),
             ("squeeze_", (1,), ()), ("unsqueeze_", (2, 3), (1,)),
             ("unsqueeze_", (2, 3), (-1,)), ("unsqueeze_", (), (0,))]


@pytest.mark.parametrize("name,shape,args", SHAPE_OPS)
@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
def test_inplace_shape_ops_as_torch(name, shape, args, layout):
    e, t = pair(shape)
    if layout == "transposed" and len(shape) >= 2:
        e, t = e.mT, t.mT
    v = e._version[0]
    out = getattr(e, name)(*args)
    assert out is e
    getattr(t, name)(*args)
    close(e, t)
    same_strides(e, t)
    assert e._version[0] == v + 1
    # still the same memory: a write through the reshaped tensor shows in its base
    if e._base is not None:
        e.add_(1.0)
        t.add_(1.0)
        close(e._base, t._base)


def test_inplace_shape_op_on_nonleaf_has_the_view_gradient():
    grads_match(lambda x: (x * 2).squeeze_(1) * ember.arange(3.0, dtype=ember.float64),
                lambda x: (x * 2).squeeze_(1) * torch.arange(3.0, dtype=torch.float64),
                (3, 1))
    grads_match(lambda x: (x * 1).t_().unsqueeze_(0).exp(),
                lambda x: (x * 1).t_().unsqueeze_(0).exp(), (2, 3))


def test_inplace_shape_op_on_a_view_keeps_writes_reaching_the_base():
    def run(lib, w):
        a = w * 1
        b = a[0:2, 1:]
        b.t_()
        b.mul_(3)           # written through the transposed view
        return a * a
    grads_match(lambda w: run(ember, w), lambda w: run(torch, w), (3, 4))


def test_inplace_shape_ops_refuse_leaves_and_views_of_leaves_like_torch():
    w = ember.zeros(2, 1, requires_grad=True)
    for fn in (lambda x: x.t_(), lambda x: x.squeeze_(), lambda x: x.unsqueeze_(0),
               lambda x: x.transpose_(0, 1)):
        with pytest.raises(ember.EmberError, match="leaf Variable"):
            fn(w)
        with pytest.raises(ember.EmberError, match="view of a leaf"):
            fn(w[0:1])
    assert w.shape == (2, 1)
    with ember.no_grad():  # allowed without grad mode, as in PyTorch
        w.t_()
    assert w.shape == (1, 2) and w.is_leaf


def test_inplace_shape_op_bumps_the_version_saved_tensors_check():
    w = ember.ones(3, 1, requires_grad=True)
    a = w * 1
    c = a.sin()
    a.squeeze_(1)
    with pytest.raises(ember.EmberError, match="modified by an inplace operation"):
        c.sum().backward()


def test_views_taken_before_an_inplace_shape_change():
    w = ember.ones(3, 3, requires_grad=True)
    y = w * 1
    before = y[0]
    y.t_()
    after = y[0]  # the first row of w's transpose: its first column
    (after * ember.tensor([1.0, 2.0, 3.0])).sum().backward()
    np.testing.assert_array_equal(w.grad.numpy(), [[1, 0, 0], [2, 0, 0], [3, 0, 0]])
    with pytest.raises(ember.EmberError, match="taken before a tensor it comes from changed"):
        before.sum().backward()  # its history would be re-derived from the wrong shape
    with pytest.raises(ember.EmberError, match="Take the view again"):
        before.mul_(2)
    x = (w * 1)[1:]
    child = x[0]
    x.t_()  # a view changed in place: views of it made earlier are refused too
    with pytest.raises(ember.EmberError, match="changed its shape in place"):
        (child * 1).sum().backward()
    plain = ember.zeros(2, 3)  # without autograd, an earlier view just shares the memory
    row = plain[0]
    plain.t_().add_(1.0)
    np.testing.assert_array_equal((row + 1).numpy(), [2.0, 2.0, 2.0])


def test_inplace_shape_op_errors():
    with pytest.raises(ember.ShapeError, match="<= 2 dimensions"):
        ember.zeros(1, 2, 3).t_()
    with pytest.raises(ember.EmberIndexError):
        ember.zeros(2).unsqueeze_(3)
    with pytest.raises(ember.EmberIndexError):
        ember.zeros(2).transpose_(0, 1)


def test_retain_grad_follows_an_inplace_shape_op():
    w = ember.ones(2, 3, requires_grad=True)
    a = w * 2
    a.retain_grad()
    a.t_()
    (a * ember.arange(6.0).reshape(3, 2)).sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), np.arange(6.0).reshape(3, 2))


def test_inplace_shape_op_inside_jit_and_on_an_input():
    x = ember.randn(3, 4, dtype=ember.float64)

    def f(t):
        y = t * 1
        y[:, 1:].t_().mul_(2)
        return y.unsqueeze_(0)
    np.testing.assert_allclose(ember.jit(f)(x).numpy(), f(x).numpy())
    with pytest.raises(ember.EmberError, match="outside the compiled function"):
        ember.jit(lambda t: t.t_())(ember.randn(2, 3))


# resize_ ---------------------------------------------------------------------------------
@pytest.mark.parametrize("start,sizes", [
    ((6,), (2, 3)), ((2, 3), (4,)), ((2, 3), (2, 3)), ((6,), (0,)), ((6,), (3, 0, 2)),
    ((2, 2), (1,))])
def test_resize_within_storage_as_torch(start, sizes):
    e, t = pair(start)
    e.resize_(*sizes)
    t.resize_(*sizes)
    close(e, t)
    same_strides(e, t)


def test_resize_of_views_and_noncontiguous_tensors_as_torch():
    for make in (lambda lib: lib.arange(6.0)[2:], lambda lib: lib.arange(6.0).view(2, 3).t()):
        e, t = make(ember), make(torch)
        v = e._version[0]
        e.resize_(2, 2)
        t.resize_(2, 2)
        close(e, t)
        same_strides(e, t)
        assert e._version[0] == v + 1
    same = ember.arange(6.0).view(2, 3).t()
    v = same._version[0]
    same.resize_(3, 2)  # the same shape: nothing changes, no version bump
    assert same.stride() == (1, 3) and same._version[0] == v


def test_resized_view_still_shares_memory_and_autograd_with_its_base():
    base = ember.arange(6.0)
    view = base[1:]
    view.resize_(2, 2)
    assert view._base is base
    view[1, 0] = 100.0
    assert base[3].item() == 100.0
    w = ember.ones(6)
    v = w[1:]
    v.resize_(2, 2)
    w.requires_grad_()
    with ember.no_grad():
        w.mul_(2)
    # v's history is re-derived from w by offset and strides (it is a view of w)
    (v * ember.tensor([[1.0, 2.0], [3.0, 4.0]])).sum().backward()
    np.testing.assert_array_equal(w.grad.numpy(), [0.0, 1.0, 2.0, 3.0, 4.0, 0.0])
    with pytest.raises(ember.EmberError, match="cannot resize"):
        c = w * 1
        with ember.no_grad():
            cv = c[2:]
        cv.resize_(2)  # a view of a tensor that requires grad, as PyTorch refuses


def test_resize_beyond_the_storage_keeps_its_contents():
    x = ember.arange(6.0)[2:]
    x.resize_(2, 4)
    np.testing.assert_array_equal(x.numpy().reshape(-1)[:4], [2.0, 3.0, 4.0, 5.0])
    assert x._base is None and x.shape == (2, 4)
    y = ember.zeros(2).resize_as_(ember.zeros(3, 3))
    assert y.shape == (3, 3)


def test_resize_errors():
    with pytest.raises(ember.EmberError, match="cannot resize variables that require grad"):
        ember.zeros(2, requires_grad=True).resize_(4)
    with pytest.raises(ember.EmberError, match="cannot resize"):
        (ember.zeros(2, requires_grad=True) * 2).resize_(4)
    with pytest.raises(ember.ShapeError, match="negative dimension"):
        ember.zeros(2).resize_(-1)
    with pytest.raises(ember.EmberError, match="ember.jit"):
        ember.jit(lambda t: (t * 1).detach().resize_(4))(ember.zeros(2))


# unfold ----------------------------------------------------------------------------------
UNFOLDS = [((7,), 0, 3, 2), ((7,), 0, 7, 1), ((3, 8), 1, 2, 1), ((3, 8), -1, 3, 3),
           ((4, 3, 5), 0, 2, 2), ((4, 3, 5), 2, 5, 1), ((3, 4), 1, 0, 1), ((), 0, 1, 1),
           ((), 0, 0, 2), ((0, 3), 1, 2, 1), ((2, 1), 1, 1, 4)]


@pytest.mark.parametrize("shape,dim,size,step", UNFOLDS)
def test_unfold_values_strides_and_gradients(shape, dim, size, step):
    e, t = pair(shape)
    ue, ut = e.unfold(dim, size, step), t.unfold(dim, size, step)
    close(ue, ut)
    same_strides(ue, ut)
    grads_match(lambda x: x.unfold(dim, size, step), lambda x: x.unfold(dim, size, step),
                shape)


def test_unfold_noncontiguous_view_writes_through_and_double_backward():
    e, t = pair((5, 6))
    ue, ut = e.t().unfold(1, 2, 2), t.t().unfold(1, 2, 2)
    close(ue, ut)
    ue.mul_(-1.0)
    ut.mul_(-1.0)
    close(e, t)  # non-overlapping windows: written back into the tensor
    x = ember.randn(3, 7, dtype=ember.float64, requires_grad=True)
    fn = lambda a: a.unfold(1, 3, 2) ** 2  # noqa: E731
    assert ember.autograd.gradcheck(fn, (x,))
    assert ember.autograd.gradgradcheck(fn, (x,))


def test_unfold_errors():
    x = ember.zeros(3, 4)
    with pytest.raises(ember.EmberIndexError, match="maximum size for tensor at dimension 1 is 4"):
        x.unfold(1, 5, 1)
    with pytest.raises(ember.EmberError, match="step is 0"):
        x.unfold(1, 2, 0)
    with pytest.raises(ember.EmberIndexError, match="Dimension out of range"):
        x.unfold(2, 1, 1)
    with pytest.raises(ember.EmberError, match="must be an int"):
        x.unfold(1, 2.0, 1)


# as_strided --------------------------------------------------------------------------------
STRIDED = [((3, 4), (2, 2), (1, 2), 1), ((3, 4), (3, 3), (4, 1), None), ((12,), (4, 3), (1, 1), 0),
           ((3, 4), (2, 3), (0, 1), 2), ((3, 4), (0, 2), (1, 1), None), ((3, 4), (), (), 11)]


@pytest.mark.parametrize("shape,size,stride,offset", STRIDED)
def test_as_strided_values_and_gradients(shape, size, stride, offset):
    grads_match(lambda x: x.as_strided(size, stride, offset),
                lambda x: x.as_strided(size, stride, offset), shape)


def test_as_strided_of_a_view_uses_the_storage_and_shares_memory():
    e, t = pair((3, 4))
    for args in [((2,), (1,)), ((2,), (1,), 0), ((2, 2), (4, 1), 5)]:
        close(e[1].as_strided(*args), t[1].as_strided(*args))
        close(e.t().as_strided(*args), t.t().as_strided(*args))
    assert e[1].storage_offset() == t[1].storage_offset() == 4
    assert e.t()[1:].storage_offset() == t.t()[1:].storage_offset()
    v = e.as_strided((2,), (5,), 1)
    v.fill_(7.0)
    assert e[0, 1].item() == 7.0 and e[1, 2].item() == 7.0
    assert v._base is e and v._version is e._version
    x = ember.randn(2, 6, dtype=ember.float64, requires_grad=True)
    fn = lambda a: a[1:].as_strided((2, 3), (1, 2)) ** 2  # noqa: E731
    assert ember.autograd.gradcheck(fn, (x,))
    assert ember.autograd.gradgradcheck(fn, (x,))


def test_as_strided_errors():
    x = ember.zeros(3, 4)
    with pytest.raises(ember.EmberError, match="out of bounds for storage of size 48"):
        x.as_strided((2, 2), (10, 2), 1)
    with pytest.raises(ember.EmberError, match="Negative strides"):
        x.as_strided((2, 2), (-1, 2), 5)
    with pytest.raises(ember.ShapeError, match="mismatch in length"):
        x.as_strided((2, 2), (1,))
    with pytest.raises(ember.EmberError, match="invalid storage offset"):
        x.as_strided((1,), (1,), -1)
    with pytest.raises(ember.EmberError, match="ember.jit cannot capture as_strided"):
        ember.jit(lambda t: t.as_strided((2,), (1,)))(x)


# diagonal_scatter / select_scatter / slice_scatter -------------------------------------------
SCATTERS = [
    ("diagonal_scatter", (3, 3), (3,), ()), ("diagonal_scatter", (3, 4), (2,), (2,)),
    ("diagonal_scatter", (2, 3, 4), (4, 2), (-1, 1, 0)), ("diagonal_scatter", (2, 3), (0,), (5,)),
    ("select_scatter", (2, 3), (3,), (0, -1)), ("select_scatter", (2, 3, 4), (2, 4), (1, 2)),
    ("select_scatter", (4,), (), (0, 1)),
    ("slice_scatter", (4, 3), (2, 3), (0, 0, None, 2)), ("slice_scatter", (4, 3), (4, 1), (1, -1)),
    ("slice_scatter", (4, 3), (4, 2), (1, 1, 100)), ("slice_scatter", (5, 2), (0, 2), (0, 3, 1)),
    ("slice_scatter", (5, 2), (5, 2), ())]


@pytest.mark.parametrize("name,shape,src,args", SCATTERS)
def test_view_scatters_values_and_gradients(name, shape, src, args):
    grads_match(lambda x, s: getattr(ember, name)(x, s, *args),
                lambda x, s: getattr(torch, name)(x, s, *args), shape, src)
    if len(shape) >= 2:  # the same values in a non-contiguous layout
        e, t = pair(shape)
        se, st = pair(src)
        e = e.mT.contiguous().mT
        close(getattr(ember, name)(e, se, *args), getattr(torch, name)(t, st, *args))


def test_view_scatters_cast_src_and_do_not_touch_input():
    x = ember.zeros(3, 3)
    out = x.diagonal_scatter(ember.ones(3, dtype=ember.int64))
    assert out.dtype is ember.float32 and not x.numpy().any()
    np.testing.assert_array_equal(out.numpy(), np.eye(3))
    x = ember.randn(4, 5, dtype=ember.float64, requires_grad=True)
    s = ember.randn(4, 2, dtype=ember.float64, requires_grad=True)
    fn = lambda a, b: ember.slice_scatter(a, b, 1, 1, None, 2) ** 2  # noqa: E731
    assert ember.autograd.gradgradcheck(fn, (x, s))


def test_view_scatter_errors():
    with pytest.raises(ember.ShapeError, match="src size = \\[3\\], slice size = \\[2\\]"):
        ember.zeros(3, 3).diagonal_scatter(ember.ones(3), 1)
    with pytest.raises(ember.EmberError, match="cannot be identical"):
        ember.zeros(3, 3).diagonal_scatter(ember.ones(3), 0, 1, 1)
    with pytest.raises(ember.EmberIndexError, match="index 2 out of range"):
        ember.zeros(2, 3).select_scatter(ember.ones(3), 0, 2)
    with pytest.raises(ember.ShapeError, match="slice size"):
        ember.zeros(2, 3).select_scatter(ember.ones(2), 0, 0)
    with pytest.raises(ember.EmberError, match="step must be positive"):
        ember.zeros(4, 3).slice_scatter(ember.ones(4, 2), 1, 1, None, 0)
    with pytest.raises(ember.EmberIndexError, match="0-dim"):
        ember.tensor(1.0).slice_scatter(ember.ones(()))


# put / index_put / index_reduce / fill_diagonal_ -------------------------------------------
def test_put_values_gradients_and_inplace():
    idx = torch.tensor([0, 5, -1, 7])
    for acc in (False, True):
        grads_match(lambda x, s: x.put(ember.tensor(idx.numpy()), s, accumulate=acc),
                    lambda x, s: x.put(idx, s, accumulate=acc), (3, 4), (4,))
    dup = torch.tensor([[1, 1], [-12, 3]])
    grads_match(lambda x, s: x.t().put(ember.tensor(dup.numpy()), s, accumulate=True),
                lambda x, s: x.t().put(dup, s, accumulate=True), (3, 4), (2, 2))
    e, t = pair((2, 3))
    v = e._version[0]
    assert e.put_(ember.tensor([1, 4]), ember.tensor([9.0, 8.0], dtype=ember.float64)) is e
    t.put_(torch.tensor([1, 4]), torch.tensor([9.0, 8.0], dtype=torch.float64))
    close(e, t)
    assert e._version[0] == v + 1
    grads_match(lambda x, s: (x * 1).put_(ember.tensor([2, 2]), s, True),
                lambda x, s: (x * 1).put_(torch.tensor([2, 2]), s, True), (4,), (2,))
    assert ember.zeros(0).put(ember.tensor([], dtype=ember.int64), ember.zeros(0)).shape == (0,)


def test_put_errors():
    x = ember.zeros(2, 3)
    with pytest.raises(ember.EmberIndexError, match="tried to access index 6 on a tensor of 6"):
        x.put(ember.tensor([6]), ember.tensor([1.0]))
    with pytest.raises(ember.EmberIndexError, match="same number of elements"):
        x.put(ember.tensor([0, 1]), ember.tensor([1.0]))
    with pytest.raises(ember.EmberTypeError, match="int64"):
        x.put(ember.tensor([0], dtype=ember.int32), ember.tensor([1.0]))
    with pytest.raises(ember.EmberTypeError, match="same dtype"):
        x.put(ember.tensor([0]), ember.tensor([1]))
    with pytest.raises(ember.EmberError, match="leaf Variable"):
        ember.zeros(3, requires_grad=True).put_(ember.tensor([0]), ember.tensor([1.0]))


def test_index_put_methods_as_torch():
    i, j = torch.tensor([0, 2, 0]), torch.tensor([1, 1, 3])
    ie, je = ember.tensor(i.numpy()), ember.tensor(j.numpy())
    for acc in (False, True):
        grads_match(lambda x, v: x.index_put((ie, je), v, accumulate=acc),
                    lambda x, v: x.index_put((i, j), v, accumulate=acc), (3, 4), (3,))
    grads_match(lambda x, v: x.index_put((None, je), v, True),
                lambda x, v: x.index_put((torch.arange(3)[:, None], j), v, True), (3, 4),
                (3, 3))  # None stands for a whole dim (torch's Python binding wants tensors)
    e, t = pair((3, 4))
    e.index_put_((e > 0,), ember.tensor(-1.0, dtype=ember.float64))
    t.index_put_((t > 0,), torch.tensor(-1.0, dtype=torch.float64))
    close(e, t)
    grads_match(lambda x, v: (x * 1).index_put_([ie], v, accumulate=True),
                lambda x, v: (x * 1).index_put_([i], v, accumulate=True), (3, 4), (4,))
    with pytest.raises(ember.EmberTypeError, match="dtypes match"):
        ember.zeros(2).index_put((ember.tensor([0]),), ember.tensor(1))
    with pytest.raises(ember.EmberTypeError, match="tuple or list"):
        ember.zeros(2).index_put(ember.tensor([0]), ember.tensor(1.0))
    with pytest.raises(ember.EmberTypeError, match="Tensor or None"):
        ember.zeros(2).index_put(([0],), ember.tensor(1.0))


@pytest.mark.parametrize("reduce", ["prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
def test_index_reduce_values_and_gradients(reduce, include_self):
    index = torch.tensor([0, 2, 0, 3])
    ie = ember.tensor(index.numpy())
    grads_match(lambda x, s: x.index_reduce(0, ie, s, reduce, include_self=include_self),
                lambda x, s: x.index_reduce(0, index, s, reduce, include_self=include_self),
                (4, 3), (4, 3))
    grads_match(lambda x, s: x.mT.index_reduce(-1, ie.int(), s, reduce,
                                               include_self=include_self),
                lambda x, s: x.mT.index_reduce(-1, index, s, reduce,
                                               include_self=include_self), (5, 2), (2, 4))
    e, t = pair((4, 3))
    se, st = pair((4, 3))
    e.index_reduce_(0, ie, se, reduce, include_self=include_self)
    t.index_reduce_(0, index, st, reduce, include_self=include_self)
    close(e, t)


def test_index_reduce_ties_integers_and_0d_as_torch():
    x = torch.tensor([[1.0, 5.0], [2.0, 2.0]], dtype=torch.float64, requires_grad=True)
    s = torch.tensor([[1.0, 3.0], [1.0, 5.0]], dtype=torch.float64, requires_grad=True)
    xe = ember.tensor(x.detach().numpy(), requires_grad=True)
    se = ember.tensor(s.detach().numpy(), requires_grad=True)
    out_t = x.index_reduce(0, torch.tensor([0, 0]), s, "amax")
    out_e = xe.index_reduce(0, ember.tensor([0, 0]), se, "amax")
    close(out_e, out_t)
    for a, b in zip(ember.autograd.grad(out_e.sum(), [xe, se]),
                    torch.autograd.grad(out_t.sum(), [x, s])):
        close(a, b)  # ties share the gradient evenly
    ints = torch.tensor([[1, 2], [3, 4], [6, 6]])
    close(ember.full((3, 2), 2).index_reduce(0, ember.tensor([0, 1, 0]),
                                             ember.tensor(ints.numpy()), "mean"),
          torch.full((3, 2), 2).index_reduce(0, torch.tensor([0, 1, 0]), ints, "mean"))
    close(ember.tensor(2.0).index_reduce(0, ember.tensor(0), ember.tensor(3.0), "prod"),
          torch.tensor(2.0).index_reduce(0, torch.tensor(0), torch.tensor(3.0), "prod"))


def test_index_reduce_errors():
    x, s = ember.zeros(2, 3), ember.ones(2, 2)
    with pytest.raises(ember.EmberError, match="one of prod, mean, amax or amin but got sum"):
        x.index_reduce(1, ember.tensor([0, 1]), s, "sum")
    with pytest.raises(ember.EmberError, match="Number of indices \\(1\\)"):
        x.index_reduce(1, ember.tensor([2]), s, "amin")
    with pytest.raises(ember.EmberIndexError, match="out of range"):
        x.index_reduce(1, ember.tensor([3, 0]), s, "amin")
    with pytest.raises(ember.EmberIndexError, match="out of range"):
        x.index_reduce(1, ember.tensor([-1, 0]), s, "amin")
    with pytest.raises(ember.ShapeError, match="source tensor shape must match"):
        x.index_reduce(1, ember.tensor([1, 0]), ember.ones(3, 2), "amin")
    with pytest.raises(ember.EmberTypeError, match="same dtype"):
        x.index_reduce(1, ember.tensor([1, 0]), ember.ones(2, 2, dtype=ember.int64), "amin")
    with pytest.raises(ember.EmberIndexError, match="supposed to be a vector"):
        x.index_reduce(1, ember.tensor([[1, 0]]), s, "amin")


@pytest.mark.parametrize("shape,wrap", [((3, 4), False), ((7, 3), False), ((7, 3), True),
                                        ((6, 2), True), ((2, 5), True), ((3, 3, 3), False),
                                        ((1, 1), False), ((0, 3), False)])
def test_fill_diagonal_as_torch(shape, wrap):
    e, t = pair(shape)
    e.fill_diagonal_(2.5, wrap=wrap)
    t.fill_diagonal_(2.5, wrap=wrap)
    close(e, t)
    grads_match(lambda x: (x * 1).fill_diagonal_(-1.0, wrap),
                lambda x: (x * 1).fill_diagonal_(-1.0, wrap), shape)
    e, t = pair(shape)
    if len(shape) == 2:  # a transposed view writes into its base
        et, tt = e.t(), t.t()
        et.fill_diagonal_(9.0, wrap=wrap)
        tt.fill_diagonal_(9.0, wrap=wrap)
        close(e, t)


def test_fill_diagonal_values_and_errors():
    x = ember.zeros(2, 2, dtype=ember.int64).fill_diagonal_(5.7)
    np.testing.assert_array_equal(x.numpy(), [[5, 0], [0, 5]])
    np.testing.assert_array_equal(ember.zeros(2, 2).fill_diagonal_(ember.tensor(3.0)).numpy(),
                                  3 * np.eye(2))
    with pytest.raises(ember.EmberError, match="dimensions must larger than 1"):
        ember.zeros(3).fill_diagonal_(1)
    with pytest.raises(ember.EmberError, match="all dimensions of input must be of equal"):
        ember.zeros(2, 2, 3).fill_diagonal_(1)
    with pytest.raises(ember.EmberError, match="leaf Variable"):
        ember.zeros(2, 2, requires_grad=True).fill_diagonal_(1)


# ember.jit equals eager --------------------------------------------------------------------
JIT_CASES = {
    "unfold": (lambda t, s: t.unfold(1, 2, 1) * 2, (4, 5), None),
    "diagonal_scatter": (lambda t, s: ember.diagonal_scatter(t, s, 1), (4, 5), (4,)),
    "select_scatter": (lambda t, s: ember.select_scatter(t, s, 1, 2), (4, 5), (4,)),
    "slice_scatter": (lambda t, s: ember.slice_scatter(t, s, 1, 0, None, 2), (4, 5), (4, 3)),
    "index_reduce": (lambda t, s: t.index_reduce(0, ember.tensor([0, 2, 0]), s, "amax"),
                     (4, 5), (3, 5)),
    "put_": (lambda t, s: (t * 1).put_(ember.tensor([0, 7, -1]), s, accumulate=True),
             (4, 5), (3,)),
    "index_put": (lambda t, s: t.index_put((ember.tensor([0, 2]),), s), (4, 5), (5,)),
    "fill_diagonal_": (lambda t, s: (t * 1).fill_diagonal_(3.0, wrap=True), (5, 2), None),
    "t_": (lambda t, s: (t * 1).t_() * 2, (4, 5), None),
}


@pytest.mark.parametrize("name", sorted(JIT_CASES))
def test_jit_equals_eager(name):
    fn, shape, src = JIT_CASES[name]
    x = ember.randn(*shape, dtype=ember.float64, requires_grad=True)
    s = None if src is None else ember.randn(*src, dtype=ember.float64, requires_grad=True)
    inputs = [x] if s is None else [x, s]

    def step(a, b=None):
        out = fn(a, b)
        weight = ember.arange(out.numel(), dtype=out.dtype).reshape(out.shape)
        return (out,) + tuple(ember.autograd.grad((out * weight).sum(), [a] + ([b] if b is
                                                                           not None else [])))
    eager = step(*inputs)
    compiled = ember.jit(step)
    for _ in range(2):
        for a, b in zip(compiled(*inputs), eager):
            np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-10)
