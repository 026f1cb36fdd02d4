"""Recurrent layers: RNN, LSTM and GRU, with PyTorch's parameter names (``weight_ih_l0``,
``bias_hh_l1_reverse``, ``weight_hr_l0``), shapes and defaults. The single-step cells
(RNNCell, LSTMCell, GRUCell) live in ``rnn_cells`` and are exported from here too.

The time loop runs in Python, but each step is a handful of ops: the input's contribution
to every gate, for every time step, is one matmul before the loop; a step adds one
``h @ W_hh.T`` and slices the gates out of it.

The layers also take a :class:`~ember.nn.utils.rnn.PackedSequence`: then step ``t`` runs
only the ``batch_sizes[t]`` sequences still going, so each sequence's final state is the
one after its own last step, and the reverse direction starts at each sequence's end.
"""
from __future__ import annotations

import math
import numbers
import warnings

from ... import ops
from ...autograd import Function
from ...errors import EmberTypeError, ShapeError
from ...tensor import Tensor
from .. import functional as F
from .. import init
from ..module import Module
from ..parameter import Parameter
from ..utils.rnn import PackedSequence, _split_rows
from .rnn_cells import (GRUCell, LSTMCell, RNNCell, RNNCellBase, _check_dtype, _gru_step,
                        _lstm_step, _rnn_step)

__all__ = ["RNNBase", "RNN", "LSTM", "GRU", "RNNCellBase", "RNNCell", "LSTMCell", "GRUCell"]

_GATES = {"RNN_TANH": 1, "RNN_RELU": 1, "LSTM": 4, "GRU": 3}


class _TimeSteps(Function):
    """The time steps ``seq[0], seq[1], ...`` of a (L, N, G) tensor as one graph node.

    Indexing ``seq[t]`` step by step would make each step's backward a zero tensor of the
    whole sequence's size (quadratic in L); here the backward is a single stack."""

    @staticmethod
    def forward(ctx, seq):
        return tuple(seq.unbind(0))

    @staticmethod
    def backward(ctx, *grads):
        return ops.shape.stack(grads)


def _time_steps(seq: Tensor, batch_sizes=None) -> tuple:
    """The steps of a (L, N, G) sequence, or of packed (rows, G) data."""
    if batch_sizes is not None:
        return _split_rows(seq, batch_sizes)
    if seq.shape[0] == 1:
        return (seq[0],)
    return _TimeSteps.apply(seq)


def _run_packed(step, xs, batch_sizes: list, h0, c0, reverse: bool):
    """The time loop over packed steps ``xs``: step ``t`` advances the first
    ``batch_sizes[t]`` sequences of the sorted batch, whose states start as ``h0`` and
    ``c0`` (``c0`` None but for LSTM). Returns (packed output, h_n, c_n)."""
    def rows(state, start, stop):
        return None if state is None else state[start:stop]

    out = [None] * len(xs)
    if reverse:  # the shortest sequences start first; longer ones join from their end
        h, c = rows(h0, 0, batch_sizes[-1]), rows(c0, 0, batch_sizes[-1])
        for t in range(len(xs) - 1, -1, -1):
            running = h.shape[0]
            if batch_sizes[t] > running:
                h = ops.shape.cat([h, rows(h0, running, batch_sizes[t])])
                if c is not None:
                    c = ops.shape.cat([c, rows(c0, running, batch_sizes[t])])
            h, c = step(xs[t], h, c)
            out[t] = h
        return ops.shape.cat(out), h, c
    h, c, done_h, done_c = h0, c0, [], []
    for t, xw in enumerate(xs):
        if batch_sizes[t] < h.shape[0]:  # the sequences past batch_sizes[t] have ended
            done_h.append(rows(h, batch_sizes[t], None))
            done_c.append(rows(c, batch_sizes[t], None))
            h, c = rows(h, 0, batch_sizes[t]), rows(c, 0, batch_sizes[t])
        h, c = step(xw, h, c)
        out[t] = h
    h_n = ops.shape.cat([h] + done_h[::-1]) if done_h else h
    c_n = ops.shape.cat([c] + done_c[::-1]) if done_c and c is not None else c
    return ops.shape.cat(out), h_n, c_n


