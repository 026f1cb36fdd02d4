"""PyTorch's functional recurrent ops at the top level: the one-step cells
(``rnn_tanh_cell``, ``rnn_relu_cell``, ``lstm_cell``, ``gru_cell``) and the whole-sequence
forms (``rnn_tanh``, ``rnn_relu``, ``lstm``, ``gru``) that ``nn.RNN``/``nn.LSTM``/``nn.GRU``
stand on in PyTorch, taking the flat weight list ``module._flat_weights``.

Everything is composed from ember ops (the step updates of ``nn.layers.rnn_cells`` and the
time loops of ``nn.layers.rnn``), so gradients and ``ember.jit`` tracing come for free.
"""
from __future__ import annotations

from .errors import EmberTypeError, ShapeError
from .nn import functional as F
from .nn.layers.rnn import run_direction
from .nn.layers.rnn_cells import _gru_step, _lstm_step, _rnn_step
from .ops import shape as _shape
from .tensor import Tensor

__all__ = ["rnn_tanh_cell", "rnn_relu_cell", "lstm_cell", "gru_cell",
           "rnn_tanh", "rnn_relu", "lstm", "gru"]


# The cells -----------------------------------------------------------------------------
def _check_tensor(op: str, what: str, value) -> None:
    if not isinstance(value, Tensor):
        raise EmberTypeError(f"{op}: expected {what} to be a Tensor, got "
                             f"{type(value).__name__}")


def _cell_args(op: str, input, hxs, w_ih, w_hh, b_ih, b_hh, gates: int):
    """Checks a cell's arguments; returns (batched input, batched states, unbatched)."""
    _check_tensor(op, "input", input)
    for what, t in (("weight_ih", w_ih), ("weight_hh", w_hh)):
        _check_tensor(op, what, t)
        if t.ndim != 2:
            raise ShapeError(f"{op}: {what} must be 2-D, got shape {tuple(t.shape)}")
    if input.ndim not in (1, 2):
        raise ShapeError(f"{op}: expected input to be 1-D (unbatched) or 2-D (batch, "
                         f"input_size), got shape {tuple(input.shape)}")
    hidden = w_hh.shape[1]
    if w_ih.shape[1] != input.shape[-1]:
        raise ShapeError(f"{op}: input has inconsistent input_size: got {input.shape[-1]} "
                         f"expected {w_ih.shape[1]} (input of shape {tuple(input.shape)}, "
                         f"weight_ih of shape {tuple(w_ih.shape)})")
    for what, t in (("weight_ih", w_ih), ("weight_hh", w_hh)):
        if t.shape[0] != gates * hidden:
            raise ShapeError(f"{op}: {what} first dim must be {gates} * hidden_size = "
                             f"{gates * hidden}, but got shape {tuple(t.shape)}")
    for what, t in (("bias_ih", b_ih), ("bias_hh", b_hh)):
        if t is None:
            continue
        _check_tensor(op, what, t)
        if tuple(t.shape) != (gates * hidden,):
            raise ShapeError(f"{op}: {what} must have shape ({gates * hidden},), got "
                             f"{tuple(t.shape)}")
    batched = input.ndim == 2
    want = (input.shape[0], hidden) if batched else (hidden,)
    states = []
    for what, h in hxs:
        _check_tensor(op, what, h)
        if tuple(h.shape) != want:
            raise ShapeError(f"{op}: expected {what} of shape {want} for input of shape "
                             f"{tuple(input.shape)}, got {tuple(h.shape)}")
        if h.dtype != input.dtype:
            raise EmberTypeError(f"{op}: {what} has dtype {h.dtype.name} but input has "
                                 f"{input.dtype.name}")
        states.append(h if batched else h.unsqueeze(0))
    return (input if batched else input.unsqueeze(0)), states, not batched


def _rnn_cell(op: str, relu: bool, input, hx, w_ih, w_hh, b_ih, b_hh):
    x, (h,), unbatched = _cell_args(op, input, [("hx", hx)], w_ih, w_hh, b_ih, b_hh, 1)
    out = _rnn_step(F.linear(x, w_ih, b_ih), h, w_hh.t(), b_hh, relu)
    return out.squeeze(0) if unbatched else out


