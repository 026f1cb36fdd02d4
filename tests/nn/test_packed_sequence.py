"""ember.nn.utils.rnn (PackedSequence, pad/pack/unpack/unpad) and RNN, LSTM and GRU on
packed input, against PyTorch: values, lengths and indices, gradients through packing
and unpacking and through the layers (input, initial states, every weight), ember.jit
against eager, and the errors for bad input."""
import numpy as np
import pytest

import ember
from ember.compiler import DataDependentError
from ember.errors import EmberError, EmberTypeError, EmberValueError, ShapeError
from ember.nn.utils import rnn as R

torch = pytest.importorskip("torch")
TR = torch.nn.utils.rnn


def _rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


def _pair(x, grad=True):
    """The same float64 data as a leaf ember tensor and a leaf torch tensor."""
    return (ember.tensor(x, requires_grad=grad),
            torch.tensor(x, dtype=torch.float64, requires_grad=grad))


def _close(e, t, tol=1e-12):
    t = t.detach().numpy() if isinstance(t, torch.Tensor) else np.asarray(t)
    e = e.detach().numpy() if isinstance(e, ember.Tensor) else np.asarray(e)
    assert e.shape == t.shape, (e.shape, t.shape)
    np.testing.assert_allclose(e, t, rtol=tol, atol=tol)


def _backward(e_outs, t_outs, seed=9):
    """Backpropagate the same random upstream gradients through both (lists of) outputs."""
    if not isinstance(t_outs, list):
        e_outs, t_outs = [e_outs], [t_outs]
    e_loss = t_loss = 0
    for i, (e, t) in enumerate(zip(e_outs, t_outs)):
        g = _rand(*t.shape, seed=seed + i)
        e_loss = e_loss + (e * ember.tensor(g)).sum()
        t_loss = t_loss + (t * torch.tensor(g)).sum()
    e_loss.backward()
    t_loss.backward()


def _same_packed(e, t):
    _close(e.data, t.data)
    assert e.batch_sizes.dtype == ember.int64
    assert e.batch_sizes.tolist() == t.batch_sizes.tolist()
    for a, b in ((e.sorted_indices, t.sorted_indices), (e.unsorted_indices, t.unsorted_indices)):
        assert (a is None) == (b is None)
        if a is not None:
            assert a.tolist() == b.tolist()


# pad_sequence ---------------------------------------------------------------------------
PAD_CASES = [((3,), (1,), (4,)), ((3, 2), (0, 2), (5, 2)), ((2, 2, 3),), ((1, 1), (1, 1))]


@pytest.mark.parametrize("shapes", PAD_CASES)
@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("padding_side", ["right", "left"])
def test_pad_sequence_matches_torch(shapes, batch_first, padding_side):
    pairs = [_pair(_rand(*s, seed=i)) for i, s in enumerate(shapes)]
    kwargs = dict(batch_first=batch_first, padding_value=-1.5, padding_side=padding_side)
    e = R.pad_sequence([p[0] for p in pairs], **kwargs)
    t = TR.pad_sequence([p[1] for p in pairs], **kwargs)
    _close(e, t)
    _backward(e, t)
    for pe, pt in pairs:
        _close(pe.grad, pt.grad)


def test_pad_sequence_non_contiguous_and_dtypes():
    base = _rand(2, 4)
    e_seq, t_seq = ember.tensor(base).t(), torch.tensor(base).t()  # (4, 2), transposed
    assert not t_seq.is_contiguous()
    _close(R.pad_sequence([e_seq, e_seq[:1]]), TR.pad_sequence([t_seq, t_seq[:1]]))
    # every sequence takes the first one's dtype; padding_value is cast to it
    ints = [ember.tensor([1, 2]), ember.tensor([3.7])]
    out = R.pad_sequence(ints, padding_value=2.7)
    ref = TR.pad_sequence([torch.tensor([1, 2]), torch.tensor([3.7])], padding_value=2.7)
    assert out.dtype == ember.int64 and out.tolist() == ref.tolist()
    # a tensor counts as the sequence of its rows
    _close(R.pad_sequence(ember.tensor(base)), TR.pad_sequence(torch.tensor(base)))


