"""``ZeroRedundancyOptimizer``: the optimizer state sharded across ranks (ZeRO).

Stage 1: each parameter is owned by one rank (a greedy, deterministic split by size);
each rank keeps the optimizer state of its own parameters only and updates only them,
then every rank receives the updated parameters from their owners (one all-gather per
dtype). The gradients must already be averaged (wrap the model in
``DistributedDataParallel``), as with PyTorch's ``ZeroRedundancyOptimizer``.

Stage 2 also shards the gradients: the optimizer step reduce-scatters the local
gradients so that each rank receives the average of its own parameters' gradients
only, and drops the others (``.grad = None``). Use it without DDP.
"""
from __future__ import annotations

import io
from typing import Any, Iterable

import numpy as np

from ..optim.optimizer import Optimizer
from ..tensor import Tensor
from .process_group import DistributedError, ProcessGroup

__all__ = ["ZeroRedundancyOptimizer"]


class ZeroRedundancyOptimizer(Optimizer):
    """Wrap ``optimizer_class`` so each rank holds the state of ``1/N`` of the
    parameters.

    Args:
        params: the parameters (or parameter groups), the same on every rank.
        optimizer_class: the algorithm, e.g. ``ember.optim.Adam``.
        process_group: the ranks to shard over (default: the world).
        parameters_as_bucket_view: store the parameters of each dtype in one flat
            buffer (each a view into it), so the all-gather after a step writes the
            parameters in place with no unpacking.
        stage: 1 (optimizer state sharded; gradients averaged by DDP) or 2 (gradients
            also reduce-scattered and sharded by this optimizer; no DDP).
        **defaults: options of ``optimizer_class`` (``lr=...``).

    Attributes:
        optim: this rank's optimizer over its own parameters.
        owner: ``{id(param): rank}``, the rank that updates each parameter.

    Saving: every rank calls :meth:`consolidate_state_dict` (to rank ``to``), then
    rank ``to`` calls :meth:`state_dict`: the whole optimizer's state in the plain
    optimizer's format, loadable by ``optimizer_class`` or by :meth:`load_state_dict`
    on any world size. :meth:`local_state_dict` is this rank's shard alone (for
    :mod:`ember.distributed.checkpoint`).

    >>> model = DistributedDataParallel(net)
    >>> opt = ZeroRedundancyOptimizer(model.parameters(), ember.optim.Adam, lr=1e-3)
    >>> loss_fn(model(x), y).backward(); opt.step()
    """

    def __init__(self, params: Iterable, optimizer_class: type,
                 process_group: ProcessGroup | None = None,
                 parameters_as_bucket_view: bool = False, stage: int = 1,
                 **defaults: Any) -> None:
        if stage not in (1, 2):
            raise DistributedError(f"ZeroRedundancyOptimizer: stage must be 1 or 2, got "
                                   f"{stage!r}")
        if not (isinstance(optimizer_class, type) and issubclass(optimizer_class, Optimizer)):
            raise DistributedError(f"ZeroRedundancyOptimizer: optimizer_class must be an "
                                   f"ember.optim.Optimizer subclass, got {optimizer_class!r}")
        from .collectives import _group
        self._ready = False
        super().__init__(params, defaults)
        self._ready = True
        self.optimizer_class = optimizer_class
        self.process_group = _group(process_group)
        self.stage = stage
        self.parameters_as_bucket_view = bool(parameters_as_bucket_view)
        self._params = [p for g in self.param_groups for p in g["params"]]
        self._index = {id(p): i for i, p in enumerate(self._params)}
        self.owner = self._partition()
        rank = self.process_group.rank
        local_groups = []
        for g in self.param_groups:
            local = {k: v for k, v in g.items() if k != "params"}
            local["params"] = [p for p in g["params"] if self.owner[id(p)] == rank]
            local_groups.append(local)
        self.optim = optimizer_class(local_groups, **defaults)
        self._local_to_global = [self._index[id(p)] for g in self.optim.param_groups
                                 for p in g["params"]]
        for g, local in zip(self.param_groups, self.optim.param_groups):
            for k, v in local.items():
                if k != "params":
                    g[k] = v
        # (the flat buffers live on the parameters' device)
        self._xp = self._params[0]._device.backend.xp if self._params else np
        self._layout = self._make_layout()
        self._consolidated: dict | None = None

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        if getattr(self, "_ready", False):
            raise NotImplementedError("ZeroRedundancyOptimizer.add_param_group after "
                                      "construction is not supported: the partition "
                                      "across ranks is fixed; pass every group to the "
                                      "constructor")
        super().add_param_group(param_group)

    # The partition ------------------------------------------------------------------
    def _partition(self) -> dict[int, int]:
        """Largest parameters first, each to the rank holding the fewest bytes so far
        (lowest rank on ties): the same answer on every rank."""
        loads = [0] * self.process_group.size
        owner = {}
        order = sorted(range(len(self._params)),
                       key=lambda i: (-self._params[i]._data.nbytes, i))
        for i in order:
            rank = min(range(len(loads)), key=lambda r: (loads[r], r))
            owner[id(self._params[i])] = rank
            loads[rank] += self._params[i]._data.nbytes
        return owner

    def _make_layout(self) -> dict:
        """Per dtype: a flat buffer of ``size`` equal segments, segment ``r`` holding
        rank ``r``'s parameters (padded to the longest), and each parameter's place."""
        size = self.process_group.size
        layout = {}
        for dtype in dict.fromkeys(p._data.dtype for p in self._params):
            offsets = [0] * size
            places = []
            for p in self._params:
                if p._data.dtype == dtype:
                    r = self.owner[id(p)]
                    places.append((p, r, offsets[r]))
                    offsets[r] += p._data.size
            flat = self._xp.zeros((size, max(max(offsets), 1)), dtype)
            for p, r, off in places:
                flat[r, off:off + p._data.size] = p._data.reshape(-1)
                if self.parameters_as_bucket_view:
                    p._data = flat[r, off:off + p._data.size].reshape(p._data.shape)
            layout[dtype] = (flat, places)
        return layout

    def optimizer_state_bytes(self) -> int:
        """Bytes of optimizer state (tensors) this rank holds."""
        return sum(v._data.nbytes for s in self.optim.state.values() for v in s.values()
                   if isinstance(v, Tensor))

    # The step -----------------------------------------------------------------------
    def step(self, closure=None):
        """Update this rank's parameters (after reduce-scattering the gradients, at
        stage 2), then give every rank the updated parameters."""
        loss = self._evaluate(closure)
        if self.stage == 2:
            self._reduce_scatter_grads()
        for g, local in zip(self.param_groups, self.optim.param_groups):
            for k, v in g.items():
                if k != "params":
                    local[k] = v
        self.optim.step()
        self._all_gather_params()
        return loss

    def _reduce_scatter_grads(self) -> None:
        group, rank = self.process_group, self.process_group.rank
        has_grad = np.array([p.grad is not None for p in self._params], np.float64)
        works = [(None, None, group.allreduce(has_grad, "max"))]
        for dtype, (flat, places) in self._layout.items():
            send = self._xp.zeros(flat.shape, dtype)
            for p, r, off in places:
                if p.grad is not None:
                    send[r, off:off + p._data.size] = p.grad._data.reshape(-1)
            mine = self._xp.empty(flat.shape[1], dtype)
            works.append((mine, places, group.reduce_scatter(mine, send.reshape(-1), "avg")))
        for mine, places, work in works:
            work.wait()
        for mine, places, _ in works[1:]:
            for p, r, off in places:
                if r == rank and has_grad[self._index[id(p)]]:
                    p.grad = Tensor._make(mine[off:off + p._data.size].reshape(p._data.shape)
                                          .copy(), p._device)
                else:
                    p.grad = None

    def _all_gather_params(self) -> None:
        group, rank = self.process_group, self.process_group.rank
        works = []
        for dtype, (flat, places) in self._layout.items():
            if not self.parameters_as_bucket_view:
                for p, r, off in places:
                    if r == rank:
                        flat[r, off:off + p._data.size] = p._data.reshape(-1)
            works.append((flat, places, group.allgather(flat, flat[rank].copy())))
        for flat, places, work in works:
            work.wait()
            for p, r, off in places:
                if not self.parameters_as_bucket_view:
                    p._data[...] = flat[r, off:off + p._data.size].reshape(p._data.shape)
                p._version[0] += 1

    # State dicts --------------------------------------------------------------------
    def local_state_dict(self) -> dict[str, Any]:
        """This rank's shard: the state of its own parameters under their global
        indices, the full groups' options, and ``"zero"`` (rank, world size, owned
        indices). Shards merge into the full state dict (see :func:`merge_shards`)."""
        local = self.optim.state_dict()
        state = {self._local_to_global[i]: v for i, v in local["state"].items()}
        groups = []
        for g in self.param_groups:
            packed = {k: v for k, v in g.items() if k != "params"}
            packed["params"] = [self._index[id(p)] for p in g["params"]]
            groups.append(packed)
        return {"state": state, "param_groups": groups,
                "zero": {"rank": self.process_group.rank,
                         "world_size": self.process_group.size,
                         "stage": self.stage,
                         "owned": sorted(self._local_to_global)}}

    def consolidate_state_dict(self, to: int = 0) -> None:
        """Collect every rank's shard on rank ``to`` (a global rank); every rank of the
        group must call it. Then :meth:`state_dict` on rank ``to`` returns it."""
        from ..serialization import load, save
        group = self.process_group
        if to not in group.ranks:
            raise DistributedError(f"consolidate_state_dict: rank {to} is not in the group "
                                   f"of ranks {group.ranks}")
        root = group.ranks.index(to)
        buf = io.BytesIO()
        save(self.local_state_dict(), buf)
        mine = np.frombuffer(buf.getvalue(), np.uint8)
        length = np.array([mine.size], np.int64)
        group.allreduce(length, "max").wait()
        padded = np.zeros(int(length[0]) + 8, np.uint8)
        padded[:8] = np.frombuffer(np.int64(mine.size).tobytes(), np.uint8)
        padded[8:8 + mine.size] = mine
        out = np.empty((group.size, padded.size), np.uint8) if group.rank == root else None
        group.gather(out, padded, root).wait()
        if group.rank != root:
            self._consolidated = None
            return
        shards = []
        for row in out:
            n = int(np.frombuffer(row[:8].tobytes(), np.int64)[0])
            shards.append(load(io.BytesIO(row[8:8 + n].tobytes())))
        self._consolidated = merge_shards(shards)

    def state_dict(self) -> dict[str, Any]:
        """The whole optimizer's state, in the plain optimizer's format; only on the
        rank that :meth:`consolidate_state_dict` collected it to, after that call."""
        if self._consolidated is None:
            raise DistributedError(
                f"ZeroRedundancyOptimizer.state_dict: rank {self.process_group.global_rank} "
                "holds no consolidated state; call consolidate_state_dict(to=rank) on every "
                "rank first, then state_dict() on that rank")
        return self._consolidated

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Load a full state dict (of this optimizer, or of a plain ``optimizer_class``
        over the same parameters) or this rank's own shard: each rank keeps the state
        of its own parameters."""
        if not isinstance(state_dict, dict) or not {"state", "param_groups"} <= set(state_dict):
            raise DistributedError("ZeroRedundancyOptimizer.load_state_dict: expected a "
                                   "dict with 'state' and 'param_groups'")
        groups = state_dict["param_groups"]
        if len(groups) != len(self.param_groups) or any(
                len(s["params"]) != len(g["params"]) for s, g in zip(groups, self.param_groups)):
            raise DistributedError(
                "ZeroRedundancyOptimizer.load_state_dict: the state dict's groups have "
                f"{[len(s['params']) for s in groups]} parameters; expected "
                f"{[len(g['params']) for g in self.param_groups]}")
        # the state dict's index of each of our parameters
        saved_index = {self._index[id(p)]: s for sg, g in zip(groups, self.param_groups)
                       for s, p in zip(sg["params"], g["params"])}
        state = {int(k) if isinstance(k, str) else k: v
                 for k, v in state_dict["state"].items()}
        local_state = {}
        for local_i, global_i in enumerate(self._local_to_global):
            entry = state.get(saved_index[global_i])
            if entry is not None:
                local_state[local_i] = entry
        local_groups, i = [], 0
        for sg, lg in zip(groups, self.optim.param_groups):
            packed = {k: v for k, v in sg.items() if k != "params"}
            packed["params"] = list(range(i, i + len(lg["params"])))
            i += len(lg["params"])
            local_groups.append(packed)
        self.optim.load_state_dict({"state": local_state, "param_groups": local_groups})
        for g, sg in zip(self.param_groups, groups):
            for k, v in sg.items():
                if k != "params":
                    g[k] = v


def merge_shards(shards: list[dict]) -> dict[str, Any]:
    """The full optimizer state dict from every rank's :meth:`local_state_dict`."""
    ranks = sorted(s["zero"]["rank"] for s in shards)
    size = shards[0]["zero"]["world_size"]
    if ranks != list(range(size)):
        raise DistributedError(f"merge_shards: expected one shard of each of the {size} "
                               f"ranks, got the shards of ranks {ranks}")
    state = {}
    for s in shards:
        for k, v in s["state"].items():
            state[int(k)] = v
    return {"state": dict(sorted(state.items())), "param_groups": shards[0]["param_groups"]}
