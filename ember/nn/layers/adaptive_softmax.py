"""Adaptive softmax (Grave et al., 2016): :class:`AdaptiveLogSoftmaxWithLoss`."""
from __future__ import annotations

from collections import namedtuple
from typing import Sequence

from ...errors import EmberIndexError, EmberValueError, ShapeError
from ...ops.reduce import argmax
from ...ops.shape import cat
from ...ops.take import nonzero
from ...tensor import Tensor
from .. import functional as F
from ..containers import ModuleList, Sequential
from ..module import Module
from .linear import Linear

__all__ = ["AdaptiveLogSoftmaxWithLoss"]

_ASMoutput = namedtuple("_ASMoutput", ["output", "loss"])


class AdaptiveLogSoftmaxWithLoss(Module):
    """A softmax over many classes that spends less compute on rare ones: the ``head``
    scores the ``cutoffs[0]`` most frequent classes and one entry per tail cluster; each
    cluster ``i`` (classes ``cutoffs[i]`` to ``cutoffs[i + 1] - 1``, the last ending at
    ``n_classes``) scores its classes through a projection to
    ``floor(in_features / div_value ** (i + 1))`` features. Labels must be sorted by
    frequency (0 the most frequent). Parameters and state-dict keys are PyTorch's
    (``head.weight``, ``tail.0.0.weight``, ``tail.0.1.weight``, ...).

    Args:
        in_features: features of each input.
        n_classes: number of classes.
        cutoffs: increasing, unique cluster boundaries in [1, n_classes - 1].
        div_value: the divisor of each successive cluster's projection size.
        head_bias: give the head a bias.

    ``forward(input, target)`` returns ``(output, loss)``: the target's log-probability
    for each input ((N,) for (N, in_features) input and (N,) target, () for 1-D) and
    the mean negative log-likelihood. ``log_prob(input)`` gives all (N, n_classes)
    log-probabilities; ``predict(input)`` the most likely class of each row.

    >>> asm = ember.nn.AdaptiveLogSoftmaxWithLoss(16, 100, [10, 40])
    >>> out, loss = asm(ember.randn(8, 16), ember.randint(0, 100, (8,)))
    >>> out.shape, loss.shape
    (ember.Size([8]), ember.Size([]))
    """

    def __init__(self, in_features: int, n_classes: int, cutoffs: Sequence[int],
                 div_value: float = 4.0, head_bias: bool = False, device=None,
                 dtype=None) -> None:
        super().__init__()
        cutoffs = list(cutoffs)
        if len(cutoffs) == 0:
            raise EmberValueError("AdaptiveLogSoftmaxWithLoss: cutoffs should be a sequence "
                                  "of length larger than 0")
        if cutoffs != sorted(cutoffs) or min(cutoffs) <= 0 or \
                max(cutoffs) > n_classes - 1 or len(set(cutoffs)) != len(cutoffs) or \
                any(int(c) != c for c in cutoffs):
            raise EmberValueError(
                "AdaptiveLogSoftmaxWithLoss: cutoffs should be a sequence of unique, "
                "positive integers sorted in an increasing order, where each value is "
                f"between 1 and n_classes-1 = {n_classes - 1}; got {cutoffs}")
        self.in_features = in_features
        self.n_classes = n_classes
        self.cutoffs = cutoffs + [n_classes]
        self.div_value = div_value
        self.head_bias = head_bias
        self.shortlist_size = self.cutoffs[0]
        self.n_clusters = len(self.cutoffs) - 1
        self.head_size = self.shortlist_size + self.n_clusters
        factory = {"device": device, "dtype": dtype}
        self.head = Linear(in_features, self.head_size, bias=head_bias, **factory)
        self.tail = ModuleList()
        for i in range(self.n_clusters):
            hidden = int(in_features // (div_value ** (i + 1)))
            size = self.cutoffs[i + 1] - self.cutoffs[i]
            self.tail.append(Sequential(Linear(in_features, hidden, bias=False, **factory),
                                        Linear(hidden, size, bias=False, **factory)))

    def reset_parameters(self) -> None:
        """Re-initialise the head and the tail projections as at construction."""
        self.head.reset_parameters()
        for to_hidden, to_classes in self.tail:
            to_hidden.reset_parameters()
            to_classes.reset_parameters()

    def forward(self, input_: Tensor, target_: Tensor) -> _ASMoutput:
        if target_.ndim == 1:
            if input_.ndim != 2 or input_.shape[0] != target_.shape[0]:
                raise ShapeError(f"AdaptiveLogSoftmaxWithLoss: a 1-D target expects a 2-D "
                                 f"input with the same batch size, got input of shape "
                                 f"{tuple(input_.shape)} and target of shape "
                                 f"{tuple(target_.shape)}")
        elif target_.ndim == 0:
            if input_.ndim != 1:
                raise ShapeError(f"AdaptiveLogSoftmaxWithLoss: a 0-D target expects a 1-D "
                                 f"input, got input of shape {tuple(input_.shape)}")
        else:
            raise ShapeError(f"AdaptiveLogSoftmaxWithLoss: 0-D or 1-D target expected "
                             f"(multi-target not supported), got shape "
                             f"{tuple(target_.shape)}")
        batched = target_.ndim > 0
        input = input_ if batched else input_.unsqueeze(0)
        target = target_ if batched else target_.unsqueeze(0)
        # each row's log-probability within its tail cluster, and its head column
        output = input.new_zeros(target.shape[0])
        head_column = target
        used = 0
        bounds = [0] + self.cutoffs
        for i in range(len(bounds) - 1):
            low, high = bounds[i], bounds[i + 1]
            rows = nonzero((target >= low) & (target < high))[:, 0]
            if rows.numel() == 0:
                continue
            if i > 0:
                relative = target.index_select(0, rows) - low
                cluster = F.log_softmax(self.tail[i - 1](input.index_select(0, rows)), dim=1)
                local = cluster.gather(1, relative.unsqueeze(1)).squeeze(1)
                output = output.index_copy(0, rows, local)
                head_column = head_column.index_fill(0, rows, self.shortlist_size + i - 1)
            used += rows.numel()
        if used != target.shape[0]:
            raise EmberIndexError(
                f"AdaptiveLogSoftmaxWithLoss: target values should be in [0, "
                f"{self.n_classes - 1}], but values in range [{int(target.min())}, "
                f"{int(target.max())}] were found")
        head_logprob = F.log_softmax(self.head(input), dim=1)
        output = output + head_logprob.gather(1, head_column.unsqueeze(1)).squeeze(1)
        loss = (-output).mean()
        return _ASMoutput(output if batched else output.squeeze(0), loss)

    def _full_log_prob(self, input: Tensor, head_output: Tensor) -> Tensor:
        head_logprob = F.log_softmax(head_output, dim=-1)
        parts = [head_logprob[..., :self.shortlist_size]]
        for i, projection in enumerate(self.tail):
            cluster = F.log_softmax(projection(input), dim=-1)
            column = self.shortlist_size + i
            parts.append(cluster + head_logprob[..., column:column + 1])
        return cat(parts, -1)

    def log_prob(self, input: Tensor) -> Tensor:
        """The log-probabilities of all classes: (N, n_classes) for (N, in_features)."""
        return self._full_log_prob(input, self.head(input))

    def predict(self, input: Tensor) -> Tensor:
        """The most likely class of each row, ``log_prob(input).argmax(dim=1)``, with the
        tail clusters evaluated only for rows whose head's best entry is a cluster."""
        head_output = self.head(input)
        output = argmax(head_output, dim=1)
        not_in_shortlist = output >= self.shortlist_size
        if not bool(not_in_shortlist.any()):
            return output
        if bool(not_in_shortlist.all()):
            return argmax(self._full_log_prob(input, head_output), dim=1)
        log_prob = self._full_log_prob(input[not_in_shortlist], head_output[not_in_shortlist])
        output[not_in_shortlist] = argmax(log_prob, dim=1)
        return output
