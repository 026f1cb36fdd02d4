"""nn.LSTM as ONNX ``LSTM`` nodes.

ember's LSTM unrolls over the sequence, so its trace fixes the length. While an export
traces, each ``nn.LSTM`` (batched input, no projection) is recorded as one ``lstm``
instruction instead, which maps to one ONNX LSTM node per layer: the sequence axis can
then be dynamic. The weights stay the module's parameters (initializers named by their
state-dict keys); the gates are reordered from PyTorch's (i, f, g, o) to ONNX's
(i, o, f, c) by Slice/Concat nodes that ONNX Runtime folds when it loads the file.
"""
from __future__ import annotations


from ..ops.registry import AbstractValue, Op, apply
from .mapping import maps


def _lstm_infer(x, *rest, hidden, layers, directions, batch_first, has_bias, has_state):
    seq, batch = (x.shape[1], x.shape[0]) if batch_first else (x.shape[0], x.shape[1])
    out = (batch, seq, directions * hidden) if batch_first else (seq, batch, directions * hidden)
    state = (layers * directions, batch, hidden)
    return (AbstractValue(out, x.dtype), AbstractValue(state, x.dtype),
            AbstractValue(state, x.dtype))


def _never_run(xp, *arrays, **params):
    raise NotImplementedError("the export-only lstm op is traced, never run")


LSTM_OP = Op("lstm", _never_run, infer=_lstm_infer, n_outputs=3)


def stand_in_forward(m):
    """The forward that records one ``lstm`` instruction, for a plain nn.LSTM; else
    None (see ``capture._stand_ins``)."""
    from ..nn.layers.rnn import LSTM
    return _traced_forward(m) if isinstance(m, LSTM) and not m.proj_size else None


def _traced_forward(m):
    original = type(m).forward

    def forward(input, hx=None):
        if input.ndim != 3:  # unbatched: the unrolled ops
            return original(m, input, hx)
        state = list(hx) if hx is not None else []
        out, h, c = apply(LSTM_OP, input, *state, *m._flat_weights,
                          hidden=m.hidden_size, layers=m.num_layers,
                          directions=2 if m.bidirectional else 1,
                          batch_first=m.batch_first, has_bias=m.bias,
                          has_state=hx is not None)
        return out, (h, c)
    return forward


def _gates(b, w, hidden: int) -> str:
    """Rows of ``w`` (4H, ...) from (i, f, g, o) to ONNX's (i, o, f, c)."""
    name = b.name(w)
    part = [b.node("Slice", [name, b.ints([k * hidden]), b.ints([(k + 1) * hidden]),
                             b.ints([0])]) for k in range(4)]
    return b.node("Concat", [part[0], part[3], part[1], part[2]], axis=0)


@maps("lstm")
def _lstm(b, ins):
    p = ins.params
    hidden, dirs = p["hidden"], p["directions"]
    x, *rest = ins.inputs
    state = rest[:2] if p["has_state"] else []
    weights = rest[len(state):]
    per = 4 if p["has_bias"] else 2
    seq_first = b.node("Transpose", [b.name(x)], perm=[1, 0, 2]) if p["batch_first"] \
        else b.name(x)
    hs, cs = [], []
    for layer in range(p["layers"]):
        ws, rs, bs = [], [], []
        for d in range(dirs):
            group = weights[(layer * dirs + d) * per:(layer * dirs + d + 1) * per]
            ws.append(b.node("Unsqueeze", [_gates(b, group[0], hidden), b.ints([0])]))
            rs.append(b.node("Unsqueeze", [_gates(b, group[1], hidden), b.ints([0])]))
            if p["has_bias"]:
                both = b.node("Concat", [_gates(b, group[2], hidden),
                                         _gates(b, group[3], hidden)], axis=0)
                bs.append(b.node("Unsqueeze", [both, b.ints([0])]))
        cat = (lambda parts: parts[0] if len(parts) == 1 else
               b.node("Concat", parts, axis=0))
        inputs = [seq_first, cat(ws), cat(rs), cat(bs) if bs else "", ""]
        if state:
            lo, hi = layer * dirs, (layer + 1) * dirs
            for s in state:
                inputs.append(b.node("Slice", [b.name(s), b.ints([lo]), b.ints([hi]),
                                               b.ints([0])]))
        y, h, c = b.node("LSTM", inputs, n_out=3, hidden_size=hidden,
                         direction="bidirectional" if dirs == 2 else "forward")
        hs.append(h)
        cs.append(c)
        # (seq, dirs, batch, H) -> (seq, batch, dirs * H)
        y = b.node("Transpose", [y], perm=[0, 2, 1, 3])
        seq_first = b.node("Reshape", [y, b.ints([0, 0, -1])])
    out = b.node("Transpose", [seq_first], perm=[1, 0, 2]) if p["batch_first"] else seq_first
    join = (lambda parts: parts[0] if len(parts) == 1 else b.node("Concat", parts, axis=0))
    return [out, join(hs), join(cs)]
