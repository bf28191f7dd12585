"""torch's DDP API over the exact reduction: init_process_group and the collectives,
DistributedDataParallel (rank 0's replica, exact gradient means, no_sync), the onemodel-run
launcher; the multi-process checks run a torch-style script under mpiexec -n 1, 2 and 4."""
import contextlib
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import onemodel as om
import onemodel.nn.functional as F
from onemodel import checkpoint, distributed, launch, nn
from onemodel.nn.parallel import DistributedDataParallel

torch = pytest.importorskip("torch")

# 16 micro-batches of 4 samples; a step is M = 4 of them, rank r of W taking the positions
# r, r + W, ... of the sampler's order (a DistributedSampler over micro-batches), A = 4 / W a
# rank, each loss divided by A.
SETUP = textwrap.dedent("""
    import numpy as np
    import onemodel as om
    from onemodel import nn

    M, SIZE = 4, 4
    g = om.Generator(3)
    X = g.uniform(-1.0, 1.0, (64, 5)).numpy()
    Y = (X[:, 0] + X[:, 1] * X[:, 2] > 0).astype(np.int64) + (X[:, 3] > 0.5)

    class MicroBatches(om.utils.data.Dataset):
        def __len__(self):
            return len(X) // SIZE

        def __getitem__(self, i):
            part = slice(i * SIZE, (i + 1) * SIZE)
            return om.tensor(X[part]), om.tensor(Y[part])

    def make_model(seed):
        om.manual_seed(seed)
        return nn.Sequential(nn.Linear(5, 8), nn.Tanh(), nn.Linear(8, 3))
""")
namespace: dict = {}
exec(SETUP, namespace)

SCRIPT = SETUP + textwrap.dedent("""
    import contextlib, json, os, sys
    import onemodel.distributed as dist
    import onemodel.nn.functional as F
    from onemodel import checkpoint
    from onemodel.nn.parallel import DistributedDataParallel as DDP
    from onemodel.utils.data import DataLoader
    from onemodel.utils.data.distributed import DistributedSampler

    dist.init_process_group("nccl")  # any backend's name is the MPI engine
    rank, world = dist.get_rank(), dist.get_world_size()
    model = make_model(seed=rank)    # the replicas differ: DDP takes rank 0's
    ddp = DDP(model, device_ids=None)
    start = checkpoint.state_hash(model)
    opt = om.optim.SGD(ddp.parameters(), lr=0.2, momentum=0.9)
    data = MicroBatches()
    sampler = DistributedSampler(data, shuffle=True, seed=4)
    loader = DataLoader(data, batch_size=None, sampler=sampler)
    local_steps = M // world
    record = {"world": world, "start": start,
              "env": [os.environ[k] for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK")]}
    for epoch in range(2):
        sampler.set_epoch(epoch)
        batches = list(loader)
        for step in range(len(batches) // local_steps):
            opt.zero_grad()
            for j in range(local_steps):
                x, y = batches[step * local_steps + j]
                last = j == local_steps - 1
                with contextlib.nullcontext() if last else ddp.no_sync():
                    loss = F.cross_entropy(ddp(x), y) / local_steps
                    loss.backward()
                if epoch == step == j == 0:  # before any sync: this rank's own gradient
                    record["local"] = [p.grad.numpy().tolist() for p in model.parameters()]
            if epoch == step == 0:
                record["grads"] = [p.grad.numpy().tolist() for p in model.parameters()]
            opt.step()
    record["final"] = checkpoint.state_hash(model, opt)
    record["keys"] = list(ddp.state_dict())[:2]
    with open(f"{sys.argv[1]}.{rank}", "w") as f:
        json.dump(record, f)
    dist.destroy_process_group()
""")

