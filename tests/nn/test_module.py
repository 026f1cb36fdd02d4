"""nn.Module, Parameter and the containers, against PyTorch's behaviour."""
import copy
from collections import OrderedDict

import numpy as np
import pytest

import ember
from ember import nn

torch = pytest.importorskip("torch")
tnn = torch.nn


def same_repr(e, t) -> None:
    assert repr(e) == repr(t).replace("torch", "ember")


def build(lib):
    """The same small model in ember (``lib=ember``) or PyTorch (``lib=torch``)."""
    N = lib.nn

    class Block(N.Module):
        def __init__(self):
            super().__init__()
            self.scale = N.Parameter(lib.ones(3))
            self.register_buffer("count", lib.zeros(1))
            self.register_buffer("cache", lib.zeros(2), persistent=False)
            self.register_parameter("unused", None)

        def forward(self, x):
            return (x * self.scale).tanh()

    class Net(N.Module):
        def __init__(self):
            super().__init__()
            self.w = N.Parameter(lib.arange(6.0).reshape(2, 3) / 10)
            self.first = Block()
            self.second = Block()
            self.shared = self.first           # the same module twice
            self.second.tied = self.first.scale  # the same parameter twice
            self.register_buffer("steps", lib.tensor(0))

        def forward(self, x):
            return self.second(self.first(x @ self.w))

    return Net()


def pairs():
    ember.manual_seed(0)
    return build(ember), build(torch)


# Parameter -----------------------------------------------------------------------------
def test_parameter_basics():
    p = nn.Parameter(ember.tensor([1.0, 2.0]))
    tp = tnn.Parameter(torch.tensor([1.0, 2.0]))
    same_repr(p, tp)
    assert p.requires_grad and p.is_leaf and isinstance(p, ember.Tensor)
    assert type(p * 2) is ember.Tensor and type(p.detach()) is ember.Tensor
    q = nn.Parameter(ember.tensor([1, 2]), requires_grad=False)
    same_repr(q, tnn.Parameter(torch.tensor([1, 2]), requires_grad=False))
    with pytest.raises(ember.EmberTypeError, match="floating point"):
        nn.Parameter(ember.tensor([1, 2]))
    data = ember.zeros(3)
    p = nn.Parameter(data)
    with ember.no_grad():
        p.add_(1.0)
    assert data.tolist() == [1.0, 1.0, 1.0]  # shares storage
    c = copy.deepcopy(p)
    assert type(c) is nn.Parameter and c.requires_grad and c.tolist() == [1.0] * 3
    assert nn.Parameter().shape == (0,)


# Registration and traversal --------------------------------------------------------------
def test_named_members_match_torch():
    e, t = pairs()
    for remove_duplicate in (True, False):
        assert [n for n, _ in e.named_parameters(remove_duplicate=remove_duplicate)] == \
            [n for n, _ in t.named_parameters(remove_duplicate=remove_duplicate)]
        assert [n for n, _ in e.named_buffers(remove_duplicate=remove_duplicate)] == \
            [n for n, _ in t.named_buffers(remove_duplicate=remove_duplicate)]
        assert [n for n, _ in e.named_modules(remove_duplicate=remove_duplicate)] == \
            [n for n, _ in t.named_modules(remove_duplicate=remove_duplicate)]
    assert [n for n, _ in e.named_parameters(prefix="m", recurse=False)] == \
        [n for n, _ in t.named_parameters(prefix="m", recurse=False)]
    assert [n for n, _ in e.named_children()] == [n for n, _ in t.named_children()]
    assert len(list(e.parameters())) == len(list(t.parameters())) == 3
    assert len(list(e.modules())) == len(list(t.modules()))
    assert len(list(e.children())) == len(list(t.children())) == 2


def test_state_dict_order_and_values_match_torch():
    e, t = pairs()
    es, ts = e.state_dict(), t.state_dict()
    assert list(es) == list(ts)
    assert isinstance(es, OrderedDict)
    for k in ts:
        np.testing.assert_array_equal(es[k].numpy(), ts[k].numpy())
        assert type(es[k]) is ember.Tensor and not es[k].requires_grad
    kept = e.state_dict(keep_vars=True)
    assert kept["w"] is e.w
    assert list(e.state_dict(prefix="model.")) == list(t.state_dict(prefix="model."))


