"""Pipeline parallelism: a model split into consecutive stages, one per rank, fed with
micro-batches.

Each rank keeps only its stage. A batch is cut into ``chunks`` micro-batches; stage
``s`` receives a micro-batch's activation from stage ``s - 1``, runs it, and sends the
result on; the last stage computes the loss, and gradients travel back the same way.
Two schedules:

- ``"gpipe"``: every micro-batch forward, then every micro-batch backward (simple; holds
  the activations of all ``chunks`` micro-batches);
- ``"1f1b"``: after a warm-up of ``stages - stage - 1`` forwards, each stage alternates
  one forward and one backward, so it holds at most ``stages`` micro-batches' activations.

Both give the same loss and gradients as the unsplit model on the whole batch when the
loss is a mean over the batch: the batch is cut as evenly as possible (micro-batch sizes
differ by at most one), each micro-batch's loss is weighted by its share of the batch,
and the gradients accumulate in ``.grad`` over the micro-batches.

Activations are sent with non-blocking sends (``isend``) and received with blocking
receives; a small header with the shape and dtype goes first, so stages need not know
each other's shapes.
"""
from __future__ import annotations

import numpy as np

from .. import dtypes, nn
from ..ops.creation import empty, zeros
from ..ops.creation import tensor as as_tensor
from ..tensor import Tensor
from .collectives import broadcast, irecv, isend
from .nn.functional import _group
from .process_group import DistributedError, ProcessGroup

__all__ = ["Pipeline", "split_stages"]

SCHEDULES = ("gpipe", "1f1b")
_HEADER = 10            # ndim, dtype code, up to 8 dimensions
_DTYPES = ("float64", "float32", "float16", "bfloat16", "int64", "int32", "bool")


def split_stages(n_layers: int, n_stages: int, balance=None) -> list:
    """The layer ranges ``[(start, stop), ...]`` of ``n_stages`` consecutive stages:
    ``balance`` (layers per stage) when given, else as even as possible (the earlier
    stages get the extra layers)."""
    if balance is None:
        if n_layers < n_stages:
            raise DistributedError(f"Pipeline: {n_layers} layers cannot fill {n_stages} "
                                   "stages; expected at least one layer per rank")
        base, extra = divmod(n_layers, n_stages)
        balance = [base + (s < extra) for s in range(n_stages)]
    balance = [int(b) for b in balance]
    if len(balance) != n_stages or sum(balance) != n_layers or min(balance) < 1:
        raise DistributedError(f"Pipeline: balance {balance} must give each of the "
                               f"{n_stages} stages at least one layer and {n_layers} layers "
                               "in all")
    starts = np.cumsum([0] + balance)
    return [(int(starts[s]), int(starts[s + 1])) for s in range(n_stages)]


