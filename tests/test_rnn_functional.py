"""ember's top-level functional RNN ops (rnn_tanh_cell, lstm_cell, gru_cell, lstm, gru,
rnn_tanh, rnn_relu) against PyTorch: values and gradients in float64."""
import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(0)


def pair(*shape):
    a = RNG.standard_normal(shape) * 0.5
    return (ember.tensor(a, dtype=ember.float64, requires_grad=True),
            torch.tensor(a, dtype=torch.float64, requires_grad=True))


def close(e, t, tol=1e-10):
    np.testing.assert_allclose(e.detach().numpy(), t.detach().numpy(), rtol=tol, atol=tol)


CELLS = [("rnn_tanh_cell", 1), ("rnn_relu_cell", 1), ("gru_cell", 3), ("lstm_cell", 4)]


@pytest.mark.parametrize("name,gates", CELLS)
@pytest.mark.parametrize("biases", ["both", "ih", "none"])
def test_cell_values_and_grads(name, gates, biases):
    n, i, h = 3, 5, 4
    x, tx = pair(n, i)
    w_ih, tw_ih = pair(gates * h, i)
    w_hh, tw_hh = pair(gates * h, h)
    b_ih, tb_ih = pair(gates * h) if biases != "none" else (None, None)
    b_hh, tb_hh = pair(gates * h) if biases == "both" else (None, None)
    hx, thx = pair(n, h)
    if name == "lstm_cell":
        cx, tcx = pair(n, h)
        out = ember.lstm_cell(x, (hx, cx), w_ih, w_hh, b_ih, b_hh)
        tout = torch.lstm_cell(tx, (thx, tcx), tw_ih, tw_hh, tb_ih, tb_hh)
        leaves = [x, hx, cx, w_ih, w_hh]
        tleaves = [tx, thx, tcx, tw_ih, tw_hh]
        loss = (out[0] * out[0]).sum() + out[1].sin().sum()
        tloss = (tout[0] * tout[0]).sum() + tout[1].sin().sum()
        close(out[0], tout[0])
        close(out[1], tout[1])
    else:
        out = getattr(ember, name)(x, hx, w_ih, w_hh, b_ih, b_hh)
        tout = getattr(torch, name)(tx, thx, tw_ih, tw_hh, tb_ih, tb_hh)
        leaves, tleaves = [x, hx, w_ih, w_hh], [tx, thx, tw_ih, tw_hh]
        loss, tloss = (out * out).sum(), (tout * tout).sum()
        close(out, tout)
    for b, tb in ((b_ih, tb_ih), (b_hh, tb_hh)):
        if b is not None:
            leaves.append(b)
            tleaves.append(tb)
    grads = ember.autograd.grad(loss, leaves)
    tgrads = torch.autograd.grad(tloss, tleaves)
    for g, tg in zip(grads, tgrads):
        close(g, tg)


@pytest.mark.parametrize("name,gates", CELLS)
def test_cell_unbatched_matches_batched(name, gates):
    x, tx = pair(5)
    w_ih, tw_ih = pair(gates * 4, 5)
    w_hh, tw_hh = pair(gates * 4, 4)
    hx, thx = pair(4)
    if name == "lstm_cell":
        out = ember.lstm_cell(x, (hx, hx), w_ih, w_hh)
        tout = torch.lstm_cell(tx[None], (thx[None], thx[None]), tw_ih, tw_hh)
        assert tuple(out[0].shape) == (4,) and tuple(out[1].shape) == (4,)
        close(out[0], tout[0][0])
        close(out[1], tout[1][0])
    else:
        out = getattr(ember, name)(x, hx, w_ih, w_hh)
        tout = getattr(torch, name)(tx[None], thx[None], tw_ih, tw_hh)
        assert tuple(out.shape) == (4,)
        close(out, tout[0])