# pack_padded_sequence / pad_packed_sequence ----------------------------------------------
PACK_CASES = [
    ([4, 2, 1], True, ()),
    ([1, 4, 2], False, ()),
    ([3, 5, 1, 5, 2], False, (2,)),     # ties keep their order, as PyTorch's sort here
    ([2, 2, 2], True, (3,)),
    ([1], True, (2, 2)),
    ([2, 3], False, (0, 2)[1:]),
]


@pytest.mark.parametrize("lengths,enforce_sorted,trailing", PACK_CASES)
@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("as_tensor", [False, True])
def test_pack_then_pad_matches_torch(lengths, enforce_sorted, trailing, batch_first,
                                     as_tensor):
    steps, batch = max(lengths) + 1, len(lengths)  # one padded step past the longest
    shape = (batch, steps) + trailing if batch_first else (steps, batch) + trailing
    xe, xt = _pair(_rand(*shape))
    e_len = ember.tensor(lengths) if as_tensor else lengths
    t_len = torch.tensor(lengths) if as_tensor else lengths
    e = R.pack_padded_sequence(xe, e_len, batch_first, enforce_sorted)
    t = TR.pack_padded_sequence(xt, t_len, batch_first, enforce_sorted)
    assert isinstance(e, R.PackedSequence)
    _same_packed(e, t)
    e_pad, e_lengths = R.pad_packed_sequence(e, batch_first, padding_value=0.25,
                                             total_length=steps + 1)
    t_pad, t_lengths = TR.pad_packed_sequence(t, batch_first, padding_value=0.25,
                                              total_length=steps + 1)
    _close(e_pad, t_pad)
    assert e_lengths.dtype == ember.int64 and e_lengths.tolist() == t_lengths.tolist()
    _backward(e_pad, t_pad)
    _close(xe.grad, xt.grad)


def test_pack_padded_sequence_non_contiguous_input_and_default_length():
    base = _rand(3, 4, 2)
    xe, xt = _pair(base)
    e = R.pack_padded_sequence(xe.transpose(0, 1), [3, 1, 2], enforce_sorted=False)
    t = TR.pack_padded_sequence(xt.transpose(0, 1), [3, 1, 2], enforce_sorted=False)
    _same_packed(e, t)
    e_pad, _ = R.pad_packed_sequence(e)
    t_pad, _ = TR.pad_packed_sequence(t)
    assert tuple(e_pad.shape) == (3, 3, 2)
    _close(e_pad, t_pad)
    _backward(e.data, t.data)
    _close(xe.grad, xt.grad)


def test_packing_has_a_second_derivative():
    x = ember.tensor(_rand(4, 3), requires_grad=True)

    def f(x):
        packed = R.pack_padded_sequence(x ** 3, [4, 2, 1])
        return R.pad_packed_sequence(packed)[0].sum()

    (g,) = ember.autograd.grad(f(x), x, create_graph=True)
    (gg,) = ember.autograd.grad(g.sum(), x)
    mask = np.array([[1, 1, 1], [1, 1, 0], [1, 0, 0], [1, 0, 0]], dtype=float)
    _close(g, 3 * x.detach().numpy() ** 2 * mask)
    _close(gg, 6 * x.detach().numpy() * mask)


# pack_sequence / unpack_sequence / unpad_sequence ----------------------------------------
@pytest.mark.parametrize("lengths,enforce_sorted", [([3, 2, 1], True), ([2, 4, 1, 3], False),
                                                    ([1], True)])
@pytest.mark.parametrize("trailing", [(), (2,)])
def test_pack_and_unpack_sequence_match_torch(lengths, enforce_sorted, trailing):
    pairs = [_pair(_rand(n, *trailing, seed=i)) for i, n in enumerate(lengths)]
    e = R.pack_sequence([p[0] for p in pairs], enforce_sorted)
    t = TR.pack_sequence([p[1] for p in pairs], enforce_sorted)
    _same_packed(e, t)
    e_seqs, t_seqs = R.unpack_sequence(e), TR.unpack_sequence(t)
    assert len(e_seqs) == len(t_seqs) == len(lengths)
    for a, b in zip(e_seqs, t_seqs):
        _close(a, b)
    _backward(e_seqs, t_seqs)
    for pe, pt in pairs:
        _close(pe.grad, pt.grad)