COLLECTIVES = textwrap.dedent("""
    import json, sys
    import onemodel as om
    import onemodel.distributed as dist
    from onemodel.nn.parallel import DistributedDataParallel as DDP
    try:
        DDP(om.nn.Linear(2, 2))
    except ValueError as e:
        without_group = str(e)
    dist.init_process_group("mpi")
    rank, world = dist.get_rank(), dist.get_world_size()
    # float32 adds 1e8 + 1 + (-1e8) + 1 to 1 in this order; the exact sum is 2
    big = om.tensor([[1e8, 1.0, -1e8, 1.0][rank], 0.1 * (rank + 1)])
    dist.all_reduce(big)
    mean = om.tensor([3.0 * rank, 1.0 / 3.0])
    dist.all_reduce(mean, op=dist.ReduceOp.AVG)
    top = om.tensor([rank, -rank])
    dist.all_reduce(top, op=dist.ReduceOp.MAX)
    count = om.tensor([rank + 1])
    dist.all_reduce(count)
    product = om.tensor([rank + 2.0])
    dist.all_reduce(product, op=dist.ReduceOp.PRODUCT)
    sent = om.tensor([10.0 * rank, 1.0])
    dist.broadcast(sent, src=world - 1)
    gathered = [om.zeros(2) for _ in range(world)]
    dist.all_gather(gathered, om.tensor([rank, rank * 0.5]))
    om.manual_seed(rank)
    try:
        DDP(om.nn.Linear(3, 2), init_sync=False)
        differ = None
    except RuntimeError as e:
        differ = str(e)
    out = {"big": big.tolist(), "mean": mean.tolist(), "top": top.tolist(),
           "count": count.tolist(), "product": product.tolist(), "sent": sent.tolist(),
           "gathered": [t.tolist() for t in gathered], "without_group": without_group,
           "differ": differ}
    with open(f"{sys.argv[1]}.{rank}", "w") as f:
        json.dump(out, f)
""")


def _env():
    return dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(om.__file__)),
                OMP_NUM_THREADS="1", ONEMODEL_NUM_THREADS="1")


