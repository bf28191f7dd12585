"""DataLoader: order as a function of (seed, epoch), sharding, batching, resume;
Subset and random_split against torch's, and batched by the DataLoader."""
import math
import warnings

import numpy as np
import pytest

import onemodel as om
from onemodel.data import DataLoader, epoch_order


def _ids(batch):
    return batch.numpy().tolist() if isinstance(batch, om.Tensor) else batch[0].numpy().tolist()


def _epoch(loader):
    return [_ids(b) for b in loader]


def test_epoch_order_is_pinned_and_a_permutation():
    order = epoch_order(10, seed=0, epoch=0)
    assert sorted(order.tolist()) == list(range(10))
    assert epoch_order(10, 0, 1).tolist() != order.tolist()
    assert epoch_order(10, 1, 0).tolist() != order.tolist()
    assert epoch_order(12, seed=7, epoch=3).tolist() == [1, 2, 0, 6, 10, 7, 4, 3, 11, 5, 9, 8]


def test_arrays_batched_without_shuffle():
    x = np.arange(10, dtype=np.float64).reshape(10, 1)
    y = np.arange(10, dtype=np.int32)
    loader = DataLoader((x, y), batch_size=4, shuffle=False)
    assert len(loader) == 3
    batches = list(loader)
    assert [b[1].numpy().tolist() for b in batches] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    assert batches[0][0].dtype == np.float32 and batches[0][1].dtype == np.int32
    assert DataLoader(x, 4, shuffle=False, drop_last=True).__len__() == 2
    assert isinstance(next(iter(DataLoader(x, 4, shuffle=True))), om.Tensor)


def test_shuffle_covers_every_example_once_and_changes_per_epoch():
    x = np.arange(103)
    loader = DataLoader(x, batch_size=10, seed=5, shuffle=True)
    first = sum(_epoch(loader), [])
    second = sum(_epoch(loader), [])
    assert sorted(first) == sorted(second) == list(range(103))
    assert first != second and loader.epoch == 2
    loader.set_epoch(0)
    assert sum(_epoch(loader), []) == first


@pytest.mark.parametrize("world", [2, 3])
def test_shards_are_disjoint_and_rebuild_the_single_worker_order(world):
    x = np.arange(95)
    single = _epoch(DataLoader(x, batch_size=9, seed=3, shuffle=True))  # 11 batches, last of 5
    shards = [_epoch(DataLoader(x, 9, seed=3, rank=r, world_size=world, shuffle=True))
              for r in range(world)]
    seen = sum((sum(s, []) for s in shards), [])
    assert sorted(seen) == list(range(95))  # nothing dropped, nothing repeated
    assert max(len(s) for s in shards) - min(len(s) for s in shards) <= 1
    # Local batch k of rank r is global batch k·W + r of the unsharded loader.
    for r in range(world):
        assert shards[r] == single[r::world]


def test_shards_continue_the_stream_into_the_next_epoch_and_resume_at_another_world():
    x = np.arange(50)
    single = DataLoader(x, 7, seed=1, shuffle=True)  # 8 batches an epoch
    stream = _epoch(single) + _epoch(single) + _epoch(single)
    loaders = [DataLoader(x, 7, seed=1, rank=r, world_size=3, shuffle=True) for r in range(3)]
    its = [_batches(lo) for lo in loaders]
    got = []
    for step in range(4):  # steps of M = 6 micro-batches: 2 per rank
        for _ in range(2):
            got += [next(it) for it in its]
    assert got == stream[:24]
    states = {tuple(lo.state_dict().items()) for lo in loaders}
    assert states == {(("epoch", 3), ("position", 0))}
    # The state resumes at W = 2 (24 is a multiple of 2), not at W = 5.
    two = [DataLoader(x, 7, seed=1, rank=r, world_size=2, shuffle=True) for r in range(2)]
    for lo in two:
        lo.load_state_dict(loaders[0].state_dict())
    with pytest.raises(ValueError, match="boundary"):
        DataLoader(x, 7, seed=1, rank=0, world_size=5, shuffle=True).load_state_dict(
            {"epoch": 1, "position": 3})
    its = [_batches(lo) for lo in two]
    more = []
    for _ in range(3):
        more += [next(it) for it in its]
    later = DataLoader(x, 7, seed=1, shuffle=True)
    later.set_epoch(3)
    assert more == _epoch(later)[:6]