@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("lengths", [[3, 1, 2], [0, 4], [5, 2]])
def test_unpad_sequence_matches_torch(batch_first, lengths):
    steps, batch = 4, len(lengths)
    shape = (batch, steps, 2) if batch_first else (steps, batch, 2)
    xe, xt = _pair(_rand(*shape))
    e = R.unpad_sequence(xe, ember.tensor(lengths), batch_first)
    # PyTorch transposes its argument in place when batch_first is False
    t = TR.unpad_sequence(xt.clone(), torch.tensor(lengths), batch_first)
    assert tuple(xe.shape) == shape  # ember's leaves it alone
    assert len(e) == len(t)
    for a, b in zip(e, t):
        _close(a, b)
    _backward(e, t)
    _close(xe.grad, xt.grad)
    # the inverse of pad_sequence
    seqs = [ember.tensor(_rand(n, seed=n)) for n in (3, 1)]
    back = R.unpad_sequence(R.pad_sequence(seqs), [3, 1])
    for a, b in zip(back, seqs):
        _close(a, b.numpy())


def test_invert_permutation_matches_torch():
    for perm in ([2, 0, 1], [0], [3, 1, 0, 4, 2]):
        assert R.invert_permutation(ember.tensor(perm)).tolist() == \
            TR.invert_permutation(torch.tensor(perm)).tolist()
    assert R.invert_permutation(None) is None
    with pytest.raises(ShapeError, match="invert_permutation"):
        R.invert_permutation(ember.tensor([[0, 1]]))


# PackedSequence -------------------------------------------------------------------------
def test_packed_sequence_is_a_named_tuple_with_conversions():
    packed = R.pack_sequence([ember.tensor([1.0, 2.0]), ember.tensor([3.0, 4.0, 5.0])],
                             enforce_sorted=False)
    data, batch_sizes, sorted_indices, unsorted_indices = packed
    assert data.tolist() == [3.0, 1.0, 4.0, 2.0, 5.0]
    assert batch_sizes.tolist() == [2, 2, 1]
    assert sorted_indices.tolist() == [1, 0] and unsorted_indices.tolist() == [1, 0]
    assert repr(packed).startswith("PackedSequence(data=tensor([3., 1., 4., 2., 5.])")
    assert packed.to(ember.float32) is packed and packed.float() is packed
    assert packed.cpu() is packed and not packed.is_cuda
    double = packed.double()
    assert isinstance(double, R.PackedSequence) and double.data.dtype == ember.float64
    assert double.batch_sizes is packed.batch_sizes
    assert double.sorted_indices.tolist() == [1, 0]
    for method, dtype in (("long", ember.int64), ("int", ember.int32), ("short", ember.int16),
                          ("char", ember.int8), ("byte", ember.uint8), ("half", ember.float16)):
        assert getattr(packed, method)().data.dtype == dtype
    # built by hand: the unsorted order is worked out, and the (data, batch_sizes) form
    manual = R.PackedSequence(data, batch_sizes, ember.tensor([1, 0]))
    assert manual.unsorted_indices.tolist() == [1, 0]
    pair = R.PackedSequence((data, batch_sizes))
    assert pair.batch_sizes is batch_sizes and pair.sorted_indices is None
    with pytest.raises(EmberTypeError, match="PackedSequence"):
        R.PackedSequence(data)


