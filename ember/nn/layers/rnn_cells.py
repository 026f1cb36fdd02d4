"""The single-step recurrent cells RNNCell, LSTMCell and GRUCell, and the one-step
updates they share with the multi-layer RNN, LSTM and GRU (``ember.nn.layers.rnn``),
with PyTorch's parameter names, shapes and defaults.
"""
from __future__ import annotations

import math

from ... import ops
from ...errors import EmberTypeError, ShapeError
from ...tensor import Tensor
from .. import functional as F
from .. import init
from ..module import Module
from ..parameter import Parameter

__all__ = ["RNNCellBase", "RNNCell", "LSTMCell", "GRUCell"]


# One step of each cell. ``xw`` is the input's share of the gates (bias included where it
# can be); ``w_hh_t`` the transposed hidden-to-hidden weight.
def _rnn_step(xw, h, w_hh_t, b_hh, relu: bool):
    pre = xw + h.mm(w_hh_t)
    if b_hh is not None:
        pre = pre + b_hh
    return pre.relu() if relu else pre.tanh()


def _lstm_step(xw, h, c, w_hh_t, b_hh, w_hr_t, hidden: int):
    gates = xw + h.mm(w_hh_t)
    if b_hh is not None:
        gates = gates + b_hh
    s = gates.sigmoid()  # i, f and o; the g slice of it goes unused
    c = s[:, hidden:2 * hidden] * c + s[:, :hidden] * gates[:, 2 * hidden:3 * hidden].tanh()
    h = s[:, 3 * hidden:] * c.tanh()
    if w_hr_t is not None:
        h = h.mm(w_hr_t)
    return h, c


def _gru_step(xw_rz, xw_n, h, w_hh_t, b_hh, hidden: int):
    hw = h.mm(w_hh_t)
    if b_hh is not None:
        hw = hw + b_hh
    rz = (xw_rz + hw[:, :2 * hidden]).sigmoid()
    n = (xw_n + rz[:, :hidden] * hw[:, 2 * hidden:]).tanh()
    return n + rz[:, hidden:] * (h - n)


def _check_dtype(name: str, what: str, t: Tensor, want) -> None:
    if t.dtype != want:
        raise EmberTypeError(f"{name}: {what} has dtype {t.dtype.name} but the layer's "
                             f"parameters are {want.name}; convert one of them with .to()")


class RNNCellBase(Module):
    """The shared parameters of the cells: ``weight_ih`` (gates * hidden, input),
    ``weight_hh`` (gates * hidden, hidden), ``bias_ih`` and ``bias_hh``."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool, num_chunks: int,
                 device=None, dtype=None) -> None:
        super().__init__()
        if hidden_size <= 0:
            raise ValueError("hidden_size must be greater than zero")
        self.input_size = int(input_size)
        self.hidden_size = int(hidden_size)
        self.bias = bool(bias)
        gates = num_chunks * hidden_size
        self.weight_ih = Parameter(ops.creation.empty((gates, input_size), dtype=dtype,
                                                      device=device))
        self.weight_hh = Parameter(ops.creation.empty((gates, hidden_size), dtype=dtype,
                                                      device=device))
        if bias:
            self.bias_ih = Parameter(ops.creation.empty(gates, dtype=dtype, device=device))
            self.bias_hh = Parameter(ops.creation.empty(gates, dtype=dtype, device=device))
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Every weight and bias from U(-1/sqrt(hidden_size), 1/sqrt(hidden_size))."""
        bound = 1.0 / math.sqrt(self.hidden_size)
        for weight in self.parameters():
            init.uniform_(weight, -bound, bound)

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        if not self.bias:
            s += ", bias=False"
        nonlinearity = getattr(self, "nonlinearity", "tanh")
        if nonlinearity != "tanh":
            s += f", nonlinearity={nonlinearity}"
        return s

    def _validate_input(self, input) -> bool:
        name = type(self).__name__
        if not isinstance(input, Tensor):
            raise EmberTypeError(f"{name}: expected input to be a Tensor, got "
                                 f"{type(input).__name__}")
        if input.ndim not in (1, 2):
            raise ShapeError(f"{name}: Expected input to be 1-D (unbatched) or 2-D, got "
                             f"{input.ndim}-D instead (input of shape {tuple(input.shape)})")
        if input.shape[-1] != self.input_size:
            raise ShapeError(f"{name}: input has inconsistent input_size: got "
                             f"{input.shape[-1]} expected {self.input_size} (input of shape "
                             f"{tuple(input.shape)})")
        _check_dtype(name, "input", input, self.weight_ih.dtype)
        return input.ndim == 2

    def _initial_state(self, what: str, state, input: Tensor):
        """``state`` (or zeros) as a (N, hidden_size) tensor."""
        name = type(self).__name__
        batched = input.ndim == 2
        batch = input.shape[0] if batched else 1
        if state is None:
            return ops.creation.zeros((batch, self.hidden_size), dtype=input.dtype,
                                      device=input.device)
        if not isinstance(state, Tensor):
            raise EmberTypeError(f"{name}: expected {what} to be a Tensor, got "
                                 f"{type(state).__name__}")
        if state.ndim != input.ndim:
            raise ShapeError(f"{name}: {what} must be {input.ndim}-D like the input, got "
                             f"shape {tuple(state.shape)} for input of shape "
                             f"{tuple(input.shape)}")
        if batched and state.shape[0] != batch:
            raise ShapeError(f"{name}: Input batch size {batch} doesn't match {what} batch "
                             f"size {state.shape[0]}")
        if state.shape[-1] != self.hidden_size:
            raise ShapeError(f"{name}: {what} has inconsistent hidden_size: got "
                             f"{state.shape[-1]}, expected {self.hidden_size}")
        _check_dtype(name, what, state, self.weight_ih.dtype)
        return state if batched else state.unsqueeze(0)