def test_cell_errors():
    x, w_ih, w_hh = ember.zeros(2, 3), ember.zeros(4, 3), ember.zeros(4, 4)
    with pytest.raises(ember.ShapeError, match=r"rnn_tanh_cell: input has inconsistent "
                                               r"input_size: got 2 expected 3"):
        ember.rnn_tanh_cell(ember.zeros(2, 2), ember.zeros(2, 4), w_ih, w_hh)
    with pytest.raises(ember.ShapeError, match=r"gru_cell: weight_ih first dim must be 3"):
        ember.gru_cell(x, ember.zeros(2, 4), w_ih, w_hh)
    with pytest.raises(ember.ShapeError, match=r"rnn_relu_cell: expected hx of shape "
                                               r"\(2, 4\).*got \(3, 4\)"):
        ember.rnn_relu_cell(x, ember.zeros(3, 4), w_ih, w_hh)
    with pytest.raises(ember.EmberTypeError, match="lstm_cell: hx must be a pair"):
        ember.lstm_cell(x, ember.zeros(2, 4), ember.zeros(16, 3), w_hh)
    with pytest.raises(ember.ShapeError, match="rnn_tanh_cell: bias_hh must have shape"):
        ember.rnn_tanh_cell(x, ember.zeros(2, 4), w_ih, w_hh, ember.zeros(4), ember.zeros(5))


def _modules(kind, **kw):
    torch.manual_seed(0)
    cls = {"lstm": torch.nn.LSTM, "gru": torch.nn.GRU, "rnn_tanh": torch.nn.RNN,
           "rnn_relu": torch.nn.RNN}[kind]
    if kind == "rnn_relu":
        kw["nonlinearity"] = "relu"
    m = cls(3, 4, dtype=torch.float64, **kw)
    tparams = [p.detach().clone().requires_grad_(True) for p in m._flat_weights]
    eparams = [ember.tensor(p.detach().numpy(), requires_grad=True) for p in tparams]
    return eparams, tparams


def _states(kind, count, batch, hidden=4, proj=None):
    h, th = pair(count, batch, proj or hidden)
    if kind != "lstm":
        return h, th, [h], [th]
    c, tc = pair(count, batch, hidden)
    return (h, c), (th, tc), [h, c], [th, tc]


@pytest.mark.parametrize("kind", ["lstm", "gru", "rnn_tanh", "rnn_relu"])
@pytest.mark.parametrize("layers,bidir,batch_first,bias", [
    (1, False, False, True), (2, True, False, True), (2, False, True, False),
    (3, True, True, True)])
def test_sequence_matches_torch(kind, layers, bidir, batch_first, bias):
    ep, tp = _modules(kind, num_layers=layers, bidirectional=bidir, bias=bias)
    x, tx = pair(*((2, 5, 3) if batch_first else (5, 2, 3)))
    count = layers * (2 if bidir else 1)
    hx, thx, hl, thl = _states(kind, count, 2)
    args = (bias, layers, 0.0, True, bidir, batch_first)
    out = getattr(ember, kind)(x, hx, ep, *args)
    tout = getattr(torch, kind)(tx, thx, tp, *args)
    assert len(out) == len(tout)
    for o, to in zip(out, tout):
        assert tuple(o.shape) == tuple(to.shape)
        close(o, to)
    loss = sum((o * o).sum() for o in out)
    tloss = sum((o * o).sum() for o in tout)
    for g, tg in zip(ember.autograd.grad(loss, [x] + hl + ep),
                     torch.autograd.grad(tloss, [tx] + thl + tp)):
        close(g, tg)


def test_lstm_projection():
    ep, tp = _modules("lstm", num_layers=2, bidirectional=True, proj_size=2)
    x, tx = pair(4, 3, 3)
    hx, thx, _, _ = _states("lstm", 4, 3, proj=2)
    out = ember.lstm(x, hx, ep, True, 2, 0.0, False, True, False)
    tout = torch.lstm(tx, thx, tp, True, 2, 0.0, False, True, False)
    for o, to in zip(out, tout):
        close(o, to)


@pytest.mark.parametrize("kind", ["lstm", "gru", "rnn_tanh"])
def test_packed_form(kind):
    ep, tp = _modules(kind, num_layers=2, bidirectional=True)
    batch_sizes = [3, 3, 2, 1]
    data, tdata = pair(sum(batch_sizes), 3)
    bs, tbs = ember.tensor(batch_sizes), torch.tensor(batch_sizes)
    hx, thx, hl, thl = _states(kind, 4, 3)
    out = getattr(ember, kind)(data, bs, hx, ep, True, 2, 0.0, False, True)
    tout = getattr(torch, kind)(tdata, tbs, thx, tp, True, 2, 0.0, False, True)
    for o, to in zip(out, tout):
        assert tuple(o.shape) == tuple(to.shape)
        close(o, to)
    loss = sum((o * o).sum() for o in out)
    tloss = sum((o * o).sum() for o in tout)
    for g, tg in zip(ember.autograd.grad(loss, [data] + hl + ep),
                     torch.autograd.grad(tloss, [tdata] + thl + tp)):
        close(g, tg)


