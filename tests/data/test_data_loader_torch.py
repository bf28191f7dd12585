"""The DataLoader against torch 2.13's: its signature and defaults (no shuffling), the batch
sequences of map-style datasets through every way of choosing indices (batch_size, drop_last,
sampler, batch_sampler, batch_size=None, collate_fn), ConcatDataset, StackDataset,
IterableDataset and ChainDataset, len(), the mutual-exclusion and worker-option errors; and
onemodel's order: a function of the seed or generator state and the epoch, resumable."""
import inspect

import numpy as np
import pytest

import onemodel as om
from onemodel.utils import data as od

torch = pytest.importorskip("torch")
tud = torch.utils.data


def plain(value):
    if isinstance(value, om.Tensor):
        return ("tensor", value.numpy().tolist())
    if isinstance(value, torch.Tensor):
        return ("tensor", value.tolist())
    if isinstance(value, np.ndarray):
        return ("array", value.tolist())
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    return value


class Examples(od.Dataset):
    """(features, label, name) rows, the same for both libraries (numpy in, tensors out)."""

    def __init__(self, n, offset=0):
        self.n, self.offset = n, offset

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if not 0 <= i < self.n:
            raise IndexError(i)
        i += self.offset
        return np.array([i, i * 0.5], np.float32), i % 3, f"e{i}"


class TorchExamples(tud.Dataset):
    def __init__(self, n, offset=0):
        self.inner = Examples(n, offset)

    def __len__(self):
        return len(self.inner)

    def __getitem__(self, i):
        return self.inner[i]


def _same(ours, theirs):
    a, b = [plain(x) for x in ours], [plain(x) for x in theirs]
    assert a == b and len(a) > 0


def test_signature_and_defaults_are_torchs():
    ours = inspect.signature(od.DataLoader.__init__).parameters
    theirs = inspect.signature(tud.DataLoader.__init__).parameters
    for name, p in theirs.items():
        assert name in ours, name
        assert ours[name].kind == p.kind, name
        assert ours[name].default == p.default, name
    assert list(ours)[:len(theirs)] == list(theirs)
    assert [n for n in ours if n not in theirs] == ["seed", "rank", "world_size"]
    loader = od.DataLoader(Examples(5))
    assert loader.batch_size == 1 and isinstance(loader.sampler, od.SequentialSampler)
    assert [plain(b)[1] for b in loader] == [("tensor", [i % 3]) for i in range(5)]


@pytest.mark.parametrize("kwargs", [
    dict(batch_size=2), dict(batch_size=2, drop_last=True), dict(batch_size=3, drop_last=False),
    dict(batch_size=7), dict(batch_size=None), dict(batch_size=4, shuffle=False),
])
def test_map_style_batches_are_torchs(kwargs):
    ours = od.DataLoader(Examples(7), **kwargs)
    theirs = tud.DataLoader(TorchExamples(7), **kwargs)
    _same(ours, theirs)
    assert len(ours) == len(theirs)


def test_samplers_batch_samplers_and_collate_fn_are_torchs():
    order = [5, 0, 3, 3, 6]
    _same(od.DataLoader(Examples(7), batch_size=2, sampler=order),
          tud.DataLoader(TorchExamples(7), batch_size=2, sampler=order))
    _same(od.DataLoader(Examples(7), batch_size=2, sampler=od.SequentialSampler(range(7))),
          tud.DataLoader(TorchExamples(7), batch_size=2, sampler=tud.SequentialSampler(range(7))))
    batches = [[6, 1], (2,), np.array([0, 4, 5])]  # any sequence of indices, as torch's
    _same(od.DataLoader(Examples(7), batch_sampler=batches),
          tud.DataLoader(TorchExamples(7), batch_sampler=batches))
    _same(od.DataLoader(Examples(7), batch_sampler=od.BatchSampler(range(7), 3, True)),
          tud.DataLoader(TorchExamples(7), batch_sampler=tud.BatchSampler(range(7), 3, True)))

    def names(batch):
        return [name for _, _, name in batch]

    _same(od.DataLoader(Examples(5), batch_size=2, collate_fn=names),
          tud.DataLoader(TorchExamples(5), batch_size=2, collate_fn=names))
    _same(od.DataLoader(Examples(5), batch_size=None, collate_fn=lambda e: e[2]),
          tud.DataLoader(TorchExamples(5), batch_size=None, collate_fn=lambda e: e[2]))