def run_direction(mode: str, x, weights, has_biases: bool, h, c, reverse: bool,
                  batch_sizes=None):
    """One layer of an RNN (``mode``: "RNN_TANH", "RNN_RELU", "LSTM" or "GRU") in one
    direction over the whole sequence ``x`` (L, N, features), or over packed data (rows,
    features) with ``batch_sizes``: (output, h, c). ``weights``: w_ih, w_hh[, b_ih,
    b_hh][, w_hr] (an LSTM's projection last). Shared by the layers and the functional
    forms (``ember.lstm`` and the like)."""
    if has_biases:
        w_ih, w_hh, b_ih, b_hh = weights[:4]
    else:
        (w_ih, w_hh), b_ih, b_hh = weights[:2], None, None
    w_hh_t, hidden = w_hh.t(), w_hh.shape[0] // _GATES[mode]  # w_hh is (G*H, proj)
    if mode == "GRU":
        # b_hh cannot join the input's share: the n gate scales it by r
        xw = F.linear(x, w_ih, b_ih)
        xs = list(zip(_time_steps(xw[..., :2 * hidden], batch_sizes),
                      _time_steps(xw[..., 2 * hidden:], batch_sizes)))

        def step(xw, h, c):
            return _gru_step(xw[0], xw[1], h, w_hh_t, b_hh, hidden), None
    else:
        xs = _time_steps(F.linear(x, w_ih, None if b_ih is None else b_ih + b_hh),
                         batch_sizes)
        if mode == "LSTM":
            w_hr_t = weights[-1].t() if len(weights) == (5 if has_biases else 3) else None

            def step(xw, h, c):
                return _lstm_step(xw, h, c, w_hh_t, None, w_hr_t, hidden)
        else:
            relu = mode == "RNN_RELU"

            def step(xw, h, c):
                return _rnn_step(xw, h, w_hh_t, None, relu), None
    if batch_sizes is not None:
        return _run_packed(step, xs, batch_sizes, h, c, reverse)
    out = [None] * len(xs)
    for t in range(len(xs) - 1, -1, -1) if reverse else range(len(xs)):
        h, c = step(xs[t], h, c)
        out[t] = h
    return ops.shape.stack(out), h, c


def _host_indices(sorted_indices, unsorted_indices, device) -> tuple:
    """Fresh copies of a PackedSequence's orders to index the states with. Under ember.jit
    a tensor an op reads becomes a traced value; the packed output hands on the
    originals, whose values pad_packed_sequence must still be able to read."""
    order = sorted_indices.tolist()
    unorder = [0] * len(order) if unsorted_indices is None else unsorted_indices.tolist()
    if unsorted_indices is None:
        for i, o in enumerate(order):
            unorder[o] = i
    return tuple(ops.creation.tensor(o, dtype=sorted_indices.dtype, device=device)
                 for o in (order, unorder))