class RNNCell(RNNCellBase):
    r"""One step of an Elman RNN: :math:`h' = \tanh(x W_{ih}^T + b_{ih} + h W_{hh}^T +
    b_{hh})` (or ReLU).

    Shapes: input (N, input_size) or (input_size); ``hx`` (N, hidden_size) or
    (hidden_size), zeros when omitted; returns ``h'`` of ``hx``'s shape.

    >>> cell = ember.nn.RNNCell(10, 20)
    >>> cell(ember.randn(3, 10)).shape
    ember.Size([3, 20])
    """

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True,
                 nonlinearity: str = "tanh", device=None, dtype=None) -> None:
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"Unknown nonlinearity: {nonlinearity}")
        super().__init__(input_size, hidden_size, bias, 1, device, dtype)
        self.nonlinearity = nonlinearity

    def forward(self, input: Tensor, hx: Tensor | None = None) -> Tensor:
        batched = self._validate_input(input)
        h = self._initial_state("hx", hx, input)
        x = input if batched else input.unsqueeze(0)
        h = _rnn_step(F.linear(x, self.weight_ih, self.bias_ih), h, self.weight_hh.t(),
                      self.bias_hh, self.nonlinearity == "relu")
        return h if batched else h.squeeze(0)


class LSTMCell(RNNCellBase):
    r"""One step of an LSTM (gates i, f, g, o); returns ``(h', c')``.

    Shapes: input (N, input_size) or (input_size); ``hx`` is ``(h, c)``, each
    (N, hidden_size) or (hidden_size), zeros when omitted.

    >>> cell = ember.nn.LSTMCell(10, 20)
    >>> h, c = cell(ember.randn(3, 10))
    >>> h.shape
    ember.Size([3, 20])
    """

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, device=None,
                 dtype=None) -> None:
        super().__init__(input_size, hidden_size, bias, 4, device, dtype)

    def forward(self, input: Tensor, hx=None) -> tuple:
        batched = self._validate_input(input)
        if hx is None:
            hx = (None, None)
        elif not (isinstance(hx, (tuple, list)) and len(hx) == 2):
            raise EmberTypeError(f"LSTMCell: hx must be a tuple (h, c) of tensors, got "
                                 f"{type(hx).__name__}")
        h = self._initial_state("hx[0]", hx[0], input)
        c = self._initial_state("hx[1]", hx[1], input)
        x = input if batched else input.unsqueeze(0)
        h, c = _lstm_step(F.linear(x, self.weight_ih, self.bias_ih), h, c,
                          self.weight_hh.t(), self.bias_hh, None, self.hidden_size)
        return (h, c) if batched else (h.squeeze(0), c.squeeze(0))


class GRUCell(RNNCellBase):
    r"""One step of a GRU (gates r, z, n).

    Shapes: input (N, input_size) or (input_size); ``hx`` (N, hidden_size) or
    (hidden_size), zeros when omitted; returns ``h'`` of ``hx``'s shape.

    >>> cell = ember.nn.GRUCell(10, 20)
    >>> cell(ember.randn(3, 10), ember.zeros(3, 20)).shape
    ember.Size([3, 20])
    """

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, device=None,
                 dtype=None) -> None:
        super().__init__(input_size, hidden_size, bias, 3, device, dtype)

    def forward(self, input: Tensor, hx: Tensor | None = None) -> Tensor:
        batched = self._validate_input(input)
        h = self._initial_state("hx", hx, input)
        x = input if batched else input.unsqueeze(0)
        xw = F.linear(x, self.weight_ih, self.bias_ih)
        hidden = self.hidden_size
        h = _gru_step(xw[:, :2 * hidden], xw[:, 2 * hidden:], h, self.weight_hh.t(),
                      self.bias_hh, hidden)
        return h if batched else h.squeeze(0)
