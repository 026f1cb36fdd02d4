"""The served model and the one worker thread every model call runs on (so the event
loop never blocks on a forward, and the model never runs on two threads at once)."""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Sequence

import numpy as np

from ..autograd import no_grad
from ..dtypes import as_dtype
from ..ops.creation import from_numpy
from ..pretrained import InputSpec
from .tensors import outputs_by_name

__all__ = ["ModelRunner"]


class ModelRunner:
    """Runs ``model`` on batches of named arrays, on its own thread (:attr:`executor`,
    made by :meth:`start`, ended by :meth:`stop`)."""

    def __init__(self, model, inputs: Sequence[InputSpec]) -> None:
        self.model = model.eval()
        self.inputs = tuple(inputs)
        self.executor: ThreadPoolExecutor | None = None

    @property
    def generates(self) -> bool:
        """Whether the model decodes incrementally (``/v1/generate``)."""
        return all(hasattr(self.model, a) for a in ("forward_cached", "context",
                                                    "vocab_size"))

    @property
    def batchable(self) -> bool:
        """Whether every input has a dynamic dim 0 to concatenate requests along."""
        return all(spec.shape and spec.shape[0] is None for spec in self.inputs)

    def start(self) -> None:
        self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ember-serve")

    def stop(self) -> None:
        if self.executor is not None:
            self.executor.shutdown(wait=True)
            self.executor = None

    def run_batch(self, arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The model's outputs by name for inputs by name (on the calling thread)."""
        with no_grad():
            result = self.model(*(from_numpy(np.ascontiguousarray(arrays[spec.name]))
                                  for spec in self.inputs))
        return outputs_by_name(result)

    def warmup(self) -> None:
        """One forward on zeros of the declared shapes (dynamic dims of size 1), so the
        first request pays no first-call costs and a model that can't run fails at
        startup."""
        self.run_batch({spec.name: np.zeros([1 if n is None else n for n in spec.shape],
                                            dtype=as_dtype(spec.dtype).np)
                        for spec in self.inputs})