def rnn_tanh_cell(input: Tensor, hx: Tensor, w_ih: Tensor, w_hh: Tensor,
                  b_ih: Tensor | None = None, b_hh: Tensor | None = None) -> Tensor:
    r"""One step of an Elman RNN: :math:`h' = \tanh(x W_{ih}^T + b_{ih} + h W_{hh}^T +
    b_{hh})`, as ``torch.rnn_tanh_cell``.

    Args:
        input: (N, input_size), or (input_size) unbatched (as ``nn.RNNCell`` takes it).
        hx: (N, hidden_size), or (hidden_size) unbatched.
        w_ih: (hidden_size, input_size). w_hh: (hidden_size, hidden_size).
        b_ih, b_hh: (hidden_size) or None.

    Returns the new hidden state, shaped like ``hx``.

    >>> h = ember.rnn_tanh_cell(ember.randn(2, 3), ember.zeros(2, 4), ember.randn(4, 3),
    ...                         ember.randn(4, 4))
    >>> h.shape
    ember.Size([2, 4])
    """
    return _rnn_cell("rnn_tanh_cell", False, input, hx, w_ih, w_hh, b_ih, b_hh)


def rnn_relu_cell(input: Tensor, hx: Tensor, w_ih: Tensor, w_hh: Tensor,
                  b_ih: Tensor | None = None, b_hh: Tensor | None = None) -> Tensor:
    r"""One step of an Elman RNN with ReLU: :math:`h' = \max(0, x W_{ih}^T + b_{ih} +
    h W_{hh}^T + b_{hh})`, as ``torch.rnn_relu_cell``. Arguments as :func:`rnn_tanh_cell`.

    >>> ember.rnn_relu_cell(ember.ones(1, 2), ember.zeros(1, 2), ember.eye(2),
    ...                     ember.eye(2))
    tensor([[1., 1.]])
    """
    return _rnn_cell("rnn_relu_cell", True, input, hx, w_ih, w_hh, b_ih, b_hh)


def lstm_cell(input: Tensor, hx, w_ih: Tensor, w_hh: Tensor, b_ih: Tensor | None = None,
              b_hh: Tensor | None = None) -> tuple:
    r"""One LSTM step, as ``torch.lstm_cell``: gates ``i, f, g, o`` (in that order) from
    :math:`x W_{ih}^T + b_{ih} + h W_{hh}^T + b_{hh}`; :math:`c' = \sigma(f) c +
    \sigma(i) \tanh(g)`, :math:`h' = \sigma(o) \tanh(c')`.

    Args:
        input: (N, input_size), or (input_size) unbatched.
        hx: the pair ``(h, c)``, each (N, hidden_size) (or (hidden_size) unbatched).
        w_ih: (4 * hidden_size, input_size). w_hh: (4 * hidden_size, hidden_size).
        b_ih, b_hh: (4 * hidden_size) or None.

    Returns ``(h', c')``.

    >>> h, c = ember.lstm_cell(ember.randn(2, 3), (ember.zeros(2, 4), ember.zeros(2, 4)),
    ...                        ember.randn(16, 3), ember.randn(16, 4))
    >>> h.shape, c.shape
    (ember.Size([2, 4]), ember.Size([2, 4]))
    """
    op = "lstm_cell"
    if not (isinstance(hx, (tuple, list)) and len(hx) == 2):
        raise EmberTypeError(f"{op}: hx must be a pair (h, c) of tensors, got "
                             f"{type(hx).__name__}"
                             + (f" of length {len(hx)}" if isinstance(hx, (tuple, list))
                                else ""))
    x, (h, c), unbatched = _cell_args(op, input, [("hx[0]", hx[0]), ("hx[1]", hx[1])],
                                      w_ih, w_hh, b_ih, b_hh, 4)
    h, c = _lstm_step(F.linear(x, w_ih, b_ih), h, c, w_hh.t(), b_hh, None, w_hh.shape[1])
    return (h.squeeze(0), c.squeeze(0)) if unbatched else (h, c)