def test_load_state_dict_errors_match_torch_and_leave_module_unchanged():
    e, t = pairs()
    bad = {"w": np.zeros((3, 3)), "first.scale": np.full(3, 5.0), "extra": np.zeros(1),
           "first.nope": np.zeros(1), "first.count": np.zeros(1)}
    with pytest.raises(RuntimeError) as t_err:
        t.load_state_dict({k: torch.tensor(v) for k, v in bad.items()})
    before = {k: v.clone() for k, v in e.state_dict().items()}
    with pytest.raises(ember.EmberError) as e_err:
        e.load_state_dict({k: ember.tensor(v) for k, v in bad.items()})
    assert str(e_err.value) == str(t_err.value).replace("torch", "ember")
    assert "Missing key(s)" in str(e_err.value) and "size mismatch for w" in str(e_err.value)
    for k, v in e.state_dict().items():  # nothing was copied, not even first.scale
        np.testing.assert_array_equal(v.numpy(), before[k].numpy())
    # A size mismatch raises even when not strict, again without copying anything.
    with pytest.raises(ember.EmberError, match="size mismatch"):
        e.load_state_dict({"w": ember.zeros(3, 3), "first.scale": ember.zeros(3)},
                          strict=False)
    np.testing.assert_array_equal(e.first.scale.detach().numpy(),
                                  before["first.scale"].numpy())
    with pytest.raises(ember.EmberTypeError, match="dict-like"):
        e.load_state_dict([1, 2])


def test_load_state_dict_not_strict_and_assign():
    e, t = pairs()
    partial = {"w": np.ones((2, 3)), "junk": np.ones(2)}
    er = e.load_state_dict({k: ember.tensor(v) for k, v in partial.items()}, strict=False)
    tr = t.load_state_dict({k: torch.tensor(v, dtype=torch.float32)
                            for k, v in partial.items()}, strict=False)
    assert er.missing_keys == tr.missing_keys and er.unexpected_keys == tr.unexpected_keys
    assert repr(er) == repr(tr)
    assert e.w.tolist() == [[1.0] * 3] * 2
    w = e.w
    full = {k: v.clone() for k, v in e.state_dict().items()}
    assert repr(e.load_state_dict(full)) == "<All keys matched successfully>"
    assert e.w is w  # copied in place
    full["w"] = ember.full((2, 3), 7.0)
    e.w.requires_grad_(False)
    e.load_state_dict(full, assign=True)
    assert e.w is not w and isinstance(e.w, nn.Parameter) and not e.w.requires_grad
    assert e.w.tolist() == [[7.0] * 3] * 2


def test_load_state_dict_scalar_from_shape_1():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("b", ember.tensor(1.0))
    m = M()
    m.load_state_dict({"b": ember.tensor([4.0])})
    assert m.b.item() == 4.0


def test_extra_state_round_trip():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.note = {"v": 1}

        def get_extra_state(self):
            return dict(self.note)

        def set_extra_state(self, state):
            self.note = state
    m = M()
    sd = m.state_dict()
    assert list(sd) == ["_extra_state"]
    m2 = M()
    m2.note = {}
    m2.load_state_dict(sd)
    assert m2.note == {"v": 1}


# Attributes -------------------------------------------------------------------------------
def test_setattr_semantics_match_torch():
    for lib, err in ((torch, TypeError), (ember, ember.EmberTypeError)):
        m = lib.nn.Linear(2, 2) if lib is torch else None
        if m is None:
            m = nn.Module()
            m.weight = nn.Parameter(ember.zeros(2))
            m.sub = nn.Module()
            m.register_buffer("buf", ember.zeros(1))
        else:
            m.sub = lib.nn.Module()
            m.register_buffer("buf", lib.zeros(1))
        with pytest.raises(err, match="cannot assign '.*' as parameter 'weight'"):
            m.weight = lib.zeros(2)
        with pytest.raises(err, match="as child module 'sub'"):
            m.sub = 3
        with pytest.raises(err, match="as buffer 'buf'"):
            m.buf = 3
        m.weight = None
        assert m.weight is None and "weight" in m._parameters
        m.sub = None
        assert m.sub is None
        m.buf = lib.ones(1)
        assert m.buf.tolist() == [1.0]
        del m.buf
        assert not hasattr(m, "buf")

    class Early(nn.Module):
        def __init__(self):
            self.p = nn.Parameter(ember.zeros(1))
    with pytest.raises(AttributeError, match="before Module.__init__"):
        Early()
    m = nn.Module()
    m.x = 3
    m.x = nn.Flatten()  # a plain attribute becomes a submodule
    assert "x" in m._modules and "x" not in m.__dict__
    with pytest.raises(AttributeError, match="'Module' object has no attribute 'nothing'"):
        m.nothing
    with pytest.raises(KeyError, match="attribute 'x' already exists"):
        m.register_buffer("x", ember.zeros(1))
    with pytest.raises(KeyError, match="contain"):
        m.register_parameter("a.b", None)
    with pytest.raises(KeyError, match="empty string"):
        m.add_module("", nn.Flatten())
    with pytest.raises(ember.EmberTypeError, match="is not a Module subclass"):
        m.add_module("y", 3)
    with pytest.raises(ember.EmberTypeError, match="object to parameter 'q'"):
        m.register_parameter("q", ember.zeros(1))
    assert "x" in dir(m) and "forward" in dir(m)


