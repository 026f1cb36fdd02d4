"""DataLoader.state_dict / load_state_dict: a run stopped in the middle of an epoch and
resumed in a fresh loader sees exactly the batches (and, later, the epochs) that the
uninterrupted run saw."""
import json
import multiprocessing

import numpy as np
import pytest

import ember
from ember.data import (DataError, DataLoader, IterableDataset, RandomSampler,
                        TensorDataset, get_worker_info)


def make_loader(num_workers=0, seed=7, **kwargs):
    ds = TensorDataset(ember.tensor(np.arange(26 * 2, dtype=np.float32).reshape(26, 2)),
                       ember.arange(26))
    generator = None if seed is None else ember.Generator().manual_seed(seed)
    kwargs.setdefault("shuffle", True)
    return DataLoader(ds, batch_size=4, num_workers=num_workers, generator=generator,
                      **kwargs)


def ids(batch):
    return batch[1].tolist()


def json_round_trip(state):
    return json.loads(json.dumps(state))


@pytest.mark.parametrize("num_workers", [0, 2])
@pytest.mark.parametrize("stop_after", [0, 3, 7])
def test_resume_mid_epoch_gives_the_remaining_batches(num_workers, stop_after):
    straight = make_loader(num_workers)
    want = [[ids(b) for b in straight] for _ in range(3)]
    assert len(want[0]) == 7 and want[0] != want[1]

    interrupted = make_loader(num_workers)
    it = iter(interrupted)
    seen = [ids(next(it)) for _ in range(stop_after)]
    state = json_round_trip(interrupted.state_dict())
    del it
    assert seen == want[0][:stop_after]
    assert state["batches_yielded"] == stop_after and state["epoch"] == 1

    resumed = make_loader(num_workers, seed=12345)  # the state overrides the seed
    resumed.load_state_dict(state)
    assert resumed.state_dict() == state
    got = [[ids(b) for b in resumed] for _ in range(3)]
    assert got[0] == want[0][stop_after:]
    assert got[1:] == want[1:]
    assert multiprocessing.active_children() == []


def test_resume_between_epochs_continues_with_the_next_epoch():
    straight = make_loader()
    want = [[ids(b) for b in straight] for _ in range(3)]
    first = make_loader()
    assert [ids(b) for b in first] == want[0]
    state = json_round_trip(first.state_dict())
    assert state["epoch_finished"] is True and state["batches_yielded"] == 7
    resumed = make_loader(seed=1)
    resumed.load_state_dict(state)
    assert [[ids(b) for b in resumed] for _ in range(2)] == want[1:]


def test_state_of_a_fresh_loader_starts_from_scratch():
    state = json_round_trip(make_loader().state_dict())
    assert state["epoch"] == 0 and state["epoch_start_rng"] is None
    resumed = make_loader(seed=99)
    resumed.load_state_dict(state)
    assert [ids(b) for b in resumed] == [ids(b) for b in make_loader()]


@pytest.mark.parametrize("num_workers", [0, 2])
def test_resume_with_the_default_generator_as_a_trainer_does(num_workers):
    """No loader generator: shuffling draws from ember's default generator, which the
    model draws from too; the Trainer restores it, and the loader must not disturb it."""
    def train(loader, epochs, stop=None):
        log = []
        for epoch in range(epochs):
            for step, batch in enumerate(loader):
                log.append((ids(batch), round(ember.rand(()).item(), 12)))  # "dropout"
                if stop == (epoch, step):
                    return log, loader.state_dict(), ember.get_rng_state()
        return log, None, None

    ember.manual_seed(3)
    want, _, _ = train(make_loader(num_workers, seed=None), 2)
    ember.manual_seed(3)
    before, state, rng = train(make_loader(num_workers, seed=None), 2, stop=(0, 2))
    assert before == want[:3]
    ember.manual_seed(1000)
    resumed = make_loader(num_workers, seed=None)
    resumed.load_state_dict(json_round_trip(state))
    ember.set_rng_state(rng)
    after, _, _ = train(resumed, 2)
    assert after[:4] == want[3:7]  # the rest of the interrupted epoch
    # then the next epoch, drawn from the default generator as in the straight run
    assert after[4:11] == want[7:14]


def test_generators_restored_after_load_state_dict_do_not_matter():
    """A Trainer may restore the loader's generators itself after load_state_dict (to
    their mid-epoch states); the resumed epoch must still be the interrupted one."""
    straight = make_loader()
    want = [[ids(b) for b in straight] for _ in range(2)]
    loader = make_loader()
    it = iter(loader)
    next(it), next(it)
    state, mid_epoch = loader.state_dict(), loader.generator.get_state()
    resumed = make_loader(seed=5)
    resumed.load_state_dict(state)
    resumed.generator.set_state(mid_epoch)
    assert [[ids(b) for b in resumed] for _ in range(2)] == [want[0][2:], want[1]]


def test_resume_with_an_explicit_sampler_generator():
    def loader(seed):
        ds = TensorDataset(ember.arange(10))
        sampler = RandomSampler(ds, generator=ember.Generator().manual_seed(seed))
        return DataLoader(ds, batch_size=3, sampler=sampler)

    straight = loader(4)
    want = [[b[0].tolist() for b in straight] for _ in range(2)]
    first = loader(4)
    it = iter(first)
    next(it)
    state = json_round_trip(first.state_dict())
    assert list(state["generators"]) == ["sampler"]
    resumed = loader(0)
    resumed.load_state_dict(state)
    assert [[b[0].tolist() for b in resumed] for _ in range(2)] == [want[0][1:], want[1]]