def _batches(loader):
    while True:
        for b in loader:
            yield _ids(b)


def test_indexable_dataset_stacks_tuples():
    class Squares:
        def __len__(self):
            return 7

        def __getitem__(self, i):
            return np.array([i, i * i], np.float64), i % 2

    batches = list(DataLoader(Squares(), batch_size=3, shuffle=False))
    x, y = batches[-1]
    assert x.shape == (1, 2) and x.numpy().tolist() == [[6.0, 36.0]]
    assert y.dtype == np.int64 and batches[0][1].numpy().tolist() == [0, 1, 0]


def test_same_batches_for_arrays_and_indexable_with_shuffle():
    x = np.random.default_rng(0).normal(size=(50, 3)).astype(np.float32)
    a = [b.numpy() for b in DataLoader(x, 7, seed=11, shuffle=True)]
    b = [b.numpy() for b in DataLoader(list(x), 7, seed=11, shuffle=True)]
    assert all(np.array_equal(p, q) for p, q in zip(a, b)) and len(a) == len(b) == 8


def test_resume_from_state_dict_sees_the_remaining_batches():
    x = np.arange(60)
    full = DataLoader(x, 7, seed=2, shuffle=True)
    reference = _epoch(full) + _epoch(full)
    run = DataLoader(x, 7, seed=2, shuffle=True)
    seen = []
    for batch in run:
        seen.append(_ids(batch))
        if len(seen) == 5:
            break
    state = run.state_dict()
    assert state == {"epoch": 0, "position": 5}
    fresh = DataLoader(x, 7, seed=2, shuffle=True)
    fresh.load_state_dict(state)
    seen += _epoch(fresh) + _epoch(fresh)
    assert seen == reference


def test_state_after_the_last_batch_is_the_next_epoch():
    loader = DataLoader(np.arange(9), 3, seed=0, shuffle=True)
    it = iter(loader)
    for _ in range(3):
        next(it)
    assert loader.state_dict() == {"epoch": 1, "position": 0}
    with pytest.raises(ValueError, match="position"):
        loader.load_state_dict({"epoch": 0, "position": 4})


def test_errors_in_the_dataset_reach_the_consumer():
    class Broken:
        def __len__(self):
            return 10

        def __getitem__(self, i):
            if i == 6:
                raise KeyError("example 6 is missing")
            return np.float32(i)

    with pytest.raises(KeyError, match="example 6"):
        list(DataLoader(Broken(), 2, shuffle=False))


@pytest.mark.parametrize("kwargs, message", [
    (dict(batch_size=0), "batch_size"), (dict(batch_size=2, rank=2, world_size=2), "rank"),
    (dict(batch_size=2, num_workers=-1), "num_workers"), (dict(batch_size=2, seed=1.5), "seed")])
def test_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        DataLoader(np.arange(4), **kwargs)


def test_arrays_of_different_lengths_are_refused():
    with pytest.raises(ValueError, match=r"\(4,\), \(5,\)"):
        DataLoader((np.arange(4), np.arange(5)), 2)


def test_common_dataset_shapes_batch_as_pytorch_does():
    x = np.arange(24, dtype=np.float32).reshape(6, 2, 2)
    y = np.arange(6)
    for dataset in ([x, y], (om.from_numpy(x), om.from_numpy(y))):
        bx, by = next(iter(DataLoader(dataset, 4, shuffle=False)))
        assert bx.numpy().tolist() == x[:4].tolist() and by.numpy().tolist() == [0, 1, 2, 3]
    batch = next(iter(DataLoader({"image": x, "label": y}, 3, shuffle=False)))
    assert sorted(batch) == ["image", "label"] and batch["label"].numpy().tolist() == [0, 1, 2]
    # Examples that are dicts or lists collate field by field (a list's items each, torch's).
    examples = [{"a": np.float32(i), "b": [i, i + 1]} for i in range(5)]
    batch = next(iter(DataLoader(examples, 2, shuffle=False)))
    assert batch["a"].numpy().tolist() == [0.0, 1.0]
    assert [b.numpy().tolist() for b in batch["b"]] == [[0, 1], [1, 2]]
    # A list of same-shape arrays is a list of examples, as in PyTorch.
    images = [np.full((2, 2), i, np.float32) for i in range(5)]
    assert next(iter(DataLoader(images, 5, shuffle=False))).shape == (5, 2, 2)