def test_get_submodule_and_parameter_match_torch():
    e, t = pairs()
    assert e.get_submodule("first") is e.first
    assert e.get_parameter("first.scale") is e.first.scale
    assert e.get_buffer("first.count") is e.first.count
    for call in (lambda m: m.get_submodule("first.zzz"), lambda m: m.get_submodule("w"),
                 lambda m: m.get_parameter("first.count"),
                 lambda m: m.get_parameter("zzz")):
        with pytest.raises(AttributeError) as te:
            call(t)
        with pytest.raises(AttributeError) as ee:
            call(e)
        assert str(ee.value) == str(te.value)


# Modes, gradients and conversion ---------------------------------------------------------------
def test_train_eval_requires_grad_zero_grad():
    e, _ = pairs()
    assert e.eval() is e and not e.training and not e.first.training
    e.train()
    assert e.second.training
    with pytest.raises(ValueError, match="boolean"):
        e.train("yes")
    e.requires_grad_(False)
    assert not any(p.requires_grad for p in e.parameters())
    e.requires_grad_()
    e(ember.ones(4, 2)).sum().backward()
    assert all(p.grad is not None for p in e.parameters())
    grad = e.w.grad
    e.zero_grad(set_to_none=False)
    assert e.w.grad is grad and grad.abs().sum().item() == 0
    e.zero_grad()
    assert all(p.grad is None for p in e.parameters())


def test_to_keeps_parameter_identity():
    e, _ = pairs()
    w = e.w
    e(ember.ones(1, 2)).sum().backward()
    assert e.to(ember.float64) is e
    assert e.w is w and e.w.dtype is ember.float64 and e.w.grad.dtype is ember.float64
    assert e.first.count.dtype is ember.float64 and e.steps.dtype is ember.int64
    e.float()
    assert e.w.dtype is ember.float32
    e.half()
    assert e.first.scale.dtype is ember.float16
    e.to("cpu", ember.float64)
    assert e.w.dtype is ember.float64
    with pytest.raises(ember.EmberTypeError, match="floating point"):
        e.to(ember.int32)


def test_apply_order_matches_torch():
    e, t = pairs()
    seen_e, seen_t = [], []
    e.apply(lambda m: seen_e.append(type(m).__name__))
    t.apply(lambda m: seen_t.append(type(m).__name__))
    assert seen_e == seen_t


def test_forward_missing():
    with pytest.raises(NotImplementedError, match='missing the required "forward"'):
        nn.Module()(1)


# Hooks ------------------------------------------------------------------------------------
def _record_hooks(lib, log):
    m = lib.nn.Flatten(0)

    def pre(mod, args):
        log.append(("pre", len(args)))
        return (args[0] * 2,)

    def pre_kw(mod, args, kwargs):
        log.append(("pre_kw", sorted(kwargs)))

    def post(mod, args, out):
        log.append(("post", tuple(out.shape)))
        return out + 1

    def post_kw(mod, args, kwargs, out):
        log.append(("post_kw", float(out.sum())))

    def first(mod, args):
        log.append(("first",))
    handles = [m.register_forward_pre_hook(pre), m.register_forward_pre_hook(pre_kw,
                                                                             with_kwargs=True),
               m.register_forward_pre_hook(first, prepend=True),
               m.register_forward_hook(post), m.register_forward_hook(post_kw, with_kwargs=True)]
    return m, handles


