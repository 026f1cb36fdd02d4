"""DataLoader worker processes: the same batches for any number of workers, per-worker
seeding, IterableDataset sharding, shared memory, and failures (exceptions, killed
workers, timeouts, Ctrl-C, a dead parent) that raise quickly and leave nothing behind."""
import mmap
import multiprocessing
import os
import random
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import ember
from ember.data import (DataError, DataLoader, Dataset, IterableDataset, TensorDataset,
                        WorkerError, get_worker_info)
from ember.data._shared_memory import SHM_DIR

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def ember_segments() -> list:
    prefix = f"ember-{os.getpid()}-"
    return [n for n in os.listdir(SHM_DIR) if n.startswith(prefix)] \
        if os.path.isdir(SHM_DIR) else []


@pytest.fixture(autouse=True)
def no_leftovers():
    yield
    assert multiprocessing.active_children() == []
    assert ember_segments() == []


class Records(Dataset):
    """Samples of several kinds: an array, a number, a string, a nested dict."""

    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return {"x": np.full((3, 2), i, np.float32), "i": i, "name": f"s{i}",
                "nested": {"y": np.arange(4, dtype=np.int64) * i}}


def as_plain(batch):
    return {"x": batch["x"].tolist(), "i": batch["i"].tolist(), "name": list(batch["name"]),
            "y": batch["nested"]["y"].tolist()}


@pytest.mark.parametrize("manual_seed", [False, True])
def test_same_batches_with_0_1_2_workers(manual_seed):
    def epochs(num_workers):
        if manual_seed:
            ember.manual_seed(5)
        generator = None if manual_seed else ember.Generator().manual_seed(5)
        loader = DataLoader(Records(23), batch_size=4, shuffle=True, num_workers=num_workers,
                            generator=generator)
        return [[as_plain(b) for b in loader] for _ in range(2)]

    runs = [epochs(n) for n in (0, 1, 2)]
    assert runs[0] == runs[1] == runs[2]
    first, second = runs[0]
    assert len(first) == 6 and [len(b["i"]) for b in first] == [4, 4, 4, 4, 4, 3]
    order = [i for b in first for i in b["i"]]
    assert sorted(order) == list(range(23)) and order != list(range(23))
    assert [i for b in second for i in b["i"]] != order  # each epoch reshuffles
    assert first[0]["x"][0] == [[float(first[0]["i"][0])] * 2] * 3
    assert first[0]["name"] == [f"s{i}" for i in first[0]["i"]]


def test_batches_are_mapped_from_shared_memory_and_writable():
    data = np.arange(64 * 100, dtype=np.float32).reshape(64, 100)
    loader = DataLoader(TensorDataset(ember.tensor(data)), batch_size=16, num_workers=2)
    batches = [b[0] for b in loader]
    np.testing.assert_array_equal(np.concatenate([b.numpy() for b in batches]), data)
    owner = batches[0]._data
    while owner is not None and not isinstance(owner, mmap.mmap):
        owner = owner.obj if isinstance(owner, memoryview) else getattr(owner, "base", None)
    assert isinstance(owner, mmap.mmap)  # a mapping of the worker's segment, not a copy
    batches[0].add_(1.0)
    assert batches[0][0, 0].item() == 1.0
    assert ember_segments() == []  # names are removed as soon as they are mapped


class SeedProbe(Dataset):
    def __len__(self):
        return 8

    def __getitem__(self, i):
        info = get_worker_info()
        return np.array([info.id, info.seed % 2 ** 62, ember.randint(0, 10 ** 9, ()).item(),
                         random.randrange(10 ** 9), np.random.randint(10 ** 9),
                         info.num_workers, isinstance(info.dataset, SeedProbe)], np.int64)


def probe(seed, epochs=1):
    loader = DataLoader(SeedProbe(), batch_size=2, num_workers=2,
                        generator=ember.Generator().manual_seed(seed))
    return [np.concatenate([b.numpy() for b in loader]) for _ in range(epochs)]


def test_workers_are_seeded_distinctly_and_reproducibly():
    assert get_worker_info() is None
    (rows, next_epoch), (again, _) = probe(0, epochs=2), probe(0, epochs=2)
    np.testing.assert_array_equal(rows, again)
    worker = rows[:, 0]
    assert worker.tolist() == [0, 0, 1, 1, 0, 0, 1, 1]  # batch s goes to worker s % 2
    seed0, seed1 = rows[worker == 0, 1][0], rows[worker == 1, 1][0]
    assert seed1 == seed0 + 1  # seed = base_seed + worker id
    for column in (2, 3, 4):  # ember, random and NumPy draw differently in each worker
        assert rows[0, column] != rows[2, column]
    assert (rows[:, 5] == 2).all() and (rows[:, 6] == 1).all()
    assert next_epoch[0, 1] != seed0  # a new base seed each epoch
    assert probe(1)[0][0, 1] != seed0