class Stream(IterableDataset):
    def __iter__(self):
        info = get_worker_info()
        start, step = (0, 1) if info is None else (info.id, info.num_workers)
        return iter(range(start, 15, step))


@pytest.mark.parametrize("num_workers", [0, 2])
def test_resume_an_iterable_dataset(num_workers):
    want = [b.tolist() for b in DataLoader(Stream(), batch_size=2, num_workers=num_workers)]
    loader = DataLoader(Stream(), batch_size=2, num_workers=num_workers)
    it = iter(loader)
    assert [next(it).tolist() for _ in range(3)] == want[:3]
    state = json_round_trip(loader.state_dict())
    del it
    resumed = DataLoader(Stream(), batch_size=2, num_workers=num_workers)
    resumed.load_state_dict(state)
    assert [b.tolist() for b in resumed] == want[3:]
    assert len(want) == 8


def test_resume_with_persistent_workers():
    straight = make_loader(2, persistent_workers=True)
    want = [[ids(b) for b in straight] for _ in range(2)]
    loader = make_loader(2, persistent_workers=True)
    it = iter(loader)
    next(it)
    state = loader.state_dict()
    loader.load_state_dict(state)  # the same loader, its workers restarted
    assert [[ids(b) for b in loader] for _ in range(2)] == [want[0][1:], want[1]]
    for held in (straight, loader):
        held._persistent_pool.shutdown()
    assert multiprocessing.active_children() == []


def test_unordered_workers_cannot_checkpoint_mid_epoch():
    loader = make_loader(2, in_order=False)
    it = iter(loader)
    next(it)
    with pytest.raises(DataError, match="only defined with in_order=True"):
        loader.state_dict()
    del it


@pytest.mark.parametrize("change, message", [
    (lambda s: s.pop("epoch"), "missing \\['epoch'\\]"),
    (lambda s: s.update(version=9), "version 9 is not supported"),
    (lambda s: s.update(batches_yielded=-1), "batches_yielded should be a non-negative"),
    (lambda s: s.update(epoch_finished="no"), "epoch_finished should be a bool"),
    (lambda s: s.update(generators={}), "holds generators \\[\\] but this loader has "
                                        "\\['generator'\\]"),
    (lambda s: s["epoch_start_rng"].pop("default"), "epoch_start_rng should hold"),
    (lambda s: s["epoch_start_rng"]["generator"].pop("bit_generator"),
     "generator state is malformed"),
])
def test_load_state_dict_rejects_bad_states(change, message):
    loader = make_loader()
    it = iter(loader)
    next(it)
    state = json_round_trip(loader.state_dict())
    change(state)
    with pytest.raises(DataError, match=message):
        make_loader().load_state_dict(state)
    with pytest.raises(DataError, match="expected the dict"):
        make_loader().load_state_dict([1, 2])


class Augmented(ember.data.Dataset):
    """Samples with random augmentation from the three global generators."""

    def __len__(self):
        return 26

    def __getitem__(self, i):
        import random
        noise = ember.rand(2) + float(np.random.rand()) + random.random()
        return noise + i, i


def augmented_loader(num_workers):
    return DataLoader(Augmented(), batch_size=4, shuffle=True, num_workers=num_workers,
                      generator=ember.Generator().manual_seed(3))


def test_random_augmentation_is_the_same_for_any_number_of_workers():
    ember.manual_seed(0)
    runs = {}
    for n in (0, 1, 2):
        loader = augmented_loader(n)
        runs[n] = [[b[0].numpy().copy() for b in loader] for _ in range(2)]
    for n in (1, 2):
        for epoch_a, epoch_b in zip(runs[0], runs[n]):
            for a, b in zip(epoch_a, epoch_b):
                np.testing.assert_array_equal(a, b)
    assert not np.array_equal(runs[0][0][0], runs[0][1][0])  # epochs differ


@pytest.mark.parametrize("num_workers", [0, 2])
def test_resume_with_random_augmentation_in_workers_is_exact(num_workers):
    straight = [b[0].numpy().copy() for b in augmented_loader(num_workers)]
    interrupted = augmented_loader(num_workers)
    it = iter(interrupted)
    [next(it) for _ in range(3)]
    state = json_round_trip(interrupted.state_dict())
    del it
    resumed = augmented_loader(num_workers)
    resumed.load_state_dict(state)
    rest = [b[0].numpy() for b in resumed]
    assert len(rest) == len(straight) - 3
    for a, b in zip(rest, straight[3:]):
        np.testing.assert_array_equal(a, b)


def test_loading_in_the_main_process_leaves_its_generators_alone():
    import random
    ember.manual_seed(5)
    np.random.seed(5)
    random.seed(5)
    list(augmented_loader(0))
    after = (ember.rand(1).item(), np.random.rand(), random.random())
    # (the loader has its own generator: the epoch draws nothing from the default one)
    ember.manual_seed(5)
    np.random.seed(5)
    random.seed(5)
    assert after == (ember.rand(1).item(), np.random.rand(), random.random())
