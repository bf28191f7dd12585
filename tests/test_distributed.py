"""Gradient reduction in a fixed tree: the same bits for any number of workers."""
import os
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import onemodel as om
import onemodel.functional as F
from onemodel import checkpoint, distributed
from onemodel.optim import clip_grad_norm
from onemodel.train import Trainer

# A model without dropout or batch norm: those hold per-replica state (counters, running
# statistics) that data parallelism does not share.
SETUP = textwrap.dedent("""
    import numpy as np
    import onemodel as om
    import onemodel.functional as F
    from onemodel import nn
    from onemodel.data import DataLoader
    from onemodel.optim import AdamW

    def setup(rank=0, world=1, batch=5):
        g = om.Generator(2)
        x = g.uniform(-1.0, 1.0, (64, 7)).numpy()
        y = (x[:, 0] * x[:, 3] > 0).astype(np.int64)
        model = nn.Sequential(nn.Linear(7, 12, generator=g), nn.Tanh(),
                              nn.Linear(12, 2, generator=g))
        opt = AdamW(model.parameters(), lr=5e-3)
        return model, opt, DataLoader((x, y), batch, seed=8, rank=rank, world_size=world)
""")
namespace: dict = {}
exec(SETUP, namespace)
setup = namespace["setup"]


def test_one_process_is_rank_0_of_1():
    assert distributed.init() == (0, 1)
    assert (distributed.rank(), distributed.world_size()) == (0, 1)
    assert list(distributed.local_indices(6)) == list(range(6))
    assert list(distributed.local_indices(6, 1, 3)) == [1, 4]
    with pytest.raises(ValueError, match="divide"):
        distributed.local_indices(5, 0, 2)


def test_tree_order_is_fixed():
    # Values where association changes the float32 result.
    v = [np.array([x], np.float32) for x in (1e8, 1.0, -1e8, 1.0, 0.5)]
    expected = ((v[0] + v[1]) + (v[2] + v[3])) + v[4]
    assert distributed.tree_sum(v).tobytes() == expected.tobytes()
    assert distributed.tree_sum(v).tobytes() != (((v[0] + v[1]) + v[2]) + v[3] + v[4]).tobytes()
    three = distributed.tree_sum(v[:3])
    assert three.tobytes() == ((v[0] + v[1]) + v[2]).tobytes()


def test_reduce_checks_indices_and_fills_missing_gradients():
    a = om.tensor(np.zeros(2, np.float32), requires_grad=True)
    b = om.tensor(np.zeros(2, np.float32), requires_grad=True)
    g = np.array([1.0, 3.0], np.float32)
    distributed.all_reduce_gradients([a, b], [(0, [g, None]), (1, [g * 3, None])])
    assert a.grad.numpy().tolist() == [2.0, 6.0] and b.grad is None
    with pytest.raises(ValueError, match="0 .. M-1"):
        distributed.all_reduce_gradients([a, b], [(0, [g, None]), (2, [g, None])])
    with pytest.raises(ValueError, match="2 gradients"):
        distributed.all_reduce_gradients([a], [(0, [g, None])])


def _workers_step(models, opts, iters):
    """One step of W simulated workers: each its micro-batch, gradients gathered as MPI would,
    reduced, clipped and applied on every replica."""
    gathered = []
    for r, (model, opt, it) in enumerate(zip(models, opts, iters)):
        x, y = next(it)
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        gathered.append((r, distributed.gradients(opt.params)))
    for opt in opts:
        distributed.all_reduce_gradients(opt.params, gathered)
        clip_grad_norm(opt.params, 0.5)
        opt.step()


@pytest.mark.parametrize("world", [2, 4])
def test_workers_give_the_bits_of_one_worker_accumulating(world):
    model, opt, loader = setup()
    Trainer(model, F.cross_entropy, opt, loader, accumulate=world, clip_norm=0.5).fit(3)
    replicas = [setup(r, world) for r in range(world)]
    models, opts, loaders = zip(*replicas)
    iters = [iter(lo) for lo in loaders]
    for _ in range(3):
        _workers_step(models, opts, iters)
    expected = checkpoint.state_hash(model, opt)
    assert {checkpoint.state_hash(m, o) for m, o in zip(models, opts)} == {expected}


def test_accumulation_is_not_plain_summation_order():
    # The tree is what makes worker counts agree; adding micro-batches left to right would
    # give other bits in general, so the test above is not vacuous.
    model, opt, loader = setup()
    it = iter(loader)
    grads = []
    for i in range(8):
        x, y = next(it)
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        grads.append(distributed.gradients(opt.params)[0])
    left = grads[0]
    for g in grads[1:]:
        left = left + g
    assert distributed.tree_sum(grads).tobytes() != left.tobytes()


def _mpiexec():
    local = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    return local if os.path.exists(local) else shutil.which("mpiexec")


@pytest.mark.skipif(_mpiexec() is None, reason="no mpiexec")
def test_two_mpi_processes_give_the_bits_of_one_accumulating(tmp_path):
    pytest.importorskip("mpi4py")
    script = tmp_path / "run.py"
    script.write_text(SETUP + textwrap.dedent("""
        import sys
        from onemodel import checkpoint, distributed
        from onemodel.train import Trainer
        rank, world = distributed.init()
        model, opt, loader = setup(rank, world)
        Trainer(model, F.cross_entropy, opt, loader, clip_norm=0.5).fit(3)
        # One file per rank: the ranks' standard outputs interleave.
        with open(sys.argv[1] + f"/rank{rank}.txt", "w") as f:
            f.write(f"{rank} {world} {checkpoint.state_hash(model, opt)}")
    """))
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(om.__file__)),
               OMP_NUM_THREADS="1")
    run = subprocess.run([_mpiexec(), "-n", "2", sys.executable, str(script), str(tmp_path)],
                         env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    model, opt, loader = setup()
    Trainer(model, F.cross_entropy, opt, loader, accumulate=2, clip_norm=0.5).fit(3)
    expected = checkpoint.state_hash(model, opt)
    results = [(tmp_path / f"rank{r}.txt").read_text().split() for r in (0, 1)]
    assert [r[:2] for r in results] == [["0", "2"], ["1", "2"]], run.stdout
    assert {r[2] for r in results} == {expected}
