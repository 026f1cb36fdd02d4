"""Debug mode: before each collective, the ranks of its group exchange what they are
about to call (the collective, shapes, dtypes, reduce op, root) and every rank raises
the same :class:`~ember.distributed.DistributedError` when they differ, naming the
ranks and what each called — instead of a hang, a truncation error deep inside MPI, or
silently wrong numbers.

Turn it on with ``EMBER_DIST_DEBUG=1``, ``init_process_group(debug=True)`` or
``ember launch --debug``. It costs two small all-gathers per collective (on a separate
communicator), so it is off by default.
"""
from __future__ import annotations

import json
import os

from .process_group import DistributedError, ProcessGroup

__all__ = ["is_debug", "set_debug", "check_call", "describe_call"]

_debug = [os.environ.get("EMBER_DIST_DEBUG", "").strip().lower() not in ("", "0", "false",
                                                                        "no", "off")]


def is_debug() -> bool:
    """Whether collectives are checked across ranks before they run."""
    return _debug[0]


def set_debug(enabled: bool) -> None:
    """Turn debug mode on or off (every rank must agree)."""
    _debug[0] = bool(enabled)


def describe_call(call: dict) -> str:
    """``all_reduce(shape=(4,), dtype=float32, op=sum)``."""
    fields = ", ".join(f"{key}={value}" for key, value in call.items() if key != "name")
    return f"{call['name']}({fields})"


def check_call(group: ProcessGroup, name: str, **fields) -> None:
    """In debug mode, raise on every rank of ``group`` unless all of them are calling
    ``name`` with the same ``fields`` (strings and numbers: ``shape="(4, 2)"``,
    ``dtype="float32"``)."""
    if not _debug[0] or group.size == 1:
        return
    mine = {"name": name, **fields}
    payload = json.dumps(mine).encode()
    calls = [json.loads(p) for p in group.exchange(payload, f"debug check before {name}")]
    if all(c == calls[0] for c in calls):
        return
    kinds: dict = {}
    for i, call in enumerate(calls):
        kinds.setdefault(describe_call(call), []).append(group.ranks[i])
    said = "; ".join(f"{'rank' if len(r) == 1 else 'ranks'} {', '.join(map(str, r))} "
                     f"called {what}" for what, r in kinds.items())
    raise DistributedError(f"debug check before collective #{group.seq + 1} of ranks "
                           f"{list(group.ranks)}: the ranks disagree: {said}")