def gru_cell(input: Tensor, hx: Tensor, w_ih: Tensor, w_hh: Tensor,
             b_ih: Tensor | None = None, b_hh: Tensor | None = None) -> Tensor:
    r"""One GRU step, as ``torch.gru_cell``: gates ``r, z, n`` (in that order);
    :math:`n = \tanh(x W_{in}^T + b_{in} + r (h W_{hn}^T + b_{hn}))`,
    :math:`h' = (1 - z) n + z h`.

    Args:
        input: (N, input_size), or (input_size) unbatched.
        hx: (N, hidden_size), or (hidden_size) unbatched.
        w_ih: (3 * hidden_size, input_size). w_hh: (3 * hidden_size, hidden_size).
        b_ih, b_hh: (3 * hidden_size) or None.

    >>> ember.gru_cell(ember.randn(2, 3), ember.zeros(2, 4), ember.randn(12, 3),
    ...                ember.randn(12, 4)).shape
    ember.Size([2, 4])
    """
    x, (h,), unbatched = _cell_args("gru_cell", input, [("hx", hx)], w_ih, w_hh, b_ih,
                                    b_hh, 3)
    hidden = w_hh.shape[1]
    xw = F.linear(x, w_ih, b_ih)
    out = _gru_step(xw[:, :2 * hidden], xw[:, 2 * hidden:], h, w_hh.t(), b_hh, hidden)
    return out.squeeze(0) if unbatched else out


# The whole-sequence forms --------------------------------------------------------------
_GATES = {"rnn_tanh": 1, "rnn_relu": 1, "lstm": 4, "gru": 3}


def _stacked(mode: str, x, batch_sizes, hx, params, has_biases, num_layers, dropout,
             train, bidirectional):
    """The layers over ``x`` (L, N, F) or packed rows; returns (output, h_n, c_n)."""
    op = mode
    if not isinstance(params, (list, tuple)) or not all(isinstance(p, Tensor)
                                                         for p in params):
        raise EmberTypeError(f"{op}: params must be a list of weight tensors (as "
                             f"module._flat_weights), got {type(params).__name__}")
    num_layers = int(num_layers)
    directions = 2 if bidirectional else 1
    h0, c0 = hx if mode == "lstm" else (hx, None)
    for what, t in (("hx[0]" if mode == "lstm" else "hx", h0), ("hx[1]", c0)):
        if what == "hx[1]" and mode != "lstm":
            continue
        _check_tensor(op, what, t)
        if t.ndim != 3 or t.shape[0] != num_layers * directions:
            raise ShapeError(f"{op}: expected {what} of shape (num_layers * num_directions"
                             f" = {num_layers * directions}, batch, hidden), got "
                             f"{tuple(t.shape)}")
    projected = mode == "lstm" and h0.shape[2] != c0.shape[2]
    per = (4 if has_biases else 2) + (1 if projected else 0)
    if len(params) != per * num_layers * directions:
        raise ShapeError(f"{op}: expected {per * num_layers * directions} weights "
                         f"({per} per layer and direction for num_layers={num_layers}, "
                         f"bidirectional={bool(bidirectional)}, has_biases="
                         f"{bool(has_biases)}), got {len(params)}")
    hidden = c0.shape[2] if mode == "lstm" else h0.shape[2]
    gate_size = _GATES[mode] * hidden
    batch = x.shape[1] if batch_sizes is None else batch_sizes[0]
    h_n, c_n, layer_input = [], [], x
    for layer in range(num_layers):
        outputs = []
        for direction in range(directions):
            index = layer * directions + direction
            weights = params[index * per:(index + 1) * per]
            if (weights[0].ndim != 2 or weights[0].shape[0] != gate_size
                    or weights[0].shape[1] != layer_input.shape[-1]):
                raise ShapeError(f"{op}: layer {layer}'s weight_ih has shape "
                                 f"{tuple(weights[0].shape)}; expected ({gate_size}, "
                                 f"{layer_input.shape[-1]}) for input of shape "
                                 f"{tuple(layer_input.shape)}")
            h_i = h0[index]
            if h_i.shape[0] != batch:
                raise ShapeError(f"{op}: hx has batch size {h_i.shape[0]} but the input's "
                                 f"is {batch}")
            out, h, c = run_direction(mode.upper(), layer_input, weights, has_biases, h_i,
                                   None if c0 is None else c0[index], direction == 1,
                                   batch_sizes)
            outputs.append(out)
            h_n.append(h)
            c_n.append(c)
        layer_input = outputs[0] if directions == 1 else _shape.cat(outputs, -1)
        if dropout and train and layer < num_layers - 1:
            layer_input = F.dropout(layer_input, float(dropout), True)
    return layer_input, _shape.stack(h_n), (_shape.stack(c_n) if mode == "lstm" else None)