def _run(tmp_path, world, script):
    """Runs the script on `world` processes through onemodel-run; each rank's JSON."""
    path = tmp_path / f"script{world}.py"
    path.write_text(script)
    out = tmp_path / f"out{world}"
    run = subprocess.run([sys.executable, "-m", "onemodel.launch", "-n", str(world), str(path),
                          str(out)], env=_env(), capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    return [json.loads(open(f"{out}.{r}").read()) for r in range(world)]


def _order(epoch):
    """The sampler's order of the micro-batches (one rank sees all of them)."""
    from onemodel.utils.data.distributed import DistributedSampler
    sampler = DistributedSampler(namespace["MicroBatches"](), num_replicas=1, rank=0, seed=4)
    sampler.set_epoch(epoch)
    return list(sampler)


def _gradients(model, i, scale):
    """Micro-batch i's gradients in one process, its loss divided by `scale`."""
    model.zero_grad()
    x, y = namespace["MicroBatches"]()[i]
    (F.cross_entropy(model(x), y) / scale).backward()
    return [p.grad.numpy().copy() for p in model.parameters()]


@pytest.mark.slow
def test_a_torch_style_ddp_loop_has_the_same_bits_for_every_world(tmp_path):
    runs = {world: _run(tmp_path, world, SCRIPT) for world in (1, 2, 4)}
    rank0 = namespace["make_model"](seed=0)
    expected_start = checkpoint.state_hash(rank0)
    for world, ranks in runs.items():
        for rank, got in enumerate(ranks):
            assert got["world"] == world
            assert got["env"] == [str(rank), str(world), str(rank)]
            assert got["start"] == expected_start  # every replica is rank 0's
            assert got["keys"] == ["module.0.weight", "module.0.bias"]
            assert got["final"] == runs[1][0]["final"]
            assert got["grads"] == runs[1][0]["grads"]

    # The first step's gradients: the exact mean of the M micro-batches' gradients, as
    # all_reduce_gradients computes it in one process (each loss divided by M instead).
    order = _order(0)
    micro = [(i, _gradients(rank0, order[i], 1)) for i in range(namespace["M"])]
    distributed.all_reduce_gradients(list(rank0.parameters()), micro)
    for got, p in zip(runs[2][1]["grads"], rank0.parameters()):
        np.testing.assert_array_equal(np.float32(got), p.grad.numpy())

    # ... and close to torch's gradient of the mean loss over the step's 16 samples.
    t_model = torch.nn.Sequential(torch.nn.Linear(5, 8), torch.nn.Tanh(),
                                  torch.nn.Linear(8, 3))
    t_model.load_state_dict({k: torch.tensor(v.numpy())
                             for k, v in namespace["make_model"](seed=0).state_dict().items()})
    rows = np.concatenate([np.arange(4 * i, 4 * i + 4) for i in order[:namespace["M"]]])
    torch.nn.functional.cross_entropy(t_model(torch.tensor(namespace["X"][rows])),
                                      torch.tensor(namespace["Y"][rows])).backward()
    for got, p in zip(runs[4][3]["grads"], t_model.parameters()):
        np.testing.assert_allclose(np.float32(got), p.grad.numpy(), rtol=1e-5, atol=1e-7)


@pytest.mark.slow
def test_no_sync_keeps_each_ranks_own_gradient(tmp_path):
    ranks = _run(tmp_path, 2, SCRIPT)
    order = _order(0)
    model = namespace["make_model"](seed=0)
    for rank, got in enumerate(ranks):  # rank r's first micro-batch is position r
        expected = _gradients(model, order[rank], 2)
        for a, b in zip(got["local"], expected):
            np.testing.assert_array_equal(np.float32(a), b)
    assert ranks[0]["local"] != ranks[1]["local"]
    assert ranks[0]["grads"] == ranks[1]["grads"]  # after the synchronised backward


@pytest.mark.slow
@pytest.mark.parametrize("world", [2, 4])
def test_collectives_under_mpiexec(tmp_path, world):
    ranks = _run(tmp_path, world, COLLECTIVES)
    values = np.float32([1e8, 1.0, -1e8, 1.0][:world])
    exact = float(np.float32(sum(float(v) for v in values)))
    tenths = float(np.float32(sum(float(np.float32(0.1 * (r + 1))) for r in range(world))))
    for rank, got in enumerate(ranks):
        assert got["big"] == [exact, tenths]
        assert got["mean"] == [float(np.float32(3.0 * (world - 1) / 2)),
                               float(np.float32(1.0 / 3.0))]
        assert got["top"] == [world - 1, 0]
        assert got["count"] == [world * (world + 1) // 2]
        assert got["product"] == [float(np.prod(np.arange(2, world + 2)))]
        assert got["sent"] == [10.0 * (world - 1), 1.0]
        assert got["gathered"] == [[r, r * 0.5] for r in range(world)]
        assert "Default process group has not been initialized" in got["without_group"]
        if rank == 0:
            assert got["differ"] is None
        else:
            assert "rank %d's parameters and buffers differ from rank 0's" % rank \
                in got["differ"]


def test_ddp_gradient_is_the_exact_mean_in_one_process():
    """Four backwards, three under no_sync: .grad is the exact mean of the four gradients
    (their float sum, torch's, would round three times)."""
    picks = (5, 9, 2, 12)
    model = namespace["make_model"](seed=1)
    ddp = DistributedDataParallel(model)
    expected = [(j, _gradients(model, i, 1)) for j, i in enumerate(picks)]
    model.zero_grad()
    for i in picks:
        x, y = namespace["MicroBatches"]()[i]
        with ddp.no_sync() if i != picks[-1] else contextlib.nullcontext():
            (F.cross_entropy(ddp(x), y) / len(picks)).backward()
    reference = namespace["make_model"](seed=1)
    distributed.all_reduce_gradients(list(reference.parameters()), expected)
    for p, q in zip(model.parameters(), reference.parameters()):
        np.testing.assert_array_equal(p.grad.numpy(), q.grad.numpy())


def test_autograd_grad_through_ddp_adds_no_term():
    """autograd.grad between two backwards of a window: its gradients go to the caller only."""
    model = namespace["make_model"](seed=2)
    ddp = DistributedDataParallel(model)
    expected = [(j, _gradients(model, i, 1)) for j, i in enumerate((3, 4))]
    model.zero_grad()
    data = namespace["MicroBatches"]()
    with ddp.no_sync():
        (F.cross_entropy(ddp(data[3][0]), data[3][1]) / 2).backward()
    om.autograd.grad(F.cross_entropy(ddp(data[7][0]), data[7][1]), list(model.parameters()))
    (F.cross_entropy(ddp(data[4][0]), data[4][1]) / 2).backward()
    reference = namespace["make_model"](seed=2)
    distributed.all_reduce_gradients(list(reference.parameters()), expected)
    for p, q in zip(model.parameters(), reference.parameters()):
        np.testing.assert_array_equal(p.grad.numpy(), q.grad.numpy())


def test_ddp_refuses_an_unused_parameter_unless_told():
    class TwoHeads(nn.Module):
        def __init__(self):
            super().__init__()
            self.used, self.unused = nn.Linear(2, 1), nn.Linear(2, 1)

        def forward(self, x):
            return self.used(x)

    x = om.ones(3, 2)
    ddp = DistributedDataParallel(TwoHeads())
    ddp(x).sum().backward()
    with pytest.raises(RuntimeError, match="Expected to have finished reduction in the prior "
                                           "iteration.*find_unused_parameters=True"):
        ddp(x)
    model = TwoHeads()
    ddp = DistributedDataParallel(model, find_unused_parameters=True)
    for _ in range(2):
        model.zero_grad()
        ddp(x).sum().backward()
    assert model.unused.weight.grad is None
    np.testing.assert_array_equal(model.used.weight.grad.numpy(), np.full((1, 2), 3.0))


def test_collectives_in_one_process_and_their_errors():
    distributed.init_process_group("gloo")
    try:
        t = om.tensor([1.5, -2.0])
        distributed.all_reduce(t, op=distributed.ReduceOp.AVG)
        assert t.tolist() == [1.5, -2.0]
        with pytest.raises(TypeError, match="all_reduce: tensor must be a Tensor"):
            distributed.all_reduce(np.ones(2))
        with pytest.raises(TypeError, match="all_reduce: AVG of a int64 tensor"):
            distributed.all_reduce(om.tensor([1, 2]), op=distributed.ReduceOp.AVG)
        with pytest.raises(ValueError, match="broadcast: src must be a rank in \\[0, 1\\)"):
            distributed.broadcast(t, src=1)
        with pytest.raises(ValueError, match="broadcast: give exactly one of src and group_src"):
            distributed.broadcast(t)
        distributed.broadcast(t, group_src=0)
        with pytest.raises(ValueError, match="all_gather: tensor_list must be a list of 1"):
            distributed.all_gather([om.zeros(2), om.zeros(2)], t)
        with pytest.raises(ValueError, match="all_gather: tensor_list\\[0\\] has shape \\(3,\\)"):
            distributed.all_gather([om.zeros(3)], t)
        assert t.tolist() == [1.5, -2.0]
    finally:
        distributed.destroy_process_group()
    with pytest.raises(ValueError, match="Default process group has not been initialized"):
        distributed.all_reduce(om.ones(2))


def test_the_launcher_environment_while_the_group_lives(monkeypatch):
    monkeypatch.delenv("RANK", raising=False)
    monkeypatch.setenv("MASTER_PORT", "1234")
    distributed.init_process_group("mpi")
    try:
        assert [os.environ[k] for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE",
                                        "MASTER_PORT")] == ["0", "1", "0", "1", "1234"]
    finally:
        distributed.destroy_process_group()
    assert "RANK" not in os.environ and os.environ["MASTER_PORT"] == "1234"
    monkeypatch.setenv("WORLD_SIZE", "4")  # torchrun's, without MPI behind it
    with pytest.raises(ValueError, match="WORLD_SIZE=4 in the environment, but MPI started "
                                         "one process: launch with onemodel-run -n 4"):
        distributed.init_process_group()
    assert not distributed.is_initialized()


def test_launcher_command_and_missing_mpiexec(monkeypatch, capsys):
    monkeypatch.setattr(launch, "find_mpiexec", lambda: "/opt/mpi/mpiexec")
    assert launch.command(["-n", "4", "train.py", "--lr", "0.1"]) == [
        "/opt/mpi/mpiexec", "-n", "4", sys.executable, "train.py", "--lr", "0.1"]
    monkeypatch.setattr(launch, "find_mpiexec", lambda: None)
    with pytest.raises(SystemExit) as exit_:
        launch.command(["-n", "2", "train.py"])
    assert exit_.value.code == 2
    assert "onemodel-run: mpiexec not found" in capsys.readouterr().err