# Errors ---------------------------------------------------------------------------------
def test_errors():
    x = ember.tensor(_rand(4, 3, 2))
    with pytest.raises(EmberValueError, match="sorted in decreasing order"):
        R.pack_padded_sequence(x, [3, 2, 3])
    with pytest.raises(EmberValueError, match="greater than 0"):
        R.pack_padded_sequence(x, [3, 2, 0])
    with pytest.raises(EmberValueError, match="greater than 0"):
        R.pack_padded_sequence(x, [3, -1, 2], enforce_sorted=False)
    with pytest.raises(EmberValueError, match="exceed the padded sequence length 4"):
        R.pack_padded_sequence(x, [5, 2, 1])
    with pytest.raises(ShapeError, match=r"len\(lengths\)` to be equal to batch_size"):
        R.pack_padded_sequence(x, [3, 2])
    with pytest.raises(ShapeError, match="1D tensor"):
        R.pack_padded_sequence(x, ember.tensor([[3, 2, 1]]))
    with pytest.raises(EmberTypeError, match="lengths"):
        R.pack_padded_sequence(x, ["a", "b", "c"])
    with pytest.raises(ShapeError, match="at least 2 dims"):
        R.pack_padded_sequence(ember.ones(4), [3])
    with pytest.raises(EmberValueError, match="Cannot pack empty tensors"):
        R.pack_padded_sequence(ember.ones(4, 3, 0), [2, 2, 1])
    with pytest.raises(EmberTypeError, match="input"):
        R.pack_padded_sequence([[1.0]], [1])
    with pytest.raises(EmberValueError, match="received an empty list"):
        R.pad_sequence([])
    with pytest.raises(EmberValueError, match="received an empty list"):
        R.pack_sequence([])
    with pytest.raises(EmberTypeError, match="Expected iterable"):
        R.pad_sequence(5)
    with pytest.raises(ShapeError, match="at least 1 dim"):
        R.pad_sequence([ember.tensor(1.0)])
    with pytest.raises(ShapeError, match=r"trailing shape of the first, \(3,\)"):
        R.pad_sequence([ember.ones(2, 3), ember.ones(1, 2)])
    with pytest.raises(EmberTypeError, match="not a Tensor"):
        R.pad_sequence([ember.ones(2), [1.0]])
    with pytest.raises(EmberValueError, match="padding_side to be one of left or right"):
        R.pad_sequence([ember.ones(2)], padding_side="middle")
    with pytest.raises(EmberValueError, match="sorted in decreasing order"):
        R.pack_sequence([ember.ones(1), ember.ones(2)])
    with pytest.raises(EmberValueError, match="greater than 0"):
        R.pack_sequence([ember.ones(2), ember.ones(0)])
    packed = R.pack_sequence([ember.ones(3), ember.ones(2)])
    with pytest.raises(EmberValueError, match="total_length=2 and max sequence length being 3"):
        R.pad_packed_sequence(packed, total_length=2)
    with pytest.raises(EmberTypeError, match="expected a PackedSequence"):
        R.pad_packed_sequence(ember.ones(3))
    with pytest.raises(ShapeError, match="add up to 5 rows"):
        R.pad_packed_sequence(R.PackedSequence(ember.ones(4), packed.batch_sizes))
    with pytest.raises(EmberValueError, match="got 2 lengths for a batch of 3"):
        R.unpad_sequence(ember.ones(4, 3), ember.tensor([2, 1]))
    # all of them are RuntimeErrors (or ValueErrors) where PyTorch raises those
    assert issubclass(EmberValueError, (RuntimeError, EmberError))


# RNN, LSTM and GRU on packed input -------------------------------------------------------
LAYER_CASES = [
    ("RNN", {}, [3, 5, 1, 4], False, True),
    ("RNN", {"nonlinearity": "relu", "num_layers": 2, "bidirectional": True},
     [2, 4, 1, 3], False, False),
    ("RNN", {"batch_first": True, "bias": False}, [4, 3, 3, 1], True, True),
    ("LSTM", {"num_layers": 2, "bidirectional": True}, [3, 5, 1, 4], False, True),
    ("LSTM", {"bidirectional": True, "batch_first": True}, [2, 1, 4], False, False),
    ("LSTM", {"proj_size": 2, "num_layers": 2}, [1, 3, 2], False, True),
    ("LSTM", {}, [1, 1, 1], True, True),
    ("GRU", {"num_layers": 2}, [4, 2, 2, 1], True, False),
    ("GRU", {"bidirectional": True, "batch_first": True, "num_layers": 2}, [2, 5, 3], False,
     True),
    ("GRU", {"bidirectional": True}, [3], True, True),
]