def _sequence_op(mode: str, args: tuple, kwargs: dict):
    """Dispatches torch's two overloads: (input, hx, params, has_biases, num_layers,
    dropout, train, bidirectional, batch_first) and the packed (data, batch_sizes, hx,
    params, has_biases, num_layers, dropout, train, bidirectional)."""
    op = mode
    names = ["input", "hx", "params", "has_biases", "num_layers", "dropout", "train",
             "bidirectional", "batch_first"]
    packed_names = ["data", "batch_sizes", "hx", "params", "has_biases", "num_layers",
                    "dropout", "train", "bidirectional"]
    second = args[1] if len(args) > 1 else kwargs.get("hx", kwargs.get("batch_sizes"))
    third = args[2] if len(args) > 2 else kwargs.get("params", kwargs.get("hx"))
    if "batch_sizes" in kwargs:
        packed = True
    elif mode == "lstm":
        packed = isinstance(second, Tensor)
    else:
        packed = isinstance(second, Tensor) and isinstance(third, Tensor)
    use = packed_names if packed else names
    if len(args) > len(use):
        raise EmberTypeError(f"{op}: takes {len(use)} arguments, got {len(args)}")
    bound = dict(zip(use, args))
    for key, value in kwargs.items():
        if key not in use or key in bound:
            raise EmberTypeError(f"{op}: unexpected or repeated argument {key!r}; the "
                                 f"arguments are ({', '.join(use)})")
        bound[key] = value
    missing = [n for n in use if n not in bound]
    if missing:
        raise EmberTypeError(f"{op}: missing arguments {missing}; the arguments are "
                             f"({', '.join(use)})")
    hx = bound["hx"]
    if mode == "lstm":
        if not (isinstance(hx, (tuple, list)) and len(hx) == 2):
            raise EmberTypeError(f"{op}: hx must be a pair (h_0, c_0) of tensors, got "
                                 f"{type(hx).__name__}")
    rest = (bound["params"], bool(bound["has_biases"]), bound["num_layers"],
            float(bound["dropout"]), bool(bound["train"]), bool(bound["bidirectional"]))
    if packed:
        data = bound["data"]
        _check_tensor(op, "data", data)
        _check_tensor(op, "batch_sizes", bound["batch_sizes"])
        sizes = [int(n) for n in bound["batch_sizes"].tolist()]
        if data.ndim != 2 or not sizes or sum(sizes) != data.shape[0]:
            raise ShapeError(f"{op}: the packed batch sizes {sizes} do not describe data "
                             f"of shape {tuple(data.shape)} (expected 2-D data with "
                             f"sum(batch_sizes) rows)")
        out, h, c = _stacked(mode, data, sizes, hx, *rest)
    else:
        x = bound["input"]
        _check_tensor(op, "input", x)
        if x.ndim != 3:
            raise ShapeError(f"{op}: expected a 3-D input (seq_len, batch, features), or "
                             f"(batch, seq_len, features) with batch_first, got shape "
                             f"{tuple(x.shape)}")
        batch_first = bool(bound["batch_first"])
        if batch_first:
            x = x.transpose(0, 1)
        if x.shape[0] == 0:
            raise ShapeError(f"{op}: expected sequence length to be larger than 0 (input "
                             f"of shape {tuple(bound['input'].shape)})")
        out, h, c = _stacked(mode, x, None, hx, *rest)
        if batch_first:
            out = out.transpose(0, 1)
    return (out, h, c) if mode == "lstm" else (out, h)


