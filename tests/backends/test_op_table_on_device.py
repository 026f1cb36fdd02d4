"""Every op of the op tables gives on the stand-in devices what it gives on the CPU:
values, dtypes and shapes, results left on the device, first-order gradients, and the
same refusals. ``fakegpu`` computes with NumPy like the CPU, so it checks that every op
takes its arrays from the tensors' device and puts its results there; ``strictgpu``'s
arrays also refuse NumPy functions and NumPy operands as CuPy's do, so it checks that
the forwards use the ``xp`` they are given. ``bench/gpu_check.py`` runs the same check
on CUDA."""
from __future__ import annotations

import pytest

from tests.backends.op_table_check import all_cases, check_case, core_dtypes
from tests.backends.strict_device import STRICT
from tests.fake_device import FAKE

CASES = all_cases()
PARAMS = [pytest.param(c, d, id=f"{c.name}-{d}") for c in CASES for d in core_dtypes(c)]


@pytest.mark.parametrize("device", [FAKE, STRICT], ids=str)
@pytest.mark.parametrize("case,dtype", PARAMS)
def test_op_on_a_stand_in_device_equals_cpu(case, dtype, device):
    problems = check_case(case, dtype, device)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("dtype", ["float64", "float16", "bfloat16", "int32", "uint8"])
def test_every_op_in_other_dtypes_on_the_strict_device(dtype):
    problems = [p for case in CASES if dtype in case.dtypes
                for p in check_case(case, dtype, STRICT)[:1]]
    assert not problems, "\n".join(problems)