def test_worker_init_fn_runs_in_each_worker_after_seeding():
    class Tagged(Dataset):
        def __len__(self):
            return 4

        def __getitem__(self, i):
            return os.environ.get("EMBER_TEST_TAG", "unset")

    def init(worker_id):
        os.environ["EMBER_TEST_TAG"] = f"w{worker_id}-{get_worker_info().seed % 1000}"

    loader = DataLoader(Tagged(), batch_size=1, num_workers=2, worker_init_fn=init,
                        generator=ember.Generator().manual_seed(0))
    tags = [b[0] for b in loader]
    assert [t.split("-")[0] for t in tags] == ["w0", "w1", "w0", "w1"]
    assert int(tags[1].split("-")[1]) == (int(tags[0].split("-")[1]) + 1) % 1000
    assert "EMBER_TEST_TAG" not in os.environ


class Shards(IterableDataset):
    def __init__(self, n, split=True):
        self.n, self.split = n, split

    def __iter__(self):
        info = get_worker_info()
        if info is None or not self.split:
            return iter(range(self.n))
        return iter(range(info.id, self.n, info.num_workers))


def test_iterable_dataset_is_split_through_get_worker_info():
    loader = DataLoader(Shards(11), batch_size=2, num_workers=2)
    batches = [b.tolist() for b in loader]
    # worker 0 reads 0,2,4,..; worker 1 reads 1,3,...; batches alternate between them
    assert batches == [[0, 2], [1, 3], [4, 6], [5, 7], [8, 10], [9]]
    assert [b.tolist() for b in loader] == batches
    unsplit = [i for b in DataLoader(Shards(5, split=False), batch_size=2, num_workers=2)
               for i in b.tolist()]
    assert sorted(unsplit) == sorted(list(range(5)) * 2)  # each worker holds a copy


def test_persistent_workers_keep_their_processes_and_batches():
    class Pids(Dataset):
        def __len__(self):
            return 6

        def __getitem__(self, i):
            return np.array([i, os.getpid()])

    loader = DataLoader(Pids(), batch_size=2, num_workers=2, persistent_workers=True,
                        shuffle=True, generator=ember.Generator().manual_seed(1))
    plain = DataLoader(Pids(), batch_size=2, shuffle=True,
                       generator=ember.Generator().manual_seed(1))
    first, second = [b.numpy() for b in loader], [b.numpy() for b in loader]
    want = [[b.numpy()[:, 0].tolist() for b in plain] for _ in range(2)]
    assert [b[:, 0].tolist() for b in first] == want[0]
    assert [b[:, 0].tolist() for b in second] == want[1]
    pids = {int(p) for b in first for p in b[:, 1]}
    assert len(pids) == 2 and pids == {int(p) for b in second for p in b[:, 1]}
    assert os.getpid() not in pids
    assert len(multiprocessing.active_children()) == 2
    loader._persistent_pool.shutdown()


def test_in_order_false_gives_every_batch():
    loader = DataLoader(Records(10), batch_size=3, num_workers=2, in_order=False)
    assert sorted(i for b in loader for i in b["i"].tolist()) == list(range(10))


class Failing(Dataset):
    def __len__(self):
        return 12

    def __getitem__(self, i):
        if i == 7:
            raise ValueError(f"sample {i} is broken")
        return i


def test_worker_exception_shows_the_worker_traceback():
    loader = DataLoader(Failing(), batch_size=2, num_workers=2)
    got = []
    with pytest.raises(WorkerError) as caught:
        for batch in loader:
            got.append(batch.tolist())
    text = str(caught.value)
    assert got == [[0, 1], [2, 3], [4, 5]]  # the batches before the failing one
    assert "Traceback (most recent call last)" in text
    assert "ValueError: sample 7 is broken" in text
    assert "in __getitem__" in text and "DataLoader worker 1" in text
    assert isinstance(caught.value, RuntimeError)


def test_worker_init_fn_exception_surfaces():
    def init(worker_id):
        raise KeyError(f"no config for worker {worker_id}")

    with pytest.raises(WorkerError, match="(?s)while starting.*KeyError: 'no config"):
        list(DataLoader(range(4), num_workers=1, worker_init_fn=init))


