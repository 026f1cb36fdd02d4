"""Resuming reproduces the uninterrupted run bit for bit: stopped by max_steps, killed
with SIGKILL, interrupted by SIGINT or an exception (emergency checkpoints), killed
while writing a checkpoint."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import ember
from ember.train import find_checkpoints, latest_checkpoint, read_checkpoint

from .common import DynamicScaler, assert_identical, build, params

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
N = 14  # 6 steps an epoch: the stops below fall mid-epoch and on an epoch boundary


def _straight(**kwargs):
    trainer = build(N, **kwargs)
    trainer.fit()
    return trainer


def _scaler(kind):
    if kind == "none":
        return None
    if kind == "ember":
        amp = pytest.importorskip("ember.amp")
        return amp.GradScaler(init_scale=2.0 ** 8, growth_interval=3)
    return DynamicScaler()


@pytest.mark.parametrize("stop", [5, 6])
@pytest.mark.parametrize("scaler", ["none", "dynamic", "ember"])
@pytest.mark.parametrize("generator", [False, True])
def test_resume_is_bit_for_bit(tmp_path, stop, scaler, generator):
    straight = _straight(scaler=_scaler(scaler), generator=generator)
    first = build(stop, scaler=_scaler(scaler), generator=generator)
    first.fit()
    path = first.save_checkpoint(tmp_path / "half.safetensors")
    resumed = build(N, scaler=_scaler(scaler), generator=generator, seed=99,
                    resume_from=path)
    resumed.fit()
    assert_identical(params(resumed.model), params(straight.model))
    assert resumed.global_step == straight.global_step == N
    assert resumed.history.rows == straight.history.rows
    assert resumed.optimizer.param_groups[0]["lr"] == straight.optimizer.param_groups[0]["lr"]
    if scaler != "none":
        assert resumed.grad_scaler.state_dict() == straight.grad_scaler.state_dict()


def test_scaler_skips_nan_steps_and_resumes(tmp_path):
    straight = _straight(scaler=DynamicScaler(), nan_at=3)
    assert straight.skipped_steps == 1 and straight.global_step == N
    first = build(5, scaler=DynamicScaler(), nan_at=3)
    first.fit()
    path = first.save_checkpoint(tmp_path / "c.safetensors")
    resumed = build(N, scaler=DynamicScaler(), seed=7, resume_from=path)
    resumed.fit()
    assert_identical(params(resumed.model), params(straight.model))
    assert resumed.skipped_steps == 1


class StatefulLoader:
    """A loader with state_dict/load_state_dict (as ember.data.DataLoader is getting):
    its own per-epoch order from an epoch counter, and its position in it."""

    def __init__(self, ds, batch_size=8):
        self.ds, self.batch_size = ds, batch_size
        self.epoch, self.consumed, self._resume_at = 0, 0, 0
        self.loaded = []

    def __len__(self):
        return -(-len(self.ds) // self.batch_size)

    def __iter__(self):
        order = np.random.default_rng(self.epoch).permutation(len(self.ds))
        start, self._resume_at = self._resume_at, 0
        self.consumed = start
        for b in range(start, len(self)):
            idx = order[b * self.batch_size:(b + 1) * self.batch_size].tolist()
            self.consumed = b + 1
            yield ember.data.default_collate([self.ds[i] for i in idx])
        self.epoch += 1
        self.consumed = 0

    def state_dict(self):
        return {"epoch": self.epoch, "consumed": self.consumed}

    def load_state_dict(self, state):
        self.loaded.append(state)
        self.epoch, self._resume_at = state["epoch"], state["consumed"]


def test_resume_uses_the_loaders_own_state(tmp_path):
    from .common import dataset

    def run(steps, **kw):
        trainer = build(steps, **kw)
        trainer.train_loader = StatefulLoader(dataset())
        trainer.fit()
        return trainer
    straight = run(N)
    first = run(5)
    path = first.save_checkpoint(tmp_path / "c.safetensors")
    assert read_checkpoint(path)["loader"] == {"epoch": 0, "consumed": 5}
    resumed = build(N, seed=3, resume_from=path)
    resumed.train_loader = StatefulLoader(dataset())
    resumed.fit()
    assert resumed.train_loader.loaded == [{"epoch": 0, "consumed": 5}]
    assert_identical(params(resumed.model), params(straight.model))


_CHILD = textwrap.dedent("""
    import os, sys, time
    sys.path.insert(0, {root!r})
    import ember
    from tests.train.common import build
    {patch}
    class Slow(ember.train.Callback):
        def on_step_end(self, trainer):
            time.sleep({sleep})
    ckpt = ember.train.ModelCheckpoint({dirpath!r}, every_n_steps={every}, keep_last_k=2)
    build({n}, callbacks=[ckpt, Slow()]).fit()
    print("finished")
