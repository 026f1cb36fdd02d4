"""A rank that fails must not leave the others waiting: an unhandled exception on any
rank prints that rank's traceback and aborts the whole job (MPI_Abort)."""
from __future__ import annotations

import sys
import traceback

__all__ = ["install"]

_installed = [False]


def install(group) -> None:
    """Abort the job when this rank dies of an unhandled exception (world size > 1)."""
    if group.size <= 1 or _installed[0]:
        return
    previous = sys.excepthook

    def excepthook(kind, value, tb):
        text = "".join(traceback.format_exception(kind, value, tb))
        sys.stderr.write(f"[ember.distributed] rank {group.global_rank} failed; aborting the "
                         f"job:\n{text}")
        sys.stderr.flush()
        try:
            group.abort(1)
        finally:
            previous(kind, value, tb)

    sys.excepthook = excepthook
    _installed[0] = True
