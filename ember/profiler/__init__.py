"""``ember.profiler``: ``torch.profiler``'s interface over ember.

:class:`profile` records every op call, backward node and ``ember.jit`` compiled call
(and :class:`record_function` ranges) while it is active, and nothing otherwise;
``key_averages()`` sums them per name with PyTorch's attribute names, ``table()`` prints
them, ``export_chrome_trace()`` writes a trace for ``chrome://tracing`` or Perfetto, and
:func:`schedule` with :func:`tensorboard_trace_handler` profiles chosen steps of a long
run. See ``docs/profiler.md``.

>>> model = ember.nn.Linear(4, 2)
>>> with ember.profiler.profile() as prof:
...     model(ember.randn(3, 4))
>>> [(e.key, e.count) for e in prof.key_averages()]
[('linear', 1)]
"""
from .events import EventList, FunctionEvent, FunctionEventAvg
from .profiler import (ProfilerAction, ProfilerActivity, profile, schedule,
                       supported_activities, tensorboard_trace_handler)
from .recorder import record_function

__all__ = ["profile", "record_function", "schedule", "ProfilerAction", "ProfilerActivity",
           "tensorboard_trace_handler", "supported_activities", "EventList",
           "FunctionEvent", "FunctionEventAvg"]
