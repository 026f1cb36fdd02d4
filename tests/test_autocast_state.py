"""Top-level autocast state functions (ember.is_autocast_enabled, ...) against torch's,
run side by side, inside and outside autocast regions."""
import warnings

import pytest

import ember
from ember.errors import EmberError, EmberTypeError

torch = pytest.importorskip("torch")


def _reset(lib):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for dev, dtype in (("cpu", lib.bfloat16), ("cuda", lib.float16)):
            lib.set_autocast_enabled(dev, False)
            lib.set_autocast_dtype(dev, dtype)
        lib.set_autocast_cache_enabled(True)


@pytest.fixture(autouse=True)
def clean_state():
    _reset(ember)
    _reset(torch)
    yield
    _reset(ember)
    _reset(torch)


def _name(d):
    return str(d).split(".")[-1]


def _snapshot(lib):
    return (lib.is_autocast_enabled(), lib.is_autocast_enabled("cpu"),
            lib.is_autocast_enabled("cuda"), _name(lib.get_autocast_dtype("cpu")),
            _name(lib.get_autocast_dtype("cuda")), lib.is_autocast_cache_enabled())


def _mm_dtype(lib):
    return _name(lib.mm(lib.ones(2, 2), lib.ones(2, 2)).dtype)


def _run(lib, log):
    log.append(_snapshot(lib))
    with lib.autocast("cpu", dtype=lib.float16, cache_enabled=False):
        log.append(_snapshot(lib) + (_mm_dtype(lib),))
        with lib.autocast("cpu", enabled=False, dtype=lib.bfloat16):
            log.append(_snapshot(lib) + (_mm_dtype(lib),))
            lib.set_autocast_enabled("cpu", True)
            log.append(_snapshot(lib) + (_mm_dtype(lib),))
        log.append(_snapshot(lib) + (_mm_dtype(lib),))
        lib.set_autocast_dtype("cpu", lib.bfloat16)
        log.append(_snapshot(lib) + (_mm_dtype(lib),))
    log.append(_snapshot(lib) + (_mm_dtype(lib),))
    lib.set_autocast_dtype("cpu", lib.float16)
    log.append(_snapshot(lib) + (_mm_dtype(lib),))
    with lib.autocast("cpu"):  # no dtype: the one set above
        log.append(_snapshot(lib) + (_mm_dtype(lib),))
    lib.set_autocast_enabled("cpu", True)
    log.append(_snapshot(lib) + (_mm_dtype(lib),))
    lib.set_autocast_enabled("cpu", False)
    lib.set_autocast_enabled(True)  # the one-argument form: CUDA's
    lib.set_autocast_cache_enabled(False)
    log.append(_snapshot(lib) + (_mm_dtype(lib),))


def test_state_sequence_matches_torch():
    ours, ref = [], []
    _run(ember, ours)
    _run(torch, ref)
    assert ours == ref
    assert ours[1][-1] == "float16" and ours[2][-1] == "float32"


def test_deprecated_forms_warn_and_match_torch():
    def run(lib):
        out = []
        with pytest.warns(DeprecationWarning, match="deprecated"):
            lib.set_autocast_cpu_dtype(lib.float16)
        with pytest.warns(DeprecationWarning):
            lib.set_autocast_cpu_enabled(True)
        with pytest.warns(DeprecationWarning):
            out.append(lib.is_autocast_cpu_enabled())
        with pytest.warns(DeprecationWarning):
            out.append(_name(lib.get_autocast_cpu_dtype()))
        out.append(_mm_dtype(lib))
        with pytest.warns(DeprecationWarning):
            lib.set_autocast_gpu_dtype(lib.bfloat16)
        with pytest.warns(DeprecationWarning):
            out.append(_name(lib.get_autocast_gpu_dtype()))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            lib.set_autocast_cpu_enabled(False)
        out.append(_mm_dtype(lib))
        return out
    ours, ref = run(ember), run(torch)
    assert ours == ref == [True, "float16", "float16", "bfloat16", "float32"]


def test_nesting_counter_matches_torch():
    def run(lib):
        seq = [lib.autocast_increment_nesting(), lib.autocast_increment_nesting()]
        with lib.autocast("cpu"):
            seq.append(lib.autocast_increment_nesting())
            seq.append(lib.autocast_decrement_nesting())
        seq += [lib.autocast_decrement_nesting(), lib.autocast_decrement_nesting(),
                lib.autocast_decrement_nesting(), lib.autocast_increment_nesting()]
        return seq
    assert run(ember) == run(torch) == [1, 2, 4, 3, 1, 0, -1, 0]


def test_cache_flag_and_clear():
    from ember.amp.autocast import _state
    w = ember.ones(2, 2, requires_grad=True)
    with ember.autocast("cpu"):
        ember.mm(w, w)
        assert len(_state.cache) == 1
        ember.clear_autocast_cache()
        assert len(_state.cache) == 0
        ember.set_autocast_cache_enabled(False)
        ember.mm(w, w)
        assert len(_state.cache) == 0 and not ember.is_autocast_cache_enabled()
    assert ember.is_autocast_cache_enabled()


def test_jit_retraces_on_state_change():
    f = ember.jit(lambda a, b: ember.mm(a, b))
    a = ember.ones(2, 2)
    assert f(a, a).dtype is ember.float32
    ember.set_autocast_enabled("cpu", True)
    assert f(a, a).dtype is ember.bfloat16
    ember.set_autocast_dtype("cpu", ember.float16)
    assert f(a, a).dtype is ember.float16


def test_errors():
    with pytest.raises(EmberError, match="foo"):
        ember.is_autocast_enabled("foo")
    with pytest.raises(EmberError, match="foo"):
        ember.set_autocast_dtype("foo", ember.float16)
    with pytest.raises(EmberError, match="foo"):
        ember.get_autocast_dtype("foo")
    with pytest.raises(TypeError):
        ember.get_autocast_dtype()
    with pytest.raises(EmberTypeError, match="must be bool, not int"):
        ember.set_autocast_enabled("cpu", 1)
    with pytest.raises(EmberTypeError, match="must be bool"):
        ember.set_autocast_cache_enabled(1)
    with pytest.raises(EmberTypeError, match="not str"):
        ember.set_autocast_dtype("cpu", "float16")
    with pytest.raises(EmberTypeError, match="int32"):
        ember.set_autocast_dtype("cpu", ember.int32)
    assert ember.get_autocast_dtype("cpu") is ember.bfloat16