def test_array_datasets_batch_as_a_tensor_dataset_does_in_torch():
    x = np.arange(20, dtype=np.float32).reshape(10, 2)
    y = np.arange(10)
    theirs = tud.DataLoader(tud.TensorDataset(torch.from_numpy(x), torch.from_numpy(y)), 4)
    for dataset in ((x, y), od.TensorDataset(om.from_numpy(x), om.from_numpy(y))):
        loader = od.DataLoader(dataset, 4)
        _same(loader, theirs)
        assert len(loader) == len(theirs) == 3
    # With a collate_fn the examples are read one by one (a TensorDataset's, or rows).
    _same(od.DataLoader((x, y), 3, collate_fn=lambda b: [int(t) for _, t in b]),
          tud.DataLoader(tud.TensorDataset(torch.from_numpy(x), torch.from_numpy(y)), 3,
                         collate_fn=lambda b: [int(t) for _, t in b]))


def test_concat_and_stack_datasets_are_torchs():
    ours = od.ConcatDataset([Examples(3), Examples(0), Examples(4, offset=10)])
    theirs = tud.ConcatDataset([TorchExamples(3), TorchExamples(0), TorchExamples(4, 10)])
    assert len(ours) == len(theirs) == 7 and ours.cumulative_sizes == theirs.cumulative_sizes
    for i in list(range(-7, 7)):
        assert plain(ours[i]) == plain(theirs[i]), i
    for bad in (7, -8):
        with pytest.raises((IndexError, ValueError)):
            theirs[bad]
        with pytest.raises((IndexError, ValueError), match="ConcatDataset: index"):
            ours[bad]
    _same(od.DataLoader(ours, 3), tud.DataLoader(theirs, 3))
    added = Examples(2) + Examples(1)
    assert isinstance(added, od.ConcatDataset) and len(added) == 3
    with pytest.raises(ValueError, match="should not be an empty iterable"):
        od.ConcatDataset([])
    pair = od.StackDataset(Examples(3), list("abc"))
    keyed = od.StackDataset(x=Examples(3), y=list("abc"))
    assert plain(pair[1]) == plain(tud.StackDataset(TorchExamples(3), list("abc"))[1])
    assert plain(keyed[2]) == plain(tud.StackDataset(x=TorchExamples(3), y=list("abc"))[2])
    with pytest.raises(ValueError, match="one length"):
        od.StackDataset(Examples(3), list("ab"))


