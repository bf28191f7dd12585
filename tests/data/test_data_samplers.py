"""The samplers against torch 2.13's where their order is not random (sequential, batches,
DistributedSampler without shuffling, its padding and cut), and the random ones for their
properties: permutations, replacement counts, the same order from the same generator state, a
new order per pass, disjoint covering shards; argument errors as torch's."""
import collections

import numpy as np
import pytest

import onemodel as om
from onemodel.utils.data import (
    BatchSampler,
    DistributedSampler,
    RandomSampler,
    Sampler,
    SequentialSampler,
    SubsetRandomSampler,
    WeightedRandomSampler,
)
from onemodel.utils.data.distributed import DistributedSampler as FromModule
from onemodel.utils.data.sampler import BatchSampler as BatchFromModule

torch = pytest.importorskip("torch")
tud = torch.utils.data


def test_module_paths_and_the_base_class():
    assert FromModule is DistributedSampler and BatchFromModule is BatchSampler
    assert all(issubclass(c, Sampler) for c in (SequentialSampler, RandomSampler, BatchSampler,
                                                 SubsetRandomSampler, WeightedRandomSampler,
                                                 DistributedSampler))
    with pytest.raises(NotImplementedError):
        iter(Sampler())


@pytest.mark.parametrize("n", [0, 1, 7, 10])
def test_sequential_sampler_is_torchs(n):
    assert list(SequentialSampler(range(n))) == list(tud.SequentialSampler(range(n)))
    assert len(SequentialSampler(range(n))) == n


@pytest.mark.parametrize("n, size, drop_last", [(10, 3, False), (10, 3, True), (9, 3, True),
                                                (2, 5, False), (2, 5, True), (0, 2, False)])
def test_batch_sampler_is_torchs(n, size, drop_last):
    for inner in (range(n), [4 * i for i in range(n)]):
        ours = BatchSampler(inner, size, drop_last)
        theirs = tud.BatchSampler(inner, size, drop_last)
        assert list(ours) == list(theirs) and len(ours) == len(theirs)


@pytest.mark.parametrize("args", [(range(4), 0, False), (range(4), 2.0, False),
                                  (range(4), True, False), (range(4), 2, 1)])
def test_batch_sampler_errors_as_torchs(args):
    with pytest.raises(ValueError) as theirs:
        tud.BatchSampler(*args)
    with pytest.raises(ValueError, match="BatchSampler: ") as ours:
        BatchSampler(*args)
    assert str(theirs.value).split(",")[0] in str(ours.value)


def test_random_sampler_is_a_permutation_the_same_from_the_same_state_and_new_per_pass():
    sampler = RandomSampler(range(50), generator=om.Generator(3))
    first, second = list(sampler), list(sampler)
    assert sorted(first) == sorted(second) == list(range(50)) and first != second
    assert list(RandomSampler(range(50), generator=om.Generator(3))) == first
    # Its draws are om.randperm's from the generator.
    assert first == om.randperm(50, generator=om.Generator(3)).tolist()
    # Without a generator, each pass takes a fresh seed from the default generator.
    om.manual_seed(11)
    a = list(RandomSampler(range(20)))
    om.manual_seed(11)
    assert list(RandomSampler(range(20))) == a
    assert list(RandomSampler(range(20))) != a and len(RandomSampler(range(20))) == 20


def test_random_sampler_more_samples_than_examples_repeats_whole_permutations():
    drawn = list(RandomSampler(range(6), num_samples=15, generator=om.Generator(0)))
    assert len(drawn) == 15
    assert sorted(drawn[:6]) == sorted(drawn[6:12]) == list(range(6))
    assert len(set(drawn[12:])) == 3
    assert len(RandomSampler(range(6), num_samples=15)) == 15


def test_random_sampler_with_replacement_draws_uniformly():
    n, count = 5, 20000
    drawn = list(RandomSampler(range(n), replacement=True, num_samples=count,
                               generator=om.Generator(1)))
    assert len(drawn) == count and set(drawn) == set(range(n))
    freq = np.bincount(drawn, minlength=n) / count
    assert np.all(np.abs(freq - 1 / n) < 0.02)
    assert drawn == om.randint(0, n, (count,), generator=om.Generator(1)).tolist()
    assert len(list(RandomSampler(range(3), replacement=True, num_samples=10))) == 10


@pytest.mark.parametrize("kwargs, error", [(dict(replacement=1), TypeError),
                                           (dict(num_samples=0), ValueError),
                                           (dict(num_samples=-2), ValueError),
                                           (dict(num_samples=2.5), ValueError)])
def test_random_sampler_errors_as_torchs(kwargs, error):
    with pytest.raises(error):
        tud.RandomSampler(range(4), **kwargs)
    name = next(iter(kwargs))
    with pytest.raises(error, match=f"RandomSampler: {name} should be a"):
        RandomSampler(range(4), **kwargs)
    with pytest.raises(TypeError, match="generator must be an onemodel.Generator"):
        RandomSampler(range(4), generator=np.random.default_rng(0))


def test_subset_random_sampler_permutes_its_indices():
    indices = [10, 3, 7, 22, 5]
    sampler = SubsetRandomSampler(indices, generator=om.Generator(4))
    first = list(sampler)
    assert sorted(first) == sorted(indices) and len(sampler) == 5
    order = om.randperm(5, generator=om.Generator(4)).tolist()
    assert first == [indices[i] for i in order]
    assert list(sampler) != first  # the generator has moved on


