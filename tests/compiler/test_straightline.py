"""The executor's program as one generated function (``ember.compiler.straightline``):
one line per step, slots freed where the plan frees them, and an op that fails at run
time named with the line that traced it."""
import numpy as np
import pytest

import ember
from ember.errors import EmberError


def _compiled():
    def f(x, y):
        a = (x * y).sum(1)
        return ember.sort(a)[0] + 1

    fn = ember.jit(f)
    x, y = ember.randn(4, 3), ember.randn(4, 3)
    fn(x, y)
    return fn, x, y


def test_the_source_has_one_call_per_step_and_frees_what_the_plan_frees():
    fn, x, y = _compiled()
    ex = fn.latest().executor
    source = ex._straight.source
    calls = [line for line in source.splitlines() if "= f" in line and "(xp" in line]
    assert len(calls) == len(ex.program)
    freed = sum(len(step[4]) for step in ex.program)
    assert source.count(" = None\n") == freed
    out = fn(x, y)
    np.testing.assert_allclose(out.numpy(), np.sort((x * y).sum(1).numpy()) + 1, rtol=1e-6)


def test_an_op_failing_at_run_time_is_named_with_where_it_was_traced():
    fn, x, y = _compiled()
    ex = fn.latest().executor
    i = next(i for i, step in enumerate(ex.program) if step[5].op.name == "argsort")

    def broken(xp, *args, **params):
        raise ValueError("the kernel broke")
    ex.program[i] = (broken,) + ex.program[i][1:]
    ex._straight = None  # (made again from the program at the next run)
    with pytest.raises(EmberError, match=r"argsort \(traced at .*test_straightline.py.*"
                                         r"the kernel broke"):
        fn(x, y)


def test_an_ember_error_inside_an_op_passes_through_unchanged():
    fn, x, y = _compiled()
    ex = fn.latest().executor

    def refuses(xp, *args, **params):
        raise EmberError("refused as it is")
    ex.program[0] = (refuses,) + ex.program[0][1:]
    ex._straight = None
    with pytest.raises(EmberError, match="^refused as it is$"):
        fn(x, y)