class RNNBase(Module):
    """The shared machinery of :class:`RNN`, :class:`LSTM` and :class:`GRU`.

    ``mode`` is ``"RNN_TANH"``, ``"RNN_RELU"``, ``"LSTM"`` or ``"GRU"``; the other
    arguments are those of the subclasses.
    """

    def __init__(self, mode: str, input_size: int, hidden_size: int, num_layers: int = 1,
                 bias: bool = True, batch_first: bool = False, dropout: float = 0.0,
                 bidirectional: bool = False, proj_size: int = 0, device=None,
                 dtype=None) -> None:
        super().__init__()
        if mode not in _GATES:
            raise ValueError(f"Unrecognized RNN mode: {mode!r}; expected one of "
                             f"{', '.join(_GATES)}")
        if not isinstance(dropout, numbers.Number) or not 0 <= dropout <= 1:
            raise ValueError("dropout should be a number in range [0, 1] representing the "
                             "probability of an element being zeroed")
        if dropout > 0 and num_layers == 1:
            warnings.warn("dropout option adds dropout after all but last recurrent layer, so "
                          "non-zero dropout expects num_layers greater than 1, but got "
                          f"dropout={dropout} and num_layers={num_layers}", stacklevel=3)
        for arg, value in (("input_size", input_size), ("hidden_size", hidden_size),
                           ("num_layers", num_layers), ("proj_size", proj_size)):
            if not isinstance(value, numbers.Integral) or isinstance(value, bool):
                raise EmberTypeError(f"{arg} should be of type int, got: "
                                     f"{type(value).__name__}")
        if hidden_size <= 0:
            raise ValueError("hidden_size must be greater than zero")
        if num_layers <= 0:
            raise ValueError("num_layers must be greater than zero")
        if proj_size < 0:
            raise ValueError("proj_size should be a positive integer or zero to disable "
                             "projections")
        if proj_size >= hidden_size:
            raise ValueError("proj_size has to be smaller than hidden_size")
        if proj_size and mode != "LSTM":
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")

        self.mode = mode
        self.input_size = int(input_size)
        self.hidden_size = int(hidden_size)
        self.num_layers = int(num_layers)
        self.bias = bool(bias)
        self.batch_first = bool(batch_first)
        self.dropout = float(dropout)
        self.bidirectional = bool(bidirectional)
        self.proj_size = int(proj_size)

        directions = 2 if bidirectional else 1
        gate_size = _GATES[mode] * hidden_size
        real_hidden = proj_size or hidden_size
        self._flat_weights_names: list[str] = []
        self._all_weights: list[list[str]] = []
        for layer in range(num_layers):
            for direction in range(directions):
                layer_input = input_size if layer == 0 else real_hidden * directions
                shapes = [("weight_ih", (gate_size, layer_input)),
                          ("weight_hh", (gate_size, real_hidden))]
                if bias:
                    shapes += [("bias_ih", (gate_size,)), ("bias_hh", (gate_size,))]
                if proj_size:
                    shapes.append(("weight_hr", (proj_size, hidden_size)))
                suffix = "_reverse" if direction == 1 else ""
                names = []
                for kind, shape in shapes:
                    name = f"{kind}_l{layer}{suffix}"
                    setattr(self, name, Parameter(ops.creation.empty(shape, dtype=dtype,
                                                                     device=device)))
                    names.append(name)
                self._flat_weights_names.extend(names)
                self._all_weights.append(names)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Every weight and bias from U(-1/sqrt(hidden_size), 1/sqrt(hidden_size))."""
        bound = 1.0 / math.sqrt(self.hidden_size)
        for weight in self.parameters():
            init.uniform_(weight, -bound, bound)

    def flatten_parameters(self) -> None:
        """Kept for PyTorch scripts (it packs weights for cuDNN there); ember reads the
        parameters in place, so there is nothing to do."""

    @property
    def _flat_weights(self) -> list:
        return [getattr(self, name) for name in self._flat_weights_names]

    @property
    def all_weights(self) -> list:
        """The parameters, one list per layer and direction."""
        return [[getattr(self, name) for name in names] for names in self._all_weights]

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        if self.proj_size:
            s += f", proj_size={self.proj_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if not self.bias:
            s += ", bias=False"
        if self.batch_first:
            s += ", batch_first=True"
        if self.dropout:
            s += f", dropout={self.dropout}"
        if self.bidirectional:
            s += ", bidirectional=True"
        return s

    # Forward ---------------------------------------------------------------------------
    def _validate_input(self, input) -> bool:
        name = type(self).__name__
        if not isinstance(input, Tensor):
            raise EmberTypeError(f"{name}: expected input to be a Tensor, got "
                                 f"{type(input).__name__}")
        if input.ndim not in (2, 3):
            raise ShapeError(f"{name}: Expected input to be 2-D (unbatched) or 3-D, got "
                             f"{input.ndim}-D instead (input of shape {tuple(input.shape)})")
        if input.shape[-1] != self.input_size:
            raise ShapeError(f"{name}: input.size(-1) must be equal to input_size. Expected "
                             f"{self.input_size}, got {input.shape[-1]} (input of shape "
                             f"{tuple(input.shape)})")
        _check_dtype(name, "input", input, self.weight_ih_l0.dtype)
        seq_dim = 1 if self.batch_first and input.ndim == 3 else 0
        if input.shape[seq_dim] == 0:
            raise ShapeError(f"{name}: Expected sequence length to be larger than 0 in RNN "
                             f"(input of shape {tuple(input.shape)})")
        return input.ndim == 3

    def _validate_packed(self, data, batch_sizes) -> list:
        """Checks a PackedSequence's data; returns its batch sizes as ints."""
        name = type(self).__name__
        if not isinstance(data, Tensor):
            raise EmberTypeError(f"{name}: expected the packed data to be a Tensor, got "
                                 f"{type(data).__name__}")
        if data.ndim != 2:
            raise ShapeError(f"{name}: input must have 2 dimensions, got {data.ndim} (packed "
                             f"data of shape {tuple(data.shape)})")
        if data.shape[-1] != self.input_size:
            raise ShapeError(f"{name}: input.size(-1) must be equal to input_size. Expected "
                             f"{self.input_size}, got {data.shape[-1]} (packed data of shape "
                             f"{tuple(data.shape)})")
        _check_dtype(name, "input", data, self.weight_ih_l0.dtype)
        sizes = [int(n) for n in batch_sizes.tolist()]
        if not sizes or sum(sizes) != data.shape[0]:
            raise ShapeError(f"{name}: the packed batch sizes {sizes} do not describe data of "
                             f"shape {tuple(data.shape)}")
        return sizes

    def _initial_state(self, what: str, state, batched: bool, batch: int, size: int):
        """``state`` (or zeros) as a (layers * directions, batch, size) tensor."""
        name = type(self).__name__
        layers = self.num_layers * (2 if self.bidirectional else 1)
        dtype, device = self.weight_ih_l0.dtype, self.weight_ih_l0.device
        if state is None:
            return ops.creation.zeros((layers, batch, size), dtype=dtype, device=device)
        if not isinstance(state, Tensor):
            raise EmberTypeError(f"{name}: expected {what} to be a Tensor, got "
                                 f"{type(state).__name__}")
        want_rank = 3 if batched else 2
        if state.ndim != want_rank:
            kind = "batched 3-D" if batched else "unbatched 2-D"
            raise ShapeError(f"{name}: For {kind} input, {what} should also be "
                             f"{want_rank}-D but got {state.ndim}-D tensor (shape "
                             f"{tuple(state.shape)})")
        expected = (layers, batch, size) if batched else (layers, size)
        if tuple(state.shape) != expected:
            raise ShapeError(f"{name}: Expected {what} size {expected}, got "
                             f"{tuple(state.shape)}")
        _check_dtype(name, what, state, dtype)
        return state if batched else state.unsqueeze(1)

    def forward(self, input, hx=None):
        """Run the layers over ``input`` (L, N, H_in), (N, L, H_in) with ``batch_first``,
        unbatched (L, H_in), or a :class:`~ember.nn.utils.rnn.PackedSequence`; returns
        ``(output, h_n)`` (``(output, (h_n, c_n))`` for LSTM), ``output`` packed like
        the input when it is packed, and the states in the original batch order."""
        sorted_indices = batch_sizes = None
        if isinstance(input, PackedSequence):
            x, _, sorted_indices, unsorted_indices = input
            batch_sizes = self._validate_packed(x, input.batch_sizes)
            batched, batch = True, batch_sizes[0]
        else:
            batched = self._validate_input(input)
            if not batched:
                x = input.unsqueeze(1)
            else:
                x = input.transpose(0, 1) if self.batch_first else input
            batch = x.shape[1]
        real_hidden = self.proj_size or self.hidden_size
        is_lstm = self.mode == "LSTM"
        if is_lstm:
            if hx is None:
                hx = (None, None)
            elif not (isinstance(hx, (tuple, list)) and len(hx) == 2):
                raise EmberTypeError(f"LSTM: hx must be a tuple (h_0, c_0) of tensors, got "
                                     f"{type(hx).__name__}")
            h0 = self._initial_state("hidden[0]", hx[0], batched, batch, real_hidden)
            c0 = self._initial_state("hidden[1]", hx[1], batched, batch, self.hidden_size)
        else:
            h0 = self._initial_state("hidden", hx, batched, batch, self.hidden_size)
            c0 = None
        if sorted_indices is not None:  # the given states follow the original order
            order, unorder = _host_indices(sorted_indices, unsorted_indices, h0.device)
            h0 = ops.selection.index_select(h0, 1, order)
            c0 = None if c0 is None else ops.selection.index_select(c0, 1, order)

        directions = 2 if self.bidirectional else 1
        h_n, c_n = [], []
        layer_input = x
        all_weights = self.all_weights
        for layer in range(self.num_layers):
            outputs = []
            for direction in range(directions):
                index = layer * directions + direction
                weights = all_weights[index]
                out, h, c = self._run_direction(layer_input, weights, h0[index],
                                                None if c0 is None else c0[index],
                                                direction == 1, batch_sizes)
                outputs.append(out)
                h_n.append(h)
                c_n.append(c)
            layer_input = outputs[0] if directions == 1 else ops.shape.cat(outputs, -1)
            if self.dropout and self.training and layer < self.num_layers - 1:
                layer_input = F.dropout(layer_input, self.dropout, True)

        output = layer_input
        h_n = ops.shape.stack(h_n)
        c_n = ops.shape.stack(c_n) if is_lstm else None
        if batch_sizes is not None:
            if sorted_indices is not None:
                h_n = ops.selection.index_select(h_n, 1, unorder)
                c_n = ops.selection.index_select(c_n, 1, unorder) if is_lstm else None
            output = PackedSequence(output, input.batch_sizes, sorted_indices,
                                    unsorted_indices)
        elif not batched:
            output = output.squeeze(1)
            h_n = h_n.squeeze(1)
            c_n = c_n.squeeze(1) if is_lstm else None
        elif self.batch_first:
            output = output.transpose(0, 1)
        return (output, (h_n, c_n)) if is_lstm else (output, h_n)

    def _run_direction(self, x, weights, h, c, reverse: bool, batch_sizes=None):
        return run_direction(self.mode, x, weights, self.bias, h, c, reverse, batch_sizes)


