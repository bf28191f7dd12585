"""ZeRO-1's shares in one process: a fake worker count, each worker's pieces stepped alone."""
import tracemalloc

import numpy as np
import pytest

import onemodel as om
from onemodel import nn
from onemodel.distributed import OptimizerShards
from onemodel.distributed import zero as zero_module
from onemodel.optim import SGD, Adagrad, AdamW


def _model():
    g = om.Generator(3)
    return nn.Sequential(nn.Linear(300, 200, generator=g), nn.ReLU(),
                         nn.Linear(200, 150, generator=g), nn.ReLU(),
                         nn.Linear(150, 7, generator=g))


def _grads(model):
    rng = np.random.default_rng(1)
    return [rng.standard_normal(p.shape).astype(np.float32) for p in model.parameters()]


def _as_worker(monkeypatch, world, rank):
    monkeypatch.setattr(zero_module, "world_size", lambda: world)
    monkeypatch.setattr(zero_module, "rank", lambda: rank)


@pytest.mark.parametrize("make", [lambda ps: AdamW(ps, lr=1e-2, weight_decay=0.1),
                                  lambda ps: SGD(ps, lr=0.1, momentum=0.9),
                                  lambda ps: Adagrad(ps, lr=0.1, initial_accumulator_value=0.5)])
def test_four_workers_pieces_give_the_bits_of_one_optimizer(monkeypatch, make):
    grads = _grads(_model())
    want = _model()
    opt = make(want.parameters())
    for _ in range(2):
        for p, g in zip(want.parameters(), grads):
            p.grad = om.from_numpy(g)
        opt.step()
    got = [np.full(p.shape, np.nan, np.float32) for p in want.parameters()]
    for rank in range(4):
        _as_worker(monkeypatch, 4, rank)
        model = _model()
        opt = make(model.parameters())
        shards = OptimizerShards(opt)
        for _ in range(2):
            for p, g in zip(model.parameters(), grads):
                p.grad = om.from_numpy(g)
            shards.release_others()
            opt.step()
        stepped = [p.detach().numpy().reshape(-1) for p in model.parameters()]
        for i, (start, end) in shards.pieces.items():
            got[i].reshape(-1)[start:end] = stepped[i][start:end]
    for g, p in zip(got, want.parameters()):
        assert g.tobytes() == p.detach().numpy().tobytes()


@pytest.mark.parametrize("world", [2, 4])
def test_a_worker_allocates_state_for_its_elements_alone(monkeypatch, world):
    # The unsharded AdamW holds 8 bytes an element; each worker, 1/W of it (+ 2%), the
    # shares balanced by elements (the first layer is split), nothing before its first step.
    elements = sum(p.numel() for p in _model().parameters())
    shares = []
    for rank in range(world):
        _as_worker(monkeypatch, world, rank)
        model = _model()
        grads = [om.from_numpy(g) for g in _grads(model)]
        tracemalloc.start()
        opt = AdamW(model.parameters())
        shards = OptimizerShards(opt)
        before = tracemalloc.get_traced_memory()[0]
        for p, g in zip(model.parameters(), grads):
            p.grad = g
        shards.release_others()
        opt.step()
        after, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        assert before < 0.01 * 8 * elements  # lazy: no state yet
        assert peak <= (1 / world + 0.02) * 8 * elements, (rank, peak / (8 * elements))
        held = sum(a.nbytes for a in opt.state_tensors().values() if a.flags.writeable)
        shares.append(sum(end - start for start, end in shards.pieces.values()))
        assert held == 8 * shares[-1]
    assert sum(shares) == elements and max(shares) - min(shares) <= 1


def test_gathered_state_is_whole_and_release_goes_back_to_the_pieces(monkeypatch):
    _as_worker(monkeypatch, 2, 1)
    model = _model()
    opt = AdamW(model.parameters())
    shards = OptimizerShards(opt)
    for p, g in zip(model.parameters(), _grads(model)):
        p.grad = om.from_numpy(g)
    opt.step()
    shards.materialise()  # what gather_state fills, and a checkpoint's load writes
    shapes = {name: a.shape for name, a in opt.state_tensors().items()}
    assert shapes == {f"{kind}.{i}": p.shape for i, p in enumerate(model.parameters())
                      for kind in ("exp_avg", "exp_avg_sq")}
    first = opt.state_tensors()["exp_avg.0"].reshape(-1)
    start, end = shards.pieces[0]
    piece = first[start:end].copy()
    assert first[:start].any() == False and piece.any()  # noqa: E712
    shards.release_others()
    assert opt.state_tensors()["exp_avg.0"].tobytes() == piece.tobytes()
