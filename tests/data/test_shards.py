"""ShardWriter / ShardedDataset: round trips over many shards, streaming through memory
maps, deterministic shuffling, splitting across workers, and hostile or broken indexes."""
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import ember
from ember.data import (DataError, DataLoader, ShardedDataset, ShardWriter)

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def sample(i):
    return {"x": np.full((2, 3), i, np.float32), "y": np.int64(i)}


def write(directory, n=23, shard_size=5):
    with ShardWriter(directory, shard_size=shard_size) as writer:
        for i in range(n):
            writer.write(sample(i))
    return directory


def ys(samples):
    return [int(s["y"]) for s in samples]


def test_round_trip_over_many_shards(tmp_path):
    ds = ShardedDataset(write(tmp_path / "d"))
    assert len(ds) == 23 and ds.num_shards == 5
    got = list(ds)
    assert ys(got) == list(range(23))
    np.testing.assert_array_equal(got[17]["x"], np.full((2, 3), 17, np.float32))
    assert got[17]["x"].dtype == np.float32 and got[17]["y"].dtype == np.int64
    assert int(ds[12]["y"]) == 12 and int(ds[-1]["y"]) == 22
    with pytest.raises(IndexError, match="index 23 is out of range"):
        ds[23]
    index = json.loads((tmp_path / "d" / "index.json").read_text())
    assert [s["count"] for s in index["shards"]] == [5, 5, 5, 5, 3]
    assert index["fields"]["x"]["shape"] == [2, 3]


def test_tuples_and_tensors_round_trip(tmp_path):
    with ShardWriter(tmp_path, shard_size=2) as writer:
        for i in range(3):
            writer.write((ember.tensor([float(i), 2.0 * i]), i % 2 == 0))
    ds = ShardedDataset(tmp_path)
    assert [(s[0].tolist(), bool(s[1])) for s in ds] == [
        ([0.0, 0.0], True), ([1.0, 2.0], False), ([2.0, 4.0], True)]


def test_streaming_reads_through_memory_maps_one_shard_at_a_time(tmp_path, monkeypatch):
    ds = ShardedDataset(write(tmp_path, n=40, shard_size=10))
    loads = []
    real_load = np.load

    def spy(path, *args, **kwargs):
        loads.append((os.path.basename(path), kwargs))
        return real_load(path, *args, **kwargs)

    monkeypatch.setattr(np, "load", spy)
    stream = iter(ds)
    first = [next(stream) for _ in range(3)]
    assert ys(first) == [0, 1, 2]
    assert len(loads) == 2  # one shard (two fields) opened, not all four
    assert all(kw == {"mmap_mode": "r", "allow_pickle": False} for _, kw in loads)
    assert isinstance(ds._open[0]["x"], np.memmap)
    rest = list(stream)
    assert len(rest) == 37 and len(loads) == 8
    assert ds._open == {}  # each shard's mapping let go once read


def test_shuffle_is_deterministic_under_a_seed(tmp_path):
    write(tmp_path, n=30, shard_size=4)
    order = ys(ShardedDataset(tmp_path, shuffle=True, buffer_size=5, seed=3))
    assert sorted(order) == list(range(30)) and order != list(range(30))
    assert ys(ShardedDataset(tmp_path, shuffle=True, buffer_size=5, seed=3)) == order
    assert ys(ShardedDataset(tmp_path, shuffle=True, buffer_size=5, seed=4)) != order
    ds = ShardedDataset(tmp_path, shuffle=True, buffer_size=5, seed=3)
    ds.set_epoch(1)
    assert ys(ds) != order
    ember.manual_seed(0)
    unseeded = ShardedDataset(tmp_path, shuffle=True, buffer_size=5)
    a, b = ys(unseeded), ys(unseeded)
    ember.manual_seed(0)
    assert [ys(unseeded), ys(unseeded)] == [a, b] and a != b


def test_shuffle_buffer_bounds_how_far_a_sample_moves(tmp_path):
    write(tmp_path, n=30, shard_size=30)  # one shard: only the buffer shuffles
    order = ys(ShardedDataset(tmp_path, shuffle=True, buffer_size=4, seed=0))
    # a sample leaves the buffer at the earliest when buffer_size newer ones came in
    assert all(position >= y - 4 for position, y in enumerate(order))


@pytest.mark.parametrize("shuffle", [False, True])
def test_workers_split_the_shards(tmp_path, shuffle):
    write(tmp_path, n=23, shard_size=5)
    ds = ShardedDataset(tmp_path, shuffle=shuffle, buffer_size=3)
    loader = DataLoader(ds, batch_size=4, num_workers=2,
                        generator=ember.Generator().manual_seed(0))
    first = [y for b in loader for y in b["y"].tolist()]
    assert sorted(first) == list(range(23))  # every sample once, none twice
    again = DataLoader(ds, batch_size=4, num_workers=2,
                       generator=ember.Generator().manual_seed(0))
    assert [y for b in again for y in b["y"].tolist()] == first