class RNN(RNNBase):
    r"""A multi-layer Elman RNN: :math:`h_t = \tanh(x_t W_{ih}^T + b_{ih} + h_{t-1}
    W_{hh}^T + b_{hh})` (or ReLU), per layer and direction.

    Args:
        input_size: features of the input ``x``.
        hidden_size: features of the hidden state ``h``.
        num_layers: stacked layers, each reading the previous one's output. Default: 1.
        nonlinearity: ``'tanh'`` or ``'relu'``. Default: ``'tanh'``.
        bias: use ``bias_ih`` and ``bias_hh``. Default: True.
        batch_first: input and output are (N, L, H) instead of (L, N, H). Default: False.
        dropout: dropout on each layer's output but the last, in training. Default: 0.
        bidirectional: also run each layer backwards in time. Default: False.

    Shapes: input (L, N, H_in), (N, L, H_in) or unbatched (L, H_in); ``hx``
    (D * num_layers, N, H_out); output (L, N, D * H_out), ``h_n`` like ``hx``. The input
    may also be a :class:`~ember.nn.utils.rnn.PackedSequence` (``batch_first`` does not
    apply): the output is then packed the same way, and ``h_n`` holds each sequence's
    state after its own last step, in the original batch order.

    >>> rnn = ember.nn.RNN(10, 20, 2)
    >>> output, h_n = rnn(ember.randn(5, 3, 10))
    >>> output.shape, h_n.shape
    (ember.Size([5, 3, 20]), ember.Size([2, 3, 20]))
    """

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1,
                 nonlinearity: str = "tanh", bias: bool = True, batch_first: bool = False,
                 dropout: float = 0.0, bidirectional: bool = False, device=None,
                 dtype=None) -> None:
        if nonlinearity == "tanh":
            mode = "RNN_TANH"
        elif nonlinearity == "relu":
            mode = "RNN_RELU"
        else:
            raise ValueError(f"Unknown nonlinearity '{nonlinearity}'. Select from 'tanh' or "
                             "'relu'.")
        super().__init__(mode, input_size, hidden_size, num_layers, bias, batch_first,
                         dropout, bidirectional, 0, device, dtype)
        self.nonlinearity = nonlinearity