def _layers(name, kwargs, dtype="float64"):
    torch.manual_seed(0)
    t = getattr(torch.nn, name)(3, 4, **kwargs).to(getattr(torch, dtype))
    e = getattr(ember.nn, name)(3, 4, **kwargs).to(getattr(ember, dtype))
    e.load_state_dict({k: ember.tensor(v.detach().numpy()) for k, v in t.state_dict().items()})
    return e, t


def _states(name, kwargs, batch, dtype):
    layers = kwargs.get("num_layers", 1) * (2 if kwargs.get("bidirectional") else 1)
    h = _rand(layers, batch, kwargs.get("proj_size") or 4, seed=3).astype(dtype)
    if name != "LSTM":
        return [h]
    return [h, _rand(layers, batch, 4, seed=4).astype(dtype)]


def _as_tuple(state):
    return state if isinstance(state, tuple) else (state,)


def _check_layer(name, kwargs, lengths, enforce_sorted, with_hx, dtype="float64", tol=1e-10):
    e_mod, t_mod = _layers(name, kwargs, dtype)
    steps, batch = max(lengths), len(lengths)
    batch_first = kwargs.get("batch_first", False)
    shape = (batch, steps, 3) if batch_first else (steps, batch, 3)
    x = _rand(*shape).astype(dtype)
    xe = ember.tensor(x, requires_grad=True)
    xt = torch.tensor(x, requires_grad=True)
    order = np.argsort(-np.array(lengths), kind="stable")
    if enforce_sorted:  # the same sequences, longest first
        index = order.tolist()
        xe_in = xe[index] if batch_first else xe[:, index]
        xt_in = xt[index] if batch_first else xt[:, index]
        lengths = sorted(lengths, reverse=True)
    else:
        xe_in, xt_in = xe, xt
    e_in = R.pack_padded_sequence(xe_in, lengths, batch_first, enforce_sorted)
    t_in = TR.pack_padded_sequence(xt_in, lengths, batch_first, enforce_sorted)
    e_hx, t_hx = [], []
    if with_hx:
        for s in _states(name, kwargs, batch, dtype):
            e_hx.append(ember.tensor(s, requires_grad=True))
            t_hx.append(torch.tensor(s, requires_grad=True))
    e_args = () if not with_hx else (tuple(e_hx) if name == "LSTM" else e_hx[0],)
    t_args = () if not with_hx else (tuple(t_hx) if name == "LSTM" else t_hx[0],)
    e_out, e_state = e_mod(e_in, *e_args)
    t_out, t_state = t_mod(t_in, *t_args)
    assert isinstance(e_out, R.PackedSequence)
    assert e_out.batch_sizes is e_in.batch_sizes
    assert e_out.sorted_indices is e_in.sorted_indices
    _close(e_out.data, t_out.data, tol)
    for a, b in zip(_as_tuple(e_state), _as_tuple(t_state)):
        _close(a, b, tol)
    # a loss on the output and on every final state
    e_loss = (e_out.data * ember.tensor(_rand(*t_out.data.shape, seed=5).astype(dtype))).sum()
    t_loss = (t_out.data * torch.tensor(_rand(*t_out.data.shape, seed=5).astype(dtype))).sum()
    for i, (a, b) in enumerate(zip(_as_tuple(e_state), _as_tuple(t_state))):
        g = _rand(*b.shape, seed=6 + i).astype(dtype)
        e_loss = e_loss + (a * ember.tensor(g)).sum()
        t_loss = t_loss + (b * torch.tensor(g)).sum()
    e_loss.backward()
    t_loss.backward()
    _close(xe.grad, xt.grad, tol)
    for a, b in zip(e_hx, t_hx):
        _close(a.grad, b.grad, tol)
    t_params = dict(t_mod.named_parameters())
    for key, p in e_mod.named_parameters():
        _close(p.grad, t_params[key].grad, tol)


