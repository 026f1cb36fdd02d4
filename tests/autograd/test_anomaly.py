"""Anomaly detection (ember.autograd.detect_anomaly / set_detect_anomaly) against
torch.autograd: the NaN error names the node and the output, the warning shows the
forward traceback, and the mode costs nothing once off."""
import warnings

import pytest

import ember
from ember.autograd import anomaly_mode, graph
from .oracle import needs_torch, torch

pytestmark = needs_torch


@pytest.fixture(autouse=True)
def _mode_off_after_each_test():
    yield
    ember.set_anomaly_enabled(False)
    torch.set_anomaly_enabled(False)


def _nan_error(m, body):
    """The message of the error ``body(m)`` raises inside detect_anomaly (and the
    warnings it gave)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with m.autograd.detect_anomaly():
            with pytest.raises(RuntimeError) as info:
                body(m)
    return str(info.value), [str(w.message) for w in caught]


def _mul_by_nan(m):
    x = m.tensor([0.0, 1.0], requires_grad=True)
    (x.sqrt() * m.tensor([float("nan"), 1.0])).sum().backward()


def _second_output(m):
    x = m.tensor([1.0, 2.0], requires_grad=True)
    y = m.tensor([float("inf"), 1.0], requires_grad=True)
    (y * x * m.tensor([0.0, 1.0])).sum().backward()


def _custom_function(m):
    class Poison(m.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            return a * 2

        @staticmethod
        def backward(ctx, g):
            return g * float("nan")
    Poison.apply(m.ones(2, requires_grad=True)).sum().backward()


@pytest.mark.parametrize("body", [_mul_by_nan, _second_output, _custom_function])
def test_nan_error_names_the_node_and_output_as_torch(body):
    got, got_warnings = _nan_error(ember, body)
    expected, expected_warnings = _nan_error(torch, body)
    assert got == expected
    assert "returned nan values in its" in got
    # both warn on entry, then with the forward traceback of the failing node
    assert got_warnings[0] == expected_warnings[0]
    node = got.split("'")[1]
    assert any(w.startswith(f"Error detected in {node}. Traceback of forward call")
               for w in got_warnings)


def test_warning_shows_the_user_forward_line():
    def model(x):
        hidden = x * 2
        return (hidden.sqrt() * 0).sum()  # the culprit: sqrt at 0

    x = ember.tensor([0.0, 1.0], requires_grad=True)
    with pytest.warns(UserWarning, match="Anomaly Detection has been enabled"):
        mode = ember.autograd.detect_anomaly()
    with mode, pytest.warns(UserWarning) as record:
        with pytest.raises(ember.EmberError, match="Function 'SqrtBackward0' returned nan "
                                                   "values in its 0th output."):
            model(x).backward()
    text = "\n".join(str(w.message) for w in record)
    assert "Error detected in SqrtBackward0" in text
    assert "return (hidden.sqrt() * 0).sum()  # the culprit" in text
    assert "registry.py" not in text and "graph.py" not in text


def test_check_nan_false_only_records():
    x = ember.tensor([0.0, 1.0], requires_grad=True)
    with pytest.warns(UserWarning):
        with ember.autograd.detect_anomaly(check_nan=False):
            assert ember.is_anomaly_enabled() and not ember.is_anomaly_check_nan_enabled()
            (x.sqrt() * 0).sum().backward()
    assert x.grad.isnan().tolist() == [True, False]


def test_other_backward_errors_warn_with_the_forward_trace_and_reraise():
    class Broken(ember.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            return a * 2

        @staticmethod
        def backward(ctx, g):
            raise ValueError("broken backward")

    x = ember.ones(2, requires_grad=True)
    with pytest.warns(UserWarning):
        mode = ember.autograd.detect_anomaly()
    with mode, pytest.warns(UserWarning, match="Error detected in BrokenBackward"):
        y = Broken.apply(x).sum()
        with pytest.raises(ValueError, match="broken backward"):
            y.backward()


def test_node_from_before_the_mode_has_no_forward_information():
    x = ember.tensor([0.0, 1.0], requires_grad=True)
    y = (x.sqrt() * 0).sum()
    assert anomaly_mode.forward_traceback(y.grad_fn) is None
    ember.autograd.set_detect_anomaly(True)
    with pytest.warns(UserWarning, match="No forward pass information available"):
        with pytest.raises(ember.EmberError, match="SqrtBackward0"):
            y.backward()


def test_set_detect_anomaly_as_function_and_context_and_restoring():
    assert not ember.is_anomaly_enabled() and graph._anomaly is None
    ember.autograd.set_detect_anomaly(True, check_nan=False)
    assert ember.is_anomaly_enabled() and not ember.is_anomaly_check_nan_enabled()
    with ember.autograd.set_detect_anomaly(False):
        assert not ember.is_anomaly_enabled() and graph._anomaly is None
    assert ember.is_anomaly_enabled() and graph._anomaly is not None
    ember.autograd.set_detect_anomaly(False)
    assert not ember.is_anomaly_enabled() and ember.is_anomaly_check_nan_enabled()
    with pytest.warns(UserWarning):
        with ember.autograd.detect_anomaly():
            with ember.autograd.set_detect_anomaly(True, check_nan=False):
                assert not ember.is_anomaly_check_nan_enabled()
            assert ember.is_anomaly_enabled() and ember.is_anomaly_check_nan_enabled()
    assert not ember.is_anomaly_enabled() and graph._anomaly is None


def test_decorator():
    with pytest.warns(UserWarning, match="Anomaly Detection has been enabled"):
        @ember.autograd.detect_anomaly()
        def step(x):
            assert ember.is_anomaly_enabled()
            (x.sqrt() * 0).sum().backward()

    with pytest.raises(ember.EmberError, match="SqrtBackward0"), \
            pytest.warns(UserWarning, match="Error detected in SqrtBackward0"):
        step(ember.tensor([0.0, 1.0], requires_grad=True))
    assert not ember.is_anomaly_enabled()


def test_nothing_recorded_while_off_and_gradients_unchanged():
    x = ember.tensor([1.0, 4.0], requires_grad=True)
    y = (x.sqrt() * 3).sum()
    assert anomaly_mode.forward_traceback(y.grad_fn) is None
    y.backward()
    with pytest.warns(UserWarning):
        with ember.autograd.detect_anomaly():
            x2 = ember.tensor([1.0, 4.0], requires_grad=True)
            y2 = (x2.sqrt() * 3).sum()
            assert anomaly_mode.forward_traceback(y2.grad_fn) is not None
            y2.backward()
    assert x.grad.tolist() == x2.grad.tolist() == [1.5, 0.75]