def test_torch_tensors_are_read_as_arrays():
    torch = pytest.importorskip("torch")
    x = torch.arange(12, dtype=torch.float32).reshape(6, 2)
    y = torch.arange(6)
    bx, by = next(iter(DataLoader((x, y), 4, shuffle=False)))
    assert bx.numpy().tolist() == x[:4].tolist() and by.numpy().dtype == np.int64
    bx, by = next(iter(DataLoader(list(zip(x, y)), 4, shuffle=False)))
    assert bx.shape == (4, 2) and by.numpy().tolist() == [0, 1, 2, 3]


def test_what_cannot_be_batched_is_named():
    with pytest.raises(TypeError, match="'text' holds strings"):
        DataLoader({"text": np.array(["a", "b"]), "y": np.arange(2)}, 2, shuffle=True)
    with pytest.raises(TypeError, match="dict dataset maps names to arrays.*'y': list"):
        DataLoader({"x": np.zeros((2, 1)), "y": [1, 2]}, 2, shuffle=True)
    with pytest.raises(ValueError, match=r"same first dimension.*\(3, 1\).*\(2,\)"):
        DataLoader([np.zeros((3, 1)), np.zeros(2)], 2, shuffle=True)
    ragged = [(np.zeros(3, np.float32), 0), (np.zeros(4, np.float32), 1)]
    with pytest.raises(RuntimeError, match=r"field 0 has shape \(3,\) in example 0 and \(4,\) "
                                           r"in example 1: examples must stack"):
        next(iter(DataLoader(ragged, 2, shuffle=False)))
    words = [("a", {"x": np.array(["b"])}), ("b", {"x": np.array(["c"])})]
    with pytest.raises(TypeError, match="default_collate: batch must contain tensors.*<U1"):
        next(iter(DataLoader(words, 2, shuffle=False)))
    mixed = [(np.zeros(2), 0), {"x": np.zeros(2)}]
    with pytest.raises(TypeError, match="the example is a dict in example 1 and a tuple in "
                                        "example 0"):
        next(iter(DataLoader(mixed, 2, shuffle=False)))
    with pytest.raises(TypeError, match="got int"):
        DataLoader(5, 2)


def test_tensor_dataset_and_the_torch_import_path():
    """`from torch.utils.data import DataLoader, TensorDataset, Dataset`, ported: examples and
    length as torch's TensorDataset, batches as from the tuple of arrays, and
    len(loader.dataset) the number of examples (what an accuracy divides by)."""
    torch = pytest.importorskip("torch")
    from onemodel.utils.data import DataLoader as PortedLoader
    from onemodel.utils.data import Dataset, TensorDataset
    assert PortedLoader is DataLoader and om.utils.data is om.data
    x = np.random.default_rng(0).normal(size=(10, 3)).astype(np.float32)
    y = np.arange(10) % 3
    ours = TensorDataset(om.from_numpy(x), om.from_numpy(y))
    theirs = torch.utils.data.TensorDataset(torch.from_numpy(x), torch.from_numpy(y))
    assert isinstance(ours, Dataset) and len(ours) == len(theirs) == 10
    for i in (0, 7, -1):
        assert [t.numpy().tolist() for t in ours[i]] == [t.numpy().tolist() for t in theirs[i]]
    loader = DataLoader(ours, 4, seed=3, shuffle=True)
    assert len(loader.dataset) == 10
    for (bx, by), (tx, ty) in zip(loader, DataLoader((x, y), 4, seed=3, shuffle=True)):
        assert bx.numpy().tobytes() == tx.numpy().tobytes() and by.numpy().tolist() == \
            ty.numpy().tolist()
    class Unindexable(TensorDataset):  # batches are cut from the arrays, not read per example
        def __getitem__(self, index):
            raise AssertionError("read per example")

    assert [b.numpy().tolist() for b, _ in DataLoader(Unindexable(x, y), 4, shuffle=False)] == [
        x[i:i + 4].tolist() for i in range(0, 10, 4)]
    with pytest.raises(ValueError, match=r"TensorDataset: .*same first dimension.*\(10, 3\), "
                                         r"\(9,\)"):
        TensorDataset(x, y[:9])
    with pytest.raises(TypeError, match="TensorDataset: expected one or more tensors"):
        TensorDataset([1, 2], x)