@pytest.mark.parametrize("name,kwargs,lengths,enforce_sorted,with_hx", LAYER_CASES)
def test_layer_on_packed_input_matches_torch(name, kwargs, lengths, enforce_sorted, with_hx):
    _check_layer(name, kwargs, lengths, enforce_sorted, with_hx)


@pytest.mark.parametrize("case", [LAYER_CASES[3], LAYER_CASES[8]])
def test_layer_on_packed_input_matches_torch_float32(case):
    _check_layer(*case, dtype="float32", tol=1e-5)


def test_packed_output_pads_to_the_padded_run_of_each_sequence():
    """Each sequence alone through the padded path gives its slice of the packed run."""
    lstm = ember.nn.LSTM(3, 4, bidirectional=True).to(ember.float64)
    lengths = [2, 4, 1]
    x = ember.tensor(_rand(4, 3, 3))
    out, (h, c) = lstm(R.pack_padded_sequence(x, lengths, enforce_sorted=False))
    padded, _ = R.pad_packed_sequence(out)
    for b, n in enumerate(lengths):
        alone, (h_b, c_b) = lstm(x[:n, b])
        _close(padded[:n, b], alone.detach().numpy())
        assert np.all(padded[n:, b].detach().numpy() == 0)
        _close(h[:, b], h_b.detach().numpy())
        _close(c[:, b], c_b.detach().numpy())


def test_layer_packed_input_errors():
    gru = ember.nn.GRU(3, 4, num_layers=2)
    packed = R.pack_sequence([ember.ones(3, 3), ember.ones(2, 3)])
    with pytest.raises(ShapeError, match="input.size\\(-1\\) must be equal to input_size"):
        gru(R.pack_sequence([ember.ones(3, 2), ember.ones(2, 2)]))
    with pytest.raises(ShapeError, match=r"Expected hidden size \(2, 2, 4\)"):
        gru(packed, ember.zeros(2, 3, 4))
    with pytest.raises(ShapeError, match="input must have 2 dimensions"):
        gru(R.PackedSequence(ember.ones(5, 1, 3), packed.batch_sizes))
    with pytest.raises(EmberTypeError, match="dtype float64"):
        gru(packed.double())


# ember.jit ------------------------------------------------------------------------------
def test_jit_of_pack_lstm_pad_matches_eager():
    lstm = ember.nn.LSTM(3, 4, bidirectional=True).to(ember.float64)
    x = ember.tensor(_rand(5, 3, 3), requires_grad=True)

    def step(x):
        packed = R.pack_padded_sequence(x, [2, 5, 3], enforce_sorted=False)
        out, (h, c) = lstm(packed)
        padded, _ = R.pad_packed_sequence(out, total_length=6)
        loss = (padded ** 2).sum() + h.sum() + c.sum()
        loss.backward()
        return loss

    results = []
    for fn in (step, ember.jit(step), ember.jit(step)):
        x.grad = None
        lstm.zero_grad()
        loss = fn(x)
        results.append((loss.item(), x.grad.numpy().copy(), lstm.weight_hh_l0.grad.numpy().copy()))
    for loss, gx, gw in results[1:]:
        assert loss == pytest.approx(results[0][0], rel=1e-12)
        _close(gx, results[0][1])
        _close(gw, results[0][2])


def test_jit_with_traced_lengths_raises():
    x = ember.tensor(_rand(4, 2, 3))
    with pytest.raises(DataDependentError, match="pack_padded_sequence"):
        ember.jit(lambda x, n: R.pack_padded_sequence(x, n).data)(x, ember.tensor([4, 2]))
    packed = R.pack_padded_sequence(x, [4, 2])
    with pytest.raises(DataDependentError, match="pad_packed_sequence"):
        ember.jit(lambda d, b: R.pad_packed_sequence(R.PackedSequence(d, b))[0])(*packed[:2])