def test_weighted_random_sampler_follows_the_weights():
    weights = [0.0, 1.0, 3.0, 0.0, 4.0]
    count = 16000
    drawn = list(WeightedRandomSampler(weights, count, generator=om.Generator(2)))
    assert len(drawn) == count and set(drawn) == {1, 2, 4}
    freq = np.bincount(drawn, minlength=5) / count
    assert np.all(np.abs(freq - np.array(weights) / 8) < 0.02)
    without = list(WeightedRandomSampler(weights, 3, replacement=False,
                                         generator=om.Generator(2)))
    assert sorted(without) == [1, 2, 4]
    assert list(WeightedRandomSampler(weights, 50, generator=om.Generator(9))) == list(
        WeightedRandomSampler(np.array(weights), 50, generator=om.Generator(9)))


@pytest.mark.parametrize("args, kwargs", [(([1.0, 2.0], 0), {}), (([1.0, 2.0], 2), {
    "replacement": 1}), (([[1.0, 2.0]], 2), {})])
def test_weighted_random_sampler_errors_as_torchs(args, kwargs):
    with pytest.raises(ValueError):
        tud.WeightedRandomSampler(*args, **kwargs)
    with pytest.raises(ValueError, match="WeightedRandomSampler: "):
        WeightedRandomSampler(*args, **kwargs)


# (torch pads an empty dataset by dividing by zero; onemodel's is empty: tested below)
@pytest.mark.parametrize("n, drop_last", [(n, d) for n in (0, 1, 5, 10, 11, 12, 13)
                                          for d in (False, True) if n or d])
@pytest.mark.parametrize("world", [1, 2, 3, 4, 7])
def test_distributed_sampler_without_shuffle_is_torchs(n, world, drop_last):
    for rank in range(world):
        ours = DistributedSampler(range(n), world, rank, shuffle=False, drop_last=drop_last)
        theirs = tud.DistributedSampler(range(n), world, rank, shuffle=False,
                                        drop_last=drop_last)
        assert list(ours) == list(theirs)
        assert (len(ours), ours.num_samples, ours.total_size) == (
            len(theirs), theirs.num_samples, theirs.total_size)


def test_distributed_sampler_of_an_empty_dataset_is_empty():
    assert list(DistributedSampler(range(0), 3, 1, shuffle=False)) == []


@pytest.mark.parametrize("n, world", [(12, 3), (10, 4), (7, 2)])
def test_distributed_shards_are_disjoint_and_cover_and_move_with_the_epoch(n, world):
    def shards(epoch, seed=0, drop_last=False):
        out = []
        for rank in range(world):
            s = DistributedSampler(range(n), world, rank, seed=seed, drop_last=drop_last)
            s.set_epoch(epoch)
            out.append(list(s))
        return out

    parts = shards(0)
    everything = sum(parts, [])
    assert set(everything) == set(range(n)) and len({len(p) for p in parts}) == 1
    padding = world * len(parts[0]) - n
    assert len(everything) == n + padding  # only the padding repeats
    assert sorted(collections.Counter(everything).values())[-1] <= 2
    cut = sum(shards(0, drop_last=True), [])
    assert len(cut) == len(set(cut)) == n - n % world
    assert shards(0) == parts and shards(1) != parts and shards(0, seed=5) != parts
    # The shuffled order is om.randperm's from Generator(seed + epoch), as torch seeds it.
    order = om.randperm(n, generator=om.Generator(2 + 3)).tolist()
    s = DistributedSampler(range(n), world, 0, seed=2)
    s.set_epoch(3)
    assert list(s) == (order + order)[:world * len(parts[0])][0::world]


def test_distributed_sampler_defaults_come_from_the_launcher(monkeypatch):
    for name in ("PMI_SIZE", "PMI_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK",
                 "PMIX_SIZE", "PMIX_RANK"):
        monkeypatch.delenv(name, raising=False)
    s = DistributedSampler(range(10), shuffle=False)
    assert (s.num_replicas, s.rank) == (1, 0) and list(s) == list(range(10))
    monkeypatch.setenv("OMPI_COMM_WORLD_SIZE", "4")
    monkeypatch.setenv("OMPI_COMM_WORLD_RANK", "2")
    s = DistributedSampler(range(10), shuffle=False)
    assert (s.num_replicas, s.rank) == (4, 2) and list(s) == [2, 6, 0]


@pytest.mark.parametrize("kwargs", [dict(num_replicas=2, rank=2), dict(num_replicas=2, rank=-1)])
def test_distributed_sampler_rank_errors_as_torchs(kwargs):
    with pytest.raises(ValueError, match="Invalid rank"):
        tud.DistributedSampler(range(4), **kwargs)
    with pytest.raises(ValueError, match=r"DistributedSampler: invalid rank -?\d, rank should "
                                         r"be in the interval \[0, 1\]"):
        DistributedSampler(range(4), **kwargs)
    with pytest.raises(ValueError, match="num_replicas must be an integer >= 1"):
        DistributedSampler(range(4), num_replicas=0, rank=0)