def test_map_style_view_in_a_shuffling_loader(tmp_path):
    ds = ShardedDataset(write(tmp_path))
    loader = DataLoader(ds.map_style(), batch_size=5, shuffle=True,
                        generator=ember.Generator().manual_seed(0))
    batches = list(loader)
    assert sorted(y for b in batches for y in b["y"].tolist()) == list(range(23))
    assert batches[0]["x"].shape == (5, 2, 3)


def test_writer_rejects_inconsistent_samples(tmp_path):
    writer = ShardWriter(tmp_path)
    writer.write(sample(0))
    with pytest.raises(DataError, match="field 'x' has shape \\(3,\\).*expected shape "
                                        "\\(2, 3\\)"):
        writer.write({"x": np.zeros(3, np.float32), "y": np.int64(1)})
    with pytest.raises(DataError, match="has fields \\['x'\\]"):
        writer.write({"x": np.zeros((2, 3), np.float32)})
    with pytest.raises(DataError, match="dtype object.*without pickle"):
        ShardWriter(tmp_path / "o").write({"x": np.array([{}], dtype=object)})
    with pytest.raises(DataError, match="shard_size should be a positive integer"):
        ShardWriter(tmp_path, shard_size=0)


def test_a_failed_write_leaves_the_previous_dataset(tmp_path):
    write(tmp_path, n=6, shard_size=4)
    before = sorted(os.listdir(tmp_path))
    with pytest.raises(RuntimeError):
        with ShardWriter(tmp_path, shard_size=2) as writer:
            for i in range(5):
                writer.write(sample(100 + i))
            raise RuntimeError("stop")
    assert sorted(os.listdir(tmp_path)) == before
    assert ys(ShardedDataset(tmp_path)) == list(range(6))
    write(tmp_path, n=3, shard_size=2)  # a finished rewrite replaces the old shards
    assert ys(ShardedDataset(tmp_path)) == [0, 1, 2]
    assert len([n for n in os.listdir(tmp_path) if n.endswith(".npy")]) == 4


def test_a_killed_writer_leaves_no_index(tmp_path):
    script = textwrap.dedent(f"""
        import os, signal, sys
        sys.path.insert(0, {REPO!r})
        import numpy as np
        from ember.data import ShardWriter
        writer = ShardWriter({str(tmp_path)!r}, shard_size=2)
        for i in range(5):
            writer.write({{"x": np.zeros(3)}})
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=30)
    assert result.returncode == -9
    assert not (tmp_path / "index.json").exists()
    assert len([n for n in os.listdir(tmp_path) if n.endswith(".npy")]) == 2
    with pytest.raises(DataError, match="index.json does not exist"):
        ShardedDataset(tmp_path)


def edit_index(directory, change):
    path = directory / "index.json"
    index = json.loads(path.read_text())
    change(index)
    path.write_text(json.dumps(index))


@pytest.mark.parametrize("change, message", [
    (lambda ix: ix["shards"][0]["files"].update(x="../../etc/passwd.npy"),
     "names file '../../etc/passwd.npy'; expected a plain .npy file name"),
    (lambda ix: ix["shards"][0]["files"].update(x="/tmp/evil.npy"), "no paths"),
    (lambda ix: ix["fields"]["x"].update(dtype="|O"), "dtype object; expected a numeric"),
    (lambda ix: ix["fields"]["x"].update(shape=[2, -3]), "shape of non-negative integers"),
    (lambda ix: ix["shards"][0].update(count=0), "count should be a positive integer"),
    (lambda ix: ix.update(num_samples=99), "num_samples is 99 but the shards hold 23"),
    (lambda ix: ix.update(version=7), "version 7 is not supported"),
    (lambda ix: ix["shards"][1]["files"].pop("y"), "one file per field"),
])
def test_hostile_or_broken_index_is_rejected(tmp_path, change, message):
    write(tmp_path)
    edit_index(tmp_path, change)
    with pytest.raises(DataError, match=message):
        ShardedDataset(tmp_path)


def test_bad_json_and_bad_shards_are_rejected(tmp_path):
    write(tmp_path)
    ds_dir = tmp_path
    edit_index(ds_dir, lambda ix: ix["fields"]["x"].update(shape=[3, 2]))
    with pytest.raises(DataError, match="holds shape \\(5, 2, 3\\).*expects shape "
                                        "\\(5, 3, 2\\)"):
        list(ShardedDataset(ds_dir))
    write(ds_dir)
    index = json.loads((ds_dir / "index.json").read_text())
    target = ds_dir / index["shards"][0]["files"]["y"]
    np.save(target, np.array([{"a": 1}] * 5, dtype=object), allow_pickle=True)
    with pytest.raises(DataError, match="not a readable .npy file of plain data"):
        ShardedDataset(ds_dir)[0]
    os.remove(target)
    with pytest.raises(DataError, match="is missing"):
        ShardedDataset(ds_dir)[0]
    (ds_dir / "index.json").write_text("{not json")
    with pytest.raises(DataError, match="is not valid JSON"):
        ShardedDataset(ds_dir)