class Dies(Dataset):
    def __init__(self, how):
        self.how = how

    def __len__(self):
        return 8

    def __getitem__(self, i):
        if i == 5 and get_worker_info() is not None:
            if self.how == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            import ctypes
            import faulthandler
            faulthandler.disable()  # pytest's handler would print the worker's stack
            ctypes.string_at(0)  # a segfault
        return i


@pytest.mark.parametrize("how, signame", [("kill", "SIGKILL"), ("segfault", "SIGSEGV")])
def test_dead_worker_raises_quickly(how, signame):
    loader = DataLoader(Dies(how), batch_size=1, num_workers=2)
    start = time.monotonic()
    with pytest.raises(WorkerError, match=f"worker 1 .* killed by signal {signame}"):
        for _ in loader:
            pass
    assert time.monotonic() - start < 5


def test_timeout_raises_instead_of_waiting():
    class Slow(Dataset):
        def __len__(self):
            return 4

        def __getitem__(self, i):
            if i == 2:
                time.sleep(3)
            return i

    loader = DataLoader(Slow(), batch_size=1, num_workers=1, timeout=0.3)
    it = iter(loader)
    assert next(it).tolist() == [0] and next(it).tolist() == [1]
    start = time.monotonic()
    with pytest.raises(WorkerError, match="timed out after 0.3 seconds"):
        next(it)
    assert time.monotonic() - start < 2.5


def test_early_break_and_garbage_collection_stop_workers():
    loader = DataLoader(Records(40), batch_size=2, num_workers=2)
    for i, _ in enumerate(loader):
        if i == 1:
            break
    assert multiprocessing.active_children() == []
    it = iter(loader)
    next(it)
    assert len(multiprocessing.active_children()) == 2
    del it
    assert multiprocessing.active_children() == []


def test_keyboard_interrupt_stops_workers():
    class Slow(Dataset):
        def __len__(self):
            return 100

        def __getitem__(self, i):
            time.sleep(0.05)
            return i

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGALRM, interrupt)
    seen = 0
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.4)
        with pytest.raises(KeyboardInterrupt):
            for _ in DataLoader(Slow(), batch_size=1, num_workers=2):
                seen += 1
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert 0 < seen < 100
    assert multiprocessing.active_children() == []


def test_workers_exit_when_the_parent_dies(tmp_path):
    script = textwrap.dedent(f"""
        import os, sys, time
        sys.path.insert(0, {REPO!r})
        import ember
        class Slow(ember.data.Dataset):
            def __len__(self): return 100
            def __getitem__(self, i): time.sleep(0.05); return i
        it = iter(ember.data.DataLoader(Slow(), num_workers=2))
        next(it)
        import multiprocessing
        print(" ".join(str(p.pid) for p in multiprocessing.active_children()), flush=True)
        os._exit(0)  # no cleanup: the workers must notice on their own
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=30)
    pids = [int(p) for p in out.stdout.split()]
    assert len(pids) == 2, out.stderr
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and any(os.path.exists(f"/proc/{p}") for p in pids):
        time.sleep(0.05)
    assert not any(os.path.exists(f"/proc/{p}") and "Z" not in _proc_state(p) for p in pids)


def _proc_state(pid) -> str:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0]
    except OSError:
        return "Z"


def test_spawn_context_with_a_picklable_dataset():
    data = [np.full(3, i, np.int32) for i in range(6)]
    loader = DataLoader(data, batch_size=4, num_workers=1, multiprocessing_context="spawn")
    assert [b[:, 0].tolist() for b in loader] == [[0, 1, 2, 3], [4, 5]]


def test_spawn_context_explains_unpicklable_datasets():
    loader = DataLoader(TensorDataset(ember.arange(4)), num_workers=1,
                        multiprocessing_context="spawn")
    with pytest.raises(DataError, match="could not start worker 0 .*picklable"):
        iter(loader)


def test_bad_multiprocessing_context():
    with pytest.raises(DataError, match="not a start method"):
        iter(DataLoader(range(4), num_workers=1, multiprocessing_context="teleport"))


def test_a_newer_iterator_takes_over_persistent_workers():
    loader = DataLoader(Records(12), batch_size=2, num_workers=2, persistent_workers=True)
    old = iter(loader)
    next(old)
    new = iter(loader)
    with pytest.raises(DataError, match="taken over by a newer iter"):
        next(old)
    assert [b["i"].tolist() for b in new] == [[i, i + 1] for i in range(0, 12, 2)]
    loader._persistent_pool.shutdown()
