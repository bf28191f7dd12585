"""nn.running_stats in one process: batch norm's running statistics recorded per micro-batch
and applied on leaving have the bits of updating at once (momentum float, 0, 1 and None; 1-D,
3-D and 2-D inputs; empty batches; a module run twice), in global index order, and torch's
values."""
import copy

import numpy as np
import pytest

from onemodel import nn
from onemodel.nn.running_stats import RunningUpdates, running_updates
from onemodel.tensor import tensor

CASES = [(nn.BatchNorm1d, (6, 3)), (nn.BatchNorm1d, (4, 3, 5)), (nn.BatchNorm2d, (3, 3, 4, 5))]


def _bits(module):
    return {k: v.numpy().tobytes() for k, v in module.state_dict().items()}


def _batches(rng, shape, count):
    return [tensor((rng.standard_normal(shape) * (k + 1) + k).astype(np.float32))
            for k in range(count)]


@pytest.mark.parametrize("momentum", [0.1, 0.0, 1.0, None])
@pytest.mark.parametrize("cls, shape", CASES)
def test_deferred_updates_have_the_bits_of_immediate_ones(rng, cls, shape, momentum):
    now = cls(3, momentum=momentum)
    later = copy.deepcopy(now)
    xs = _batches(rng, shape, 5)
    xs[2] = tensor(np.zeros((0,) + shape[1:], np.float32))  # counts, has no statistics
    outputs = [now(x).detach().numpy() for x in xs]
    with running_updates(later) as updates:
        for k, x in enumerate(xs):
            updates.begin(k)
            assert later(x).detach().numpy().tobytes() == outputs[k].tobytes()
        assert int(later.num_batches_tracked) == 0  # nothing applied inside
    assert _bits(later) == _bits(now)
    assert int(later.num_batches_tracked) == 5


def test_records_apply_in_global_order_and_a_forward_run_over_replaces_its_own(rng):
    model = nn.Sequential(nn.Linear(4, 3), nn.BatchNorm1d(3, momentum=None), nn.ReLU(),
                          nn.BatchNorm1d(3))
    reference = copy.deepcopy(model)
    xs = _batches(rng, (5, 4), 4)
    for x in xs:
        reference(x)
        reference[3](x[:, :3])  # a module run twice in a micro-batch
    with running_updates(model) as updates:
        # The workers' order; micro-batch 2 first runs on the wrong batch, then is run over.
        for k, x in ((2, xs[0]), (0, xs[0]), (3, xs[3]), (1, xs[1]), (2, xs[2])):
            updates.begin(k)
            model(x)
            model[3](x[:, :3])
    assert _bits(model) == _bits(reference)


def test_torch_values_over_micro_batches(assert_close, rng):
    torch = pytest.importorskip("torch")
    ours = nn.BatchNorm2d(4, momentum=None)
    ref = torch.nn.BatchNorm2d(4, momentum=None)
    with running_updates(ours) as updates:
        for k, x in enumerate(_batches(rng, (3, 4, 2, 3), 4)):
            updates.begin(k)
            ours(x)
            ref(torch.from_numpy(x.numpy()))
    for name in ("running_mean", "running_var"):
        assert_close(getattr(ours, name).numpy(), getattr(ref, name).numpy(), 1e-6, name)
    assert int(ours.num_batches_tracked) == int(ref.num_batches_tracked) == 4


def test_untracked_evaluating_and_instance_norms_update_as_without(rng):
    model = nn.Sequential(nn.BatchNorm1d(3, track_running_stats=False), nn.BatchNorm1d(3),
                          nn.InstanceNorm1d(3, track_running_stats=True))
    model[1].eval()
    reference = copy.deepcopy(model)
    xs = _batches(rng, (4, 3, 6), 3)
    for x in xs:
        reference(x)
    with running_updates(model) as updates:
        for k, x in enumerate(xs):
            updates.begin(k)
            model(x)
    assert _bits(model) == _bits(reference)
    assert int(model[1].num_batches_tracked) == 0


def test_an_exception_discards_the_records_and_detaches(rng):
    bn = nn.BatchNorm1d(3)
    before = _bits(bn)
    x = _batches(rng, (4, 3), 1)[0]
    with pytest.raises(RuntimeError, match="stop"):
        with running_updates(bn) as updates:
            updates.begin(0)
            bn(x)
            raise RuntimeError("stop")
    assert _bits(bn) == before
    bn(x)  # at once again
    assert int(bn.num_batches_tracked) == 1


def test_bad_arguments_are_named():
    with pytest.raises(TypeError, match="nn.Module"):
        RunningUpdates(lambda x: x)
    updates = RunningUpdates(nn.BatchNorm1d(2))
    for index in (-1, 1.0, True):
        with pytest.raises(ValueError, match="index"):
            updates.begin(index)


def test_the_records_cross_between_workers_as_they_were(rng):
    # What a worker sends (_pack) is what the others read back (_unpack): the indices, each
    # module's records in order, empty batches as None, the statistics' bits.
    model = nn.Sequential(nn.BatchNorm1d(3), nn.BatchNorm1d(5))
    updates = RunningUpdates(model)
    for k in (3, 1):
        updates.begin(k)
        model[0](_batches(rng, (4, 3), 1)[0])
        model[0](tensor(np.zeros((0, 3), np.float32)))
        model[1](_batches(rng, (4, 5), 1)[0])
    updates.detach()
    back = updates._unpack(updates._pack())
    assert list(back) == list(updates.records) == [3, 1]
    for k, lists in updates.records.items():
        for records, read in zip(lists, back[k]):
            assert [r is None for r in records] == [r is None for r in read]
            assert [[a.tobytes() for a in r] for r in records if r is not None] == \
                [[a.tobytes() for a in r] for r in read if r is not None]
    assert [len(r) for r in back[3]] == [2, 1]