class LSTM(RNNBase):
    r"""A multi-layer long short-term memory RNN, gates in PyTorch's order (i, f, g, o):
    :math:`c_t = f \odot c_{t-1} + i \odot g`, :math:`h_t = o \odot \tanh(c_t)`
    (then :math:`h_t W_{hr}^T` when ``proj_size > 0``).

    Args are those of :class:`RNN` (no ``nonlinearity``) plus ``proj_size``: project
    ``h`` to this many features (``weight_hr_l{k}``). Default: 0 (no projection).

    Shapes: ``hx`` is ``(h_0, c_0)`` with ``h_0`` (D * num_layers, N, H_out) and ``c_0``
    (D * num_layers, N, hidden_size); returns ``(output, (h_n, c_n))``.

    >>> lstm = ember.nn.LSTM(10, 20, batch_first=True)
    >>> output, (h_n, c_n) = lstm(ember.randn(3, 5, 10))
    >>> output.shape
    ember.Size([3, 5, 20])
    """

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1,
                 bias: bool = True, batch_first: bool = False, dropout: float = 0.0,
                 bidirectional: bool = False, proj_size: int = 0, device=None,
                 dtype=None) -> None:
        super().__init__("LSTM", input_size, hidden_size, num_layers, bias, batch_first,
                         dropout, bidirectional, proj_size, device, dtype)


class GRU(RNNBase):
    r"""A multi-layer gated recurrent unit RNN, gates in PyTorch's order (r, z, n):
    :math:`n = \tanh(W_{in} x + b_{in} + r \odot (W_{hn} h + b_{hn}))`,
    :math:`h_t = (1 - z) \odot n + z \odot h_{t-1}`.

    Args and shapes are those of :class:`RNN` (no ``nonlinearity``).

    >>> gru = ember.nn.GRU(10, 20, bidirectional=True)
    >>> output, h_n = gru(ember.randn(5, 3, 10))
    >>> output.shape, h_n.shape
    (ember.Size([5, 3, 40]), ember.Size([2, 3, 20]))
    """

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1,
                 bias: bool = True, batch_first: bool = False, dropout: float = 0.0,
                 bidirectional: bool = False, device=None, dtype=None) -> None:
        super().__init__("GRU", input_size, hidden_size, num_layers, bias, batch_first,
                         dropout, bidirectional, 0, device, dtype)