class Pipeline(nn.Module):
    """``module`` (an ``nn.Sequential`` or a list of modules) split across the ranks of
    ``group``: this rank runs layers ``self.layers`` (``start:stop``) as its stage.

    Args:
        module: the whole model as consecutive layers; every rank passes the same one
            (it keeps references to its own layers only).
        group: the pipeline group, stage ``s`` on group rank ``s`` (the world by default).
        chunks: micro-batches per batch (at most the batch size; an uneven batch gives
            micro-batches whose sizes differ by one, as ``numpy.array_split``).
        loss_fn: ``loss_fn(output, target)`` on the last stage, a mean over the
            micro-batch (e.g. ``cross_entropy``); the batch loss is the mean over
            micro-batches.
        schedule: ``"1f1b"`` (default) or ``"gpipe"``.
        balance: layers per stage (default: as even as possible).

    ``step(input, target)`` runs forward and backward over every micro-batch, leaves the
    gradients of this stage's parameters in ``.grad`` (added to what was there, like
    ``backward()``) and returns the batch loss on every rank. ``input`` is read on the
    first stage and ``target`` on the last; other ranks may pass None. After a step,
    ``peak_activations`` is the most micro-batches whose activations this stage held at
    once (``chunks`` for GPipe, at most ``stages - stage`` for 1F1B).

    >>> pipe = Pipeline(nn.Sequential(*layers), chunks=4, loss_fn=F.cross_entropy)
    >>> loss = pipe.step(x, y)          # under mpiexec -n 2: layers split in two
    >>> optimizer = ember.optim.SGD(pipe.parameters(), lr=0.1)  # this stage's only
    """

    def __init__(self, module, group: ProcessGroup | None = None, chunks: int = 1,
                 loss_fn=None, schedule: str = "1f1b", balance=None):
        super().__init__()
        layers = list(module)
        g = _group(group)
        if schedule not in SCHEDULES:
            raise DistributedError(f"Pipeline: unknown schedule {schedule!r}; expected one "
                                   f"of {', '.join(SCHEDULES)}")
        if int(chunks) < 1:
            raise DistributedError(f"Pipeline: chunks must be at least 1, got {chunks}")
        if loss_fn is None:
            raise DistributedError("Pipeline: a loss_fn(output, target) is needed (the "
                                   "last stage computes the loss)")
        self.group, self.chunks, self.schedule = g, int(chunks), schedule
        self.loss_fn = loss_fn
        self.stage, self.n_stages = g.rank, g.size
        self.ranges = split_stages(len(layers), g.size, balance)
        start, stop = self.ranges[self.stage]
        self.layers = (start, stop)
        self.module = nn.Sequential(*layers[start:stop])
        self.is_first, self.is_last = self.stage == 0, self.stage == g.size - 1
        self.peak_activations = 0

    def forward(self, *args, **kwargs):
        raise DistributedError("Pipeline: call step(input, target), which runs forward and "
                               "backward over the micro-batches on every stage")

    # Messages -------------------------------------------------------------------------
    def _peer(self, offset: int) -> int:
        return self.group.ranks[self.stage + offset]

    def _send(self, tensor: Tensor, offset: int, micro: int, pending: list) -> None:
        """Non-blocking send of ``tensor`` (a header first, for activations)."""
        peer = self._peer(offset)
        data = tensor.detach().contiguous()
        if offset > 0:
            header = np.zeros(_HEADER, np.int64)
            if data.ndim > _HEADER - 2 or data.dtype.name not in _DTYPES:
                raise DistributedError(f"Pipeline: stage {self.stage} output of shape "
                                       f"{tuple(data.shape)}, dtype {data.dtype.name} cannot "
                                       "be sent; expected at most 8 dimensions and one of "
                                       f"{', '.join(_DTYPES)}")
            header[0], header[1] = data.ndim, _DTYPES.index(data.dtype.name)
            header[2:2 + data.ndim] = data.shape
            header_t = as_tensor(header)
            pending.append((header_t, isend(header_t, peer, self.group, tag=3 * micro)))
            pending.append((data, isend(data, peer, self.group, tag=3 * micro + 1)))
        else:
            pending.append((data, isend(data, peer, self.group, tag=3 * micro + 2)))

    def _recv_activation(self, micro: int) -> Tensor:
        header = as_tensor(np.zeros(_HEADER, np.int64))
        irecv(header, self._peer(-1), self.group, tag=3 * micro).wait()
        h = header.numpy()
        shape = tuple(int(d) for d in h[2:2 + int(h[0])])
        out = empty(shape, dtype=getattr(dtypes, _DTYPES[int(h[1])]))
        irecv(out, self._peer(-1), self.group, tag=3 * micro + 1).wait()
        if out.dtype.is_floating_point:
            out.requires_grad_(True)
        return out

    def _recv_grad(self, like: Tensor, micro: int) -> Tensor:
        grad = empty(tuple(like.shape), dtype=like.dtype)
        irecv(grad, self._peer(1), self.group, tag=3 * micro + 2).wait()
        return grad

    # Schedules ------------------------------------------------------------------------
    def _forward_micro(self, micro: int, inputs, targets, state: dict, pending: list):
        x = inputs[micro] if self.is_first else self._recv_activation(micro)
        out = self.module(x)
        if self.is_last:
            target, share = targets[micro]
            loss = self.loss_fn(out, target)
            state["loss"] += float(loss.detach()) * share
            state[micro] = (x, loss * share)
        else:
            self._send(out, 1, micro, pending)
            state[micro] = (x, out)
        self.peak_activations = max(self.peak_activations, len(state) - 1)

    def _backward_micro(self, micro: int, state: dict, pending: list):
        x, out = state.pop(micro)
        if self.is_last:
            out.backward()
        else:
            grad = self._recv_grad(out, micro)
            if out.requires_grad:   # not so on a first stage without parameters
                out.backward(grad)
        if not self.is_first:
            grad = x.grad if x.grad is not None else zeros(tuple(x.shape), dtype=x.dtype)
            self._send(grad, -1, micro, pending)

    def step(self, input: Tensor | None = None, target: Tensor | None = None) -> float:
        """Forward and backward over the micro-batches; returns the batch loss (the
        micro-batch losses weighted by their sizes) on every rank of the group."""
        inputs = self._split("input", input) if self.is_first else None
        if self.is_last:
            parts = self._split("target", target)
            total = sum(int(t.shape[0]) for t in parts)
            targets = [(t, int(t.shape[0]) / total) for t in parts]
        else:
            targets = None
        state, pending = {"loss": 0.0}, []
        self.peak_activations = 0
        fwd = lambda m: self._forward_micro(m, inputs, targets, state, pending)  # noqa: E731
        bwd = lambda m: self._backward_micro(m, state, pending)  # noqa: E731
        if self.schedule == "gpipe":
            for m in range(self.chunks):
                fwd(m)
            for m in range(self.chunks):
                bwd(m)
        else:
            warmup = min(self.n_stages - self.stage - 1, self.chunks)
            for m in range(warmup):
                fwd(m)
            for m in range(warmup, self.chunks):
                fwd(m)
                bwd(m - warmup)
            for m in range(self.chunks - warmup, self.chunks):
                bwd(m)
        for _, work in pending:
            work.wait()
        loss = as_tensor(state["loss"], dtype=dtypes.float64)
        broadcast(loss, self.group.ranks[-1], self.group)
        return float(loss)

    def _split(self, what: str, t) -> list:
        if not isinstance(t, Tensor):
            raise DistributedError(f"Pipeline.step: stage {self.stage} needs the {what} "
                                   f"tensor, got {type(t).__name__}")
        if t.ndim == 0 or t.shape[0] < self.chunks:
            raise DistributedError(f"Pipeline.step: {what} of shape {tuple(t.shape)} does "
                                   f"not split into {self.chunks} micro-batches along dim 0; "
                                   f"expected at least {self.chunks} rows")
        sizes = [len(a) for a in np.array_split(np.arange(t.shape[0]), self.chunks)]
        return list(t.split(sizes, 0))

    def extra_repr(self) -> str:
        return (f"stage {self.stage} of {self.n_stages}, layers {self.layers[0]}:"
                f"{self.layers[1]}, chunks={self.chunks}, schedule={self.schedule!r}")
