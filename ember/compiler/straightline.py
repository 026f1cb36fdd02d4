"""The executor's program as one generated Python function.

:class:`~ember.compiler.runtime.NumpyExecutor` plans a graph as a list of steps (the
forward to call, the slots it reads and writes, the slots it frees, the in-place
updates it makes). Walking that list at every call costs a loop iteration, a tuple
unpacking, an argument list and a keyword dict per step: about 3 microseconds each on
a slow CPU, a tenth of a batch-1 forward of the gpt model. Here the list becomes the
source of one function, each slot a local variable, each step one line:

    s5 = f0(xp, s0, s1)
    s0 = None
    s6, s7 = f1(xp, s5, **p1)

and Python runs it at the speed of straight-line code (15-20x less overhead per step).
What the list decides once (which updates the run writes into their tensors, which
slots are freed where) is fixed in the source. An op that raises names itself and the
line that traced it, found from the failing line of the generated source.
"""
from __future__ import annotations

import numpy as np

from ..errors import EmberError

WRITTEN = object()  # an update the executor already wrote into its tensor


def _array(a, xp):
    return a if a.__class__ is np.ndarray else xp.asarray(a)


def build(program, input_slots, constants, output_slots, update_slots, grad_slots,
          runtime_error):
    """``run(inputs, xp)`` -> (output arrays, update arrays (:data:`WRITTEN` for those
    written in place), gradient arrays), for the executor's ``program`` (its 7-tuples)
    and slots. ``runtime_error(instr, exc)`` makes the error an op's failure raises."""
    names = {"np": np, "EmberError": EmberError, "WRITTEN": WRITTEN, "_array": _array}
    body = []
    line_of = {}  # line number in the source -> the instruction run there

    def emit(text, instr=None):
        body.append("    " + text)
        if instr is not None:
            line_of[len(body) + 1] = instr  # (+1: the def line)

    for j, s in enumerate(input_slots):
        emit(f"s{s} = inputs[{j}]")
    for k, (s, array) in enumerate(constants):
        names[f"c{k}"] = array
        emit(f"s{s} = c{k}")
    written = set()
    for i, (forward, ins, outs, params, frees, instr, writes) in enumerate(program):
        names[f"f{i}"] = forward
        args = ["xp"] + [f"s{s}" for s in ins]
        direct = writes is not None and writes[1]  # outputs made in their tensors' arrays
        if direct:
            params = {key: v for key, v in params.items() if key != "out"}
        if params:
            names[f"p{i}"] = params
            args.append(f"**p{i}")
        if direct:
            slots = ["None"] * len(instr.outputs)
            for k, o, target in writes[1]:
                slots[o] = f"inputs[{target}]"
                written.add(k)
            args.append(f"out=[{', '.join(slots)}]")
        call = f"f{i}({', '.join(args)})"
        if outs.__class__ is int:
            emit(f"s{outs} = {call}", instr)
        elif outs:  # (as zip would: results past the outputs are dropped)
            emit(", ".join(f"s{s}" for s in outs) + f", *_ = {call}", instr)
        else:
            emit(call, instr)
        for s in frees:
            emit(f"s{s} = None")
        if writes is not None:  # parameters and optimizer state, updated in place
            for k, value, target_index in writes[0]:
                emit(f"xp.copyto(inputs[{target_index}], s{value}, casting='unsafe')")
                emit(f"s{value} = inputs[{target_index}]")  # later readers read it there
                written.add(k)

    def listed(slots, done=()):
        return "[" + ", ".join("WRITTEN" if k in done else "None" if s is None else
                               f"_array(s{s}, xp)" for k, s in enumerate(slots)) + "]"

    emit(f"return ({listed(output_slots)}, {listed(update_slots, written)}, "
         f"{listed(grad_slots)})")
    source = "def run(inputs, xp):\n" + "\n".join(body) + "\n"
    code = compile(source, "<ember.jit program>", "exec")
    exec(code, names)
    inner = names["run"]

    def run(inputs, xp):
        try:
            return inner(inputs, xp)
        except EmberError:
            raise
        except Exception as exc:
            tb, instr = exc.__traceback__, None
            while tb is not None:  # (the generated function's frame, and its line)
                if tb.tb_frame.f_code is inner.__code__:
                    instr = line_of.get(tb.tb_lineno)
                tb = tb.tb_next
            if instr is None:
                raise
            raise runtime_error(instr, exc) from exc
    run.source = source
    return run


__all__ = ["WRITTEN", "build"]