def test_a_dataset_subclass_is_read_per_example():
    class Squares(om.data.Dataset):
        def __len__(self):
            return 5

        def __getitem__(self, i):
            return np.float32(i * i)

    assert next(iter(DataLoader(Squares(), 5, shuffle=False))).numpy().tolist() == [
        0.0, 1.0, 4.0, 9.0, 16.0]
    with pytest.raises(NotImplementedError, match="Empty must define __getitem__"):
        type("Empty", (om.data.Dataset,), {})()[0]


def test_subset_reads_through_its_indices_as_torch_does():
    torch = pytest.importorskip("torch")
    x = np.arange(20, dtype=np.float32).reshape(10, 2)
    y = np.arange(10) * 10
    idx = [7, 2, 2, 9]
    ours = om.data.Subset(om.data.TensorDataset(om.from_numpy(x), om.from_numpy(y)), idx)
    theirs = torch.utils.data.Subset(
        torch.utils.data.TensorDataset(torch.from_numpy(x), torch.from_numpy(y)), idx)
    assert isinstance(ours, om.data.Dataset) and len(ours) == len(theirs) == 4
    for i in (0, 2, -1):
        assert [t.numpy().tolist() for t in ours[i]] == [t.numpy().tolist() for t in theirs[i]]
    # A list index reads the dataset once with the mapped list, as torch's.
    assert om.data.Subset(list("abcdefghij"), idx)[1] == "c"
    assert om.data.Subset(np.arange(10) * 3, idx)[[0, 3]].tolist() == [21, 27]


def _split_indices(parts):
    return [list(p.indices) for p in parts]


def test_random_split_lengths_cover_the_dataset_once_in_randperm_order():
    parts = om.data.random_split(range(10), [3, 0, 7], generator=om.Generator(7))
    assert [len(p) for p in parts] == [3, 0, 7]
    order = om.randperm(10, generator=om.Generator(7)).tolist()
    assert sum(_split_indices(parts), []) == order != list(range(10))
    assert [[p[i] for i in range(len(p))] for p in parts] == _split_indices(parts)
    again = om.data.random_split(range(10), (3, 0, 7), generator=om.Generator(7))
    assert _split_indices(again) == _split_indices(parts)
    other = om.data.random_split(range(10), [3, 0, 7], generator=om.Generator(8))
    assert _split_indices(other) != _split_indices(parts)
    g = om.Generator(7)
    om.data.random_split(range(10), [5, 5], generator=g)
    assert g.state != om.Generator(7).state  # the draw advances the given generator


def test_random_split_without_generator_uses_the_default_generator():
    state = om.get_rng_state()
    try:
        om.manual_seed(3)
        parts = om.data.random_split(np.arange(12), [0.5, 0.5])
        om.manual_seed(3)
        assert sum(_split_indices(parts), []) == om.randperm(12).tolist()
    finally:
        om.set_rng_state(state)


@pytest.mark.parametrize("fractions", [[0.3, 0.3, 0.4], [0.5, 0.5], [0.1, 0.2, 0.7],
                                       [1.0], [0.25, 0.25, 0.25, 0.25], [0.9, 0.1, 0.0]])
def test_random_split_fractions_have_torchs_lengths(fractions):
    torch = pytest.importorskip("torch")
    for n in range(0, 24):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # both warn of empty splits
            ours = om.data.random_split(range(n), fractions, generator=om.Generator(n))
            theirs = torch.utils.data.random_split(range(n), fractions)
        assert [len(p) for p in ours] == [len(p) for p in theirs], n
        assert sorted(sum(_split_indices(ours), [])) == list(range(n))