class Stream(od.IterableDataset):
    """range(start, stop), split between workers as torch's documentation does it."""

    def __init__(self, start, stop, length=True):
        self.start, self.stop, self.length = start, stop, length

    def __iter__(self):
        info = od.get_worker_info()
        if info is None:
            return iter(range(self.start, self.stop))
        per = -(-(self.stop - self.start) // info.num_workers)
        lo = self.start + info.id * per
        return iter(range(lo, min(lo + per, self.stop)))

    def __len__(self):
        return self.stop - self.start


class TorchStream(tud.IterableDataset):
    def __init__(self, start, stop):
        self.start, self.stop = start, stop

    def __iter__(self):
        info = tud.get_worker_info()
        if info is None:
            return iter(range(self.start, self.stop))
        per = -(-(self.stop - self.start) // info.num_workers)
        lo = self.start + info.id * per
        return iter(range(lo, min(lo + per, self.stop)))

    def __len__(self):
        return self.stop - self.start


@pytest.mark.parametrize("kwargs", [dict(batch_size=3), dict(batch_size=3, drop_last=True),
                                    dict(batch_size=None), dict(batch_size=4)])
def test_iterable_datasets_are_torchs(kwargs):
    ours = od.DataLoader(Stream(2, 12), **kwargs)
    theirs = tud.DataLoader(TorchStream(2, 12), **kwargs)
    _same(ours, theirs)
    assert len(ours) == len(theirs)
    chained = od.ChainDataset([Stream(0, 3), Stream(10, 12)])
    assert list(chained) == list(tud.ChainDataset([TorchStream(0, 3), TorchStream(10, 12)]))
    assert len(chained) == 5 and list(Stream(0, 2) + Stream(5, 6)) == [0, 1, 5]


@pytest.mark.filterwarnings("ignore:This DataLoader will create")  # torch: 3 workers, 2 cores
def test_iterable_dataset_workers_split_as_torchs():
    for workers in (2, 3):
        ours = od.DataLoader(Stream(0, 17), batch_size=2, num_workers=workers)
        theirs = tud.DataLoader(TorchStream(0, 17), batch_size=2, num_workers=workers)
        _same(ours, theirs)


@pytest.mark.parametrize("kwargs", [
    dict(sampler=[0, 1], shuffle=True),
    dict(batch_sampler=[[0]], batch_size=2), dict(batch_sampler=[[0]], shuffle=True),
    dict(batch_sampler=[[0]], sampler=[0]), dict(batch_sampler=[[0]], drop_last=True),
    dict(batch_size=None, drop_last=True), dict(num_workers=-1), dict(timeout=-1),
    dict(prefetch_factor=2), dict(num_workers=1, prefetch_factor=-1),
    dict(persistent_workers=True),
])
def test_option_errors_are_torchs(kwargs):
    with pytest.raises(ValueError):
        tud.DataLoader(TorchExamples(4), **kwargs)
    with pytest.raises(ValueError, match="DataLoader: "):
        od.DataLoader(Examples(4), **kwargs)


@pytest.mark.parametrize("kwargs", [dict(shuffle=True), dict(sampler=[0]),
                                    dict(batch_sampler=[[0]])])
def test_iterable_dataset_refuses_index_options_as_torch(kwargs):
    with pytest.raises(ValueError, match="IterableDataset: expected unspecified"):
        tud.DataLoader(TorchStream(0, 4), **kwargs)
    with pytest.raises(ValueError, match="IterableDataset: expected unspecified"):
        od.DataLoader(Stream(0, 4), **kwargs)


def test_other_option_errors_name_the_argument():
    with pytest.raises(ValueError, match="batch_size must be an integer >= 1"):
        od.DataLoader(Examples(4), batch_size=0)
    with pytest.raises(TypeError, match="generator must be an onemodel.Generator"):
        od.DataLoader(Examples(4), generator=torch.Generator())
    with pytest.raises(ValueError, match="seed or generator, not both"):
        od.DataLoader(Examples(4), seed=3, generator=om.Generator(1))
    g = om.Generator(1)
    with pytest.raises(ValueError, match="mutually exclusive"):
        od.DataLoader(Examples(4), sampler=[0], shuffle=True, generator=g)
    assert g.state == om.Generator(1).state  # refused before drawing
    with pytest.raises(ValueError, match="an IterableDataset splits its stream itself"):
        od.DataLoader(Stream(0, 4), world_size=2)
    with pytest.raises(TypeError, match="worker_init_fn must be callable"):
        od.DataLoader(Examples(4), worker_init_fn=3)


def test_pin_memory_and_in_order_are_accepted():
    _same(od.DataLoader(Examples(5), 2, pin_memory=True, in_order=False),
          tud.DataLoader(TorchExamples(5), 2))


def _epoch(loader):
    return [b.numpy().tolist() for b in loader]


def test_shuffled_order_is_a_function_of_seed_or_generator_and_epoch():
    x = np.arange(23)
    loader = od.DataLoader(x, 5, shuffle=True, seed=4)
    first, second = _epoch(loader), _epoch(loader)
    assert sorted(sum(first, [])) == list(range(23)) and first != second
    assert sum(first, []) == od.epoch_order(23, 4, 0).tolist()
    assert sum(second, []) == od.epoch_order(23, 4, 1).tolist()
    # The draws elsewhere do not move it; a generator gives the seed by one draw.
    om.manual_seed(0)
    om.rand(3)
    assert _epoch(od.DataLoader(x, 5, shuffle=True, seed=4)) == first
    g = om.Generator(9)
    by_generator = od.DataLoader(x, 5, shuffle=True, generator=g)
    seed = om.Generator(9).next_u64()
    assert g.state == om.Generator(9).state + 0x9E3779B97F4A7C15
    assert _epoch(by_generator) == _epoch(od.DataLoader(x, 5, shuffle=True, seed=seed))
    resumed = od.DataLoader(x, 5, shuffle=True, seed=4)
    resumed.load_state_dict({"epoch": 1, "position": 2})
    assert _epoch(resumed) == second[2:]


def test_random_augmentations_follow_the_batch_not_the_training_draws():
    class Noisy(od.Dataset):
        def __len__(self):
            return 6

        def __getitem__(self, i):
            return om.rand(2).numpy() + i

    def run(loader, draws_between):
        out = []
        for batch in loader:
            out.append(batch.numpy().tolist())
            om.rand(draws_between)  # the training's own draws
        return out

    om.manual_seed(1)
    plain_run = run(od.DataLoader(Noisy(), 2, shuffle=True, seed=3), 0)
    state = om.get_rng_state()
    assert run(od.DataLoader(Noisy(), 2, shuffle=True, seed=3), 5) == plain_run
    om.manual_seed(1)
    od.DataLoader(Noisy(), 2, seed=3).__iter__().__next__()
    assert om.get_rng_state() == om.Generator(1).state == state  # the reads draw nothing
    resumed = od.DataLoader(Noisy(), 2, shuffle=True, seed=3)
    resumed.load_state_dict({"epoch": 0, "position": 1})
    assert run(resumed, 0) == plain_run[1:]
    assert run(od.DataLoader(Noisy(), 2, shuffle=True, seed=3), 0) == plain_run