def lstm(*args, **kwargs) -> tuple:
    """A multi-layer LSTM over a whole sequence, as ``torch.lstm``; returns
    ``(output, h_n, c_n)``. Two forms, like PyTorch's:

    - ``lstm(input, hx, params, has_biases, num_layers, dropout, train, bidirectional,
      batch_first)``: ``input`` (L, N, H_in), or (N, L, H_in) with ``batch_first``;
    - ``lstm(data, batch_sizes, hx, params, has_biases, num_layers, dropout, train,
      bidirectional)``: the fields of a sorted
      :class:`~ember.nn.utils.rnn.PackedSequence`; ``output`` is packed data too.

    ``hx`` is ``(h_0, c_0)``, each (num_layers * num_directions, N, hidden) (``h_0`` is
    proj_size wide when the weights include ``weight_hr``); ``params`` is the flat weight
    list of ``nn.LSTM`` (``module._flat_weights``: per layer and direction ``w_ih, w_hh``,
    then ``b_ih, b_hh`` if ``has_biases``, then ``w_hr`` if projected). ``dropout`` is
    applied to each layer's output but the last when ``train``.

    >>> m = ember.nn.LSTM(3, 4, num_layers=2)
    >>> h0 = ember.zeros(2, 5, 4)
    >>> out, h, c = ember.lstm(ember.randn(7, 5, 3), (h0, h0), m._flat_weights, True, 2,
    ...                        0.0, False, False, False)
    >>> out.shape
    ember.Size([7, 5, 4])
    """
    return _sequence_op("lstm", args, kwargs)


def gru(*args, **kwargs) -> tuple:
    """A multi-layer GRU over a whole sequence, as ``torch.gru``; returns
    ``(output, h_n)``. The forms ``gru(input, hx, params, has_biases, num_layers,
    dropout, train, bidirectional, batch_first)`` and the packed ``gru(data, batch_sizes,
    hx, params, has_biases, num_layers, dropout, train, bidirectional)``; ``hx`` is
    (num_layers * num_directions, N, hidden), the rest as in :func:`lstm`.

    >>> m = ember.nn.GRU(3, 4)
    >>> out, h = ember.gru(ember.randn(7, 5, 3), ember.zeros(1, 5, 4), m._flat_weights,
    ...                    True, 1, 0.0, False, False, False)
    >>> h.shape
    ember.Size([1, 5, 4])
    """
    return _sequence_op("gru", args, kwargs)


def rnn_tanh(*args, **kwargs) -> tuple:
    """A multi-layer tanh Elman RNN over a whole sequence, as ``torch.rnn_tanh``;
    returns ``(output, h_n)``; the arguments and forms are those of :func:`gru`.

    >>> m = ember.nn.RNN(3, 4)
    >>> out, h = ember.rnn_tanh(ember.randn(7, 5, 3), ember.zeros(1, 5, 4),
    ...                         m._flat_weights, True, 1, 0.0, False, False, False)
    >>> out.shape
    ember.Size([7, 5, 4])
    """
    return _sequence_op("rnn_tanh", args, kwargs)


def rnn_relu(*args, **kwargs) -> tuple:
    """A multi-layer ReLU Elman RNN over a whole sequence, as ``torch.rnn_relu``;
    returns ``(output, h_n)``; the arguments and forms are those of :func:`gru`.

    >>> m = ember.nn.RNN(3, 4, nonlinearity="relu")
    >>> out, h = ember.rnn_relu(ember.randn(7, 5, 3), ember.zeros(1, 5, 4),
    ...                         m._flat_weights, True, 1, 0.0, False, False, False)
    >>> h.shape
    ember.Size([1, 5, 4])
    """
    return _sequence_op("rnn_relu", args, kwargs)