def test_sequence_dropout():
    ep, _ = _modules("gru", num_layers=2)
    x = ember.randn(6, 2, 3, dtype=ember.float64)
    h = ember.zeros(2, 2, 4, dtype=ember.float64)
    plain = ember.gru(x, h, ep, True, 2, 0.0, True, False, False)[0]
    no_train = ember.gru(x, h, ep, True, 2, 0.9, False, False, False)[0]
    close(plain, no_train.detach(), 0)
    ember.manual_seed(1)
    dropped = ember.gru(x, h, ep, True, 2, 0.9, True, False, False)[0]
    assert not np.allclose(plain.detach().numpy(), dropped.detach().numpy())


def test_jit_matches_eager():
    ep, _ = _modules("lstm")
    x = ember.randn(5, 2, 3, dtype=ember.float64)
    h = ember.zeros(1, 2, 4, dtype=ember.float64)

    def fn(x, h):
        out, hn, cn = ember.lstm(x, (h, h), [p.detach() for p in ep], True, 1, 0.0, False,
                                 False, False)
        return out.sum() + cn.sum()

    close(ember.jit(fn)(x, h), fn(x, h))


def test_sequence_errors():
    ep, _ = _modules("gru", num_layers=2)
    h = ember.zeros(2, 2, 4, dtype=ember.float64)
    with pytest.raises(ember.ShapeError, match=r"gru: expected a 3-D input"):
        ember.gru(ember.zeros(5, 3, dtype=ember.float64), h, ep, True, 2, 0.0, False,
                  False, False)
    with pytest.raises(ember.ShapeError, match=r"gru: expected 8 weights .* got 4"):
        ember.gru(ember.zeros(5, 2, 3, dtype=ember.float64), h, ep[:4], True, 2, 0.0,
                  False, False, False)
    with pytest.raises(ember.ShapeError, match=r"gru: expected hx of shape"):
        ember.gru(ember.zeros(5, 2, 3, dtype=ember.float64), h[:1], ep, True, 2, 0.0,
                  False, False, False)
    with pytest.raises(ember.ShapeError, match=r"weight_ih has shape \(12, 3\); expected "
                                               r"\(12, 5\)"):
        ember.gru(ember.zeros(5, 2, 5, dtype=ember.float64), h, ep, True, 2, 0.0, False,
                  False, False)
    with pytest.raises(ember.EmberTypeError, match="lstm: hx must be a pair"):
        ember.lstm(ember.zeros(5, 2, 3), h, ep, True, 2, 0.0, False, False, False)
    with pytest.raises(ember.ShapeError, match=r"packed batch sizes \[2, 2\]"):
        ember.gru(ember.zeros(5, 3, dtype=ember.float64), ember.tensor([2, 2]), h, ep,
                  True, 2, 0.0, False, False)


def test_cells_empty_batch_non_contiguous_and_jit():
    w_ih, tw_ih = pair(12, 3)
    w_hh, tw_hh = pair(12, 4)
    out = ember.gru_cell(ember.zeros(0, 3, dtype=ember.float64),
                         ember.zeros(0, 4, dtype=ember.float64), w_ih, w_hh)
    assert tuple(out.shape) == (0, 4)
    x, tx = pair(3, 5)  # used transposed: (5, 3), not contiguous
    h, th = pair(4, 5)
    out = ember.gru_cell(x.t(), h.t(), w_ih, w_hh)
    tout = torch.gru_cell(tx.t(), th.t(), tw_ih, tw_hh)
    close(out, tout)
    fn = lambda x, h: ember.gru_cell(x, h, w_ih.detach(), w_hh.detach())  # noqa: E731
    xd, hd = x.t().detach().contiguous(), h.t().detach().contiguous()
    close(ember.jit(fn)(xd, hd), fn(xd, hd))


def test_sequence_empty_batch():
    ep, tp = _modules("gru")
    out = ember.gru(ember.zeros(5, 0, 3, dtype=ember.float64),
                    ember.zeros(1, 0, 4, dtype=ember.float64), ep, True, 1, 0.0, False,
                    False, False)
    assert [tuple(o.shape) for o in out] == [(5, 0, 4), (1, 0, 4)]