def test_forward_hooks_order_and_results_match_torch():
    logs = {}
    for lib in (ember, torch):
        log = logs[lib.__name__] = []
        m, handles = _record_hooks(lib, log)
        out = m(lib.ones(2, 2))
        log.append(("out", out.tolist()))
        handles[3].remove()
        log.append(("again", m(lib.ones(2)).tolist()))
        for h in handles:
            h.remove()
        log.append(("none", m(lib.ones(2)).tolist()))
    assert logs["ember"] == logs["torch"]


def test_forward_hook_always_call_and_bad_pre_hook():
    m = nn.Module()
    calls = []
    m.register_forward_hook(lambda mod, a, out: calls.append(out), always_call=True)
    with pytest.raises(NotImplementedError):
        m(1)
    assert calls == [None]
    m2 = nn.Flatten()
    m2.register_forward_pre_hook(lambda mod, a, k: 3, with_kwargs=True)
    with pytest.raises(ember.EmberError, match="must return None or a tuple"):
        m2(ember.ones(2, 2))
    with m2.register_forward_hook(lambda mod, a, out: out * 0):
        assert m2._forward_hooks
    assert not m2._forward_hooks


class _Scale(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(ember.tensor([2.0, 3.0]))

    def forward(self, x, y, flag):
        return x * self.w, y * x


class _TScale(tnn.Module):
    def __init__(self):
        super().__init__()
        self.w = tnn.Parameter(torch.tensor([2.0, 3.0]))

    def forward(self, x, y, flag):
        return x * self.w, y * x


def test_full_backward_hooks_match_torch():
    records = {}
    for lib, cls in ((ember, _Scale), (torch, _TScale)):
        log = records[lib.__name__] = []
        m = cls()

        def pre(mod, grad_output):
            log.append(("pre", [None if g is None else g.tolist() for g in grad_output]))
            return (grad_output[0] * 10, grad_output[1])

        def hook(mod, grad_input, grad_output):
            log.append(("hook", [None if g is None else g.tolist() for g in grad_input],
                        [None if g is None else g.tolist() for g in grad_output]))
            return (grad_input[0] + 1, None, None)
        m.register_full_backward_pre_hook(pre)
        m.register_full_backward_hook(hook)
        x = lib.tensor([1.0, -1.0], requires_grad=True)
        y = lib.tensor([0.5, 0.25])  # needs no gradient
        a, b = m(x, y, "flag")
        (a.sum() + 2 * b.sum()).backward()
        log.append(("x.grad", x.grad.tolist()))
        log.append(("w.grad", m.w.grad.tolist()))
    assert records["ember"] == records["torch"]


def test_full_backward_hook_without_input_grads_matches_torch():
    records = {}
    for lib in (ember, torch):
        log = records[lib.__name__] = []
        m = lib.nn.Linear(2, 1) if lib is torch else None
        if m is None:
            m = _Scale()
        else:
            m = _TScale()
        m.register_full_backward_hook(
            lambda mod, gi, go: log.append((gi, [None if g is None else g.tolist()
                                                 for g in go])))
        a, _ = m(lib.ones(2), lib.ones(2), None)
        with pytest.warns(UserWarning, match="no inputs require gradients"):
            a.sum().backward()
    assert records["ember"] == records["torch"]
    m = _Scale()
    m.register_full_backward_hook(lambda mod, gi, go: (ember.ones(2), None, None))
    a, _ = m(ember.ones(2), ember.ones(2), None)
    with pytest.raises(ember.EmberError, match="no input requires gradient"), \
            pytest.warns(UserWarning):
        a.sum().backward()


# Printing --------------------------------------------------------------------------------
def test_repr_matches_torch():
    class E(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Flatten()
            self.b = nn.Sequential(nn.Flatten(2), nn.Identity())
            self.c = None

        def extra_repr(self):
            return "line one\nline two"
    ember_model = E()

    class E(tnn.Module):  # noqa: F811 (the same name, for the same repr)
        def __init__(self):
            super().__init__()
            self.a = tnn.Flatten()
            self.b = tnn.Sequential(tnn.Flatten(2), tnn.Identity())
            self.c = None

        def extra_repr(self):
            return "line one\nline two"
    same_repr(ember_model, E())
    same_repr(nn.Module(), tnn.Module())
    same_repr(nn.Unflatten(1, (2, 3)), tnn.Unflatten(1, (2, 3)))


# Containers -------------------------------------------------------------------------------
def test_sequential_matches_torch():
    def make(N):
        return N.Sequential(N.Flatten(0), N.Identity(), N.Flatten(1), N.Unflatten(0, (1, 4)))
    e, t = make(nn), make(tnn)
    same_repr(e, t)
    same_repr(e[1:3], t[1:3])
    same_repr(e[::-1], t[::-1])
    assert type(e[-1]) is nn.Unflatten and len(e) == 4
    with pytest.raises(IndexError, match="index 4 is out of range"):
        e[4]
    for m in (e, t):
        del m[1]
        m.append(type(m[0])(2))
        m.insert(1, type(m[0])(3))
        m.insert(-1, type(m[0])(5))
        m.extend([type(m[0])(7)])
        m[0] = type(m[0])(9)
        m.pop(2)
    same_repr(e, t)
    same_repr(e + e[:1], t + t[:1])
    same_repr(e[:2] * 2, t[:2] * 2)
    with pytest.raises(IndexError, match="Index out of range"):
        e.insert(20, nn.Identity())
    named = nn.Sequential(OrderedDict([("flat", nn.Flatten()), ("id", nn.Identity())]))
    tnamed = tnn.Sequential(OrderedDict([("flat", tnn.Flatten()), ("id", tnn.Identity())]))
    same_repr(named, tnamed)
    assert named(ember.ones(2, 3, 4)).shape == (2, 12)
    assert [type(m).__name__ for m in named] == ["Flatten", "Identity"]


def test_module_list_and_dict_match_torch():
    def make(N):
        return N.ModuleList([N.Flatten(), N.Flatten(), N.Flatten(), N.Identity(),
                             N.Flatten(0), N.Flatten(0)])
    e, t = make(nn), make(tnn)
    same_repr(e, t)
    same_repr(e[1:4], t[1:4])
    same_repr(nn.ModuleList(), tnn.ModuleList())
    for m in (e, t):
        m.insert(0, type(m[3])())
        m.append(type(m[0])())
        m += [type(m[0])()]
        del m[2]
        m[-1] = type(m[1])(2)
        m.pop(0)
    same_repr(e, t)
    same_repr(e + e, t + t)
    with pytest.raises(ember.EmberTypeError, match="iterable"):
        e.extend(3)
    d = nn.ModuleDict({"a": nn.Flatten(), "b": nn.Identity()})
    td = tnn.ModuleDict({"a": tnn.Flatten(), "b": tnn.Identity()})
    same_repr(d, td)
    d.update([("c", nn.Flatten(0))])
    td.update([("c", tnn.Flatten(0))])
    d["a"] = nn.Identity()
    td["a"] = tnn.Identity()
    assert d.pop("b") is not None and td.pop("b") is not None
    same_repr(d, td)
    assert list(d) == list(td) and "c" in d and len(d) == 2
    assert list(d.keys()) == ["a", "c"]
    d.clear()
    assert len(d) == 0


def test_parameter_list_and_dict_match_torch():
    def make(lib):
        N = lib.nn
        pl = N.ParameterList([N.Parameter(lib.zeros(2, 3)), lib.ones(4)])
        pl.append(N.Parameter(lib.zeros(1, dtype=lib.float64)))
        pl.extend(["text"])
        pd = N.ParameterDict({"b": lib.zeros(2), "a": N.Parameter(lib.ones(3))})
        pd["c"] = N.Parameter(lib.zeros(5))
        return pl, pd
    (el, ed), (tl, td) = make(ember), make(torch)
    same_repr(el, tl)
    same_repr(ed, td)
    assert isinstance(el[1], nn.Parameter) and el[3] == "text" and len(el) == 4
    assert [n for n, _ in el.named_parameters()] == [n for n, _ in tl.named_parameters()]
    assert [n for n, _ in ed.named_parameters()] == [n for n, _ in td.named_parameters()]
    same_repr(el[1:3], tl[1:3])
    assert list(ed.keys()) == list(td.keys())
    assert ed.pop("b").shape == (2,) and list(ed) == ["a", "c"]
    with pytest.raises(ember.EmberError, match="should not be called"):
        el()
    c = ed.copy()
    assert c["a"] is ed["a"]