""")


def _child(tmp_path, patch="", sleep=0.0, every=1):
    script = tmp_path / "child.py"
    script.write_text(_CHILD.format(root=ROOT, patch=textwrap.indent(patch, ""), sleep=sleep,
                                    dirpath=str(tmp_path / "ckpt"), every=every, n=N))
    return subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _resume_latest(tmp_path):
    resumed = build(N, seed=42, checkpoint_dir=tmp_path / "ckpt", resume_from="latest")
    resumed.fit()
    return resumed


def test_sigkill_then_resume_from_latest_is_bit_for_bit(tmp_path):
    child = _child(tmp_path, sleep=0.1)
    deadline = time.time() + 60
    while time.time() < deadline:
        steps = [int(p.rsplit("step=", 1)[1].split(".")[0])
                 for p in find_checkpoints(tmp_path / "ckpt")]
        if steps and max(steps) >= 4:
            break
        assert child.poll() is None, child.communicate()
        time.sleep(0.02)
    child.send_signal(signal.SIGKILL)
    child.wait()
    assert child.returncode == -signal.SIGKILL
    latest = read_checkpoint(latest_checkpoint(tmp_path / "ckpt"))
    assert 4 <= latest["loop"]["global_step"] < N
    resumed = _resume_latest(tmp_path)
    assert_identical(params(resumed.model), params(_straight().model))


def test_killed_mid_write_leaves_previous_checkpoint_loadable(tmp_path):
    patch = textwrap.dedent("""
        import signal, ember.serialization as s
        _writes = [0]
        _real = s._write_all
        def _write_all(f, data):
            _writes[0] += 1
            if _writes[0] == 3:  # the third checkpoint: half of it, then the process dies
                f.write(data[:len(data) // 2]); f.flush(); os.fsync(f.fileno())
                os.kill(os.getpid(), signal.SIGKILL)
            _real(f, data)
        s._write_all = _write_all
    """)
    child = _child(tmp_path, patch=patch, every=2)
    out, err = child.communicate(timeout=60)
    assert child.returncode == -signal.SIGKILL, err
    names = sorted(os.listdir(tmp_path / "ckpt"))
    assert any(n.endswith(".tmp") for n in names)  # the half-written file, never renamed
    assert [os.path.basename(p) for p in find_checkpoints(tmp_path / "ckpt")] == \
        ["epoch=0-step=2.safetensors", "epoch=0-step=4.safetensors"]
    assert read_checkpoint(latest_checkpoint(tmp_path / "ckpt"))["loop"]["global_step"] == 4
    resumed = _resume_latest(tmp_path)
    assert_identical(params(resumed.model), params(_straight().model))


def _emergency(tmp_path):
    paths = [p for p in find_checkpoints(tmp_path) if "emergency-" in p]
    assert len(paths) == 1, paths
    return paths[0]


def test_exception_writes_emergency_checkpoint_that_resumes_exactly(tmp_path):
    trainer = build(N, fail_at=9, checkpoint_dir=tmp_path)  # the 9th batch = step 8
    with pytest.raises(RuntimeError, match="boom at call 9") as info:
        trainer.fit()
    path = _emergency(tmp_path)
    assert any("emergency checkpoint written to" in n for n in info.value.__notes__)
    state = read_checkpoint(path)
    assert state["emergency"] and state["loop"]["global_step"] == 8
    assert state["loop"]["batch"] == 2  # the failed step's batch is not counted
    resumed = build(N, seed=5, resume_from=path)
    resumed.fit()
    assert_identical(params(resumed.model), params(_straight().model))


def test_sigint_is_held_to_the_step_boundary_and_checkpointed(tmp_path, sigint_default):
    class Interrupt(ember.train.Callback):
        def on_step_start(self, trainer):
            if trainer.global_step == 3:  # mid-step: held until the step completes
                signal.raise_signal(signal.SIGINT)  # (to this, the main, thread)
    trainer = build(N, checkpoint_dir=tmp_path, callbacks=[Interrupt()])
    with pytest.raises(KeyboardInterrupt):
        trainer.fit()
    assert trainer.global_step == 4
    state = read_checkpoint(_emergency(tmp_path))
    assert state["loop"]["global_step"] == 4
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    resumed = build(N, seed=5, resume_from=_emergency(tmp_path))
    resumed.fit()
    assert_identical(params(resumed.model), params(_straight().model))


def test_keyboard_interrupt_inside_a_step_resumes_exactly(tmp_path):
    class Raise(ember.train.Callback):
        def on_step_start(self, trainer):
            if trainer.global_step == 7:
                raise KeyboardInterrupt
    with pytest.raises(KeyboardInterrupt):
        build(N, checkpoint_dir=tmp_path, callbacks=[Raise()]).fit()
    resumed = build(N, seed=5, resume_from=_emergency(tmp_path))
    resumed.fit()
    assert_identical(params(resumed.model), params(_straight().model))


def test_checkpoint_is_safetensors_and_json_only(tmp_path):
    trainer = build(3)
    trainer.fit()
    path = trainer.save_checkpoint(tmp_path / "c.safetensors")
    with open(path, "rb") as f:
        assert b"\x80\x04" not in f.read(16)  # no pickle header
    from safetensors.numpy import load_file
    tensors = load_file(path)
    assert "model.0.weight" in tensors
    assert np.array_equal(tensors["model.0.weight"], trainer.model[0].weight.detach().numpy())


class PlainLoader:
    """A DataLoader seen through an iterable without state_dict: the Trainer replays the
    epoch's order from the epoch-start random states and skips the consumed batches."""

    def __init__(self, inner):
        self.inner, self.generator, self.sampler = inner, inner.generator, inner.sampler

    def __iter__(self):
        return iter(self.inner)

    def __len__(self):
        return len(self.inner)


@pytest.mark.parametrize("generator", [False, True])
def test_resume_replays_a_loader_without_state(tmp_path, generator):
    def run(steps, **kw):
        trainer = build(steps, generator=generator, **kw)
        trainer.train_loader = PlainLoader(trainer.train_loader)
        trainer.fit()
        return trainer
    straight = run(N)
    path = run(9).save_checkpoint(tmp_path / "c.safetensors")
    assert read_checkpoint(path)["loader"] is None
    resumed = run(N, seed=3, resume_from=path)
    assert_identical(params(resumed.model), params(straight.model))
    assert resumed.history.rows == straight.history.rows