def test_random_split_fraction_remainders_go_round_robin_and_empty_splits_warn():
    parts = om.data.random_split(range(11), [0.3, 0.3, 0.4])  # floors 3, 3, 4; one left
    assert [len(p) for p in parts] == [4, 3, 4]
    with pytest.warns(UserWarning) as record:
        parts = om.data.random_split(range(3), [0.7, 0.1, 0.2])  # floors 2, 0, 0; one left
    assert [len(p) for p in parts] == [3, 0, 0]
    assert [str(w.message) for w in record] == ["random_split: split 1 is empty",
                                                "random_split: split 2 is empty"]


@pytest.mark.parametrize("lengths, error, match", [
    ([3, 6], ValueError, r"lengths \[3, 6\] sum to 9, not to len\(dataset\) = 10"),
    ([3, 8], ValueError, "sum to 11"),
    ([-1, 11], ValueError, r"lengths\[0\] must be an integer >= 0"),
    ([2.5, 7.5], ValueError, r"lengths\[0\] must be an integer"),
    ([1.5, -0.5], ValueError, r"lengths\[0\] = 1\.5 is not a fraction"),
    ([0.5, 0.6], ValueError, r"lengths\[0\] must be an integer"),  # neither lengths nor 1
    # sums to 1.0000000000000002: torch's test takes fractions up to 1 only, and refuses these
    ([1 / 9] * 9, ValueError, r"lengths\[0\] must be an integer"),
    ([5, "5"], ValueError, r"lengths\[1\] must be a number"),
    (10, ValueError, "lengths must be a list"),
])
def test_random_split_refuses_bad_lengths(lengths, error, match):
    with pytest.raises(error, match=match):
        om.data.random_split(range(10), lengths)


def test_random_split_refuses_a_foreign_generator():
    with pytest.raises(TypeError, match="generator must be an onemodel.Generator"):
        om.data.random_split(range(10), [5, 5], generator=np.random.default_rng(0))


def test_subsets_of_a_tensor_dataset_batch_as_their_arrays():
    """The usual train/validation split: each Subset's batches are those of its rows' arrays,
    shuffled or not, with the tuple and dtypes of the TensorDataset's batches; a Subset of a
    Subset reads through both index lists."""
    from onemodel.utils.data import Subset, random_split
    x = np.random.default_rng(1).normal(size=(23, 3)).astype(np.float64)
    y = np.arange(23) * 10
    dataset = om.data.TensorDataset(om.from_numpy(x), om.from_numpy(y))
    train, val = random_split(dataset, [0.8, 0.2], generator=om.Generator(5))
    assert isinstance(train, Subset) and (len(train), len(val)) == (19, 4)
    for part in (train, val, Subset(train, [4, 0, 18, 7, 7])):
        rows = np.asarray([part.indices[i] for i in range(len(part))])
        if isinstance(part.dataset, Subset):
            rows = np.asarray(part.dataset.indices)[rows]
        for shuffle in (False, True):
            got = list(DataLoader(part, 4, shuffle=shuffle, seed=9))
            want = list(DataLoader((x[rows], y[rows]), 4, shuffle=shuffle, seed=9))
            assert len(got) == len(want) == math.ceil(len(part) / 4)
            for (gx, gy), (wx, wy) in zip(got, want):
                assert gx.dtype == np.float32 and gy.dtype == np.int64
                assert gx.numpy().tobytes() == wx.numpy().tobytes()
                assert gy.numpy().tolist() == wy.numpy().tolist()
    seen = sum((_ids((b[1],)) for b in DataLoader(train, 5, shuffle=True)), []) + \
        sum((_ids((b[1],)) for b in DataLoader(val, 5, shuffle=True)), [])
    assert sorted(seen) == sorted(y.tolist())

    class Unreadable(om.data.TensorDataset):  # the loader must read the arrays, not examples
        def __getitem__(self, i):
            raise AssertionError("read per example")

    part = Subset(Subset(Unreadable(om.from_numpy(x), om.from_numpy(y)), [5, 1, 9]), [2, 0])
    assert [b[1].numpy().tolist() for b in DataLoader(part, 2, shuffle=False)] == [[90, 50]]
