"""Data parallelism under mpiexec: the same bits for every worker count, DDP's rules, faults."""
import os
import shutil
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import onemodel as om
from onemodel import checkpoint, distributed

# A small model with dropout, AdamW and clipping; 61 samples in micro-batches of 5 (the last
# of 1), M = 12 micro-batches a step, so steps span epochs.
SETUP = textwrap.dedent("""
    import numpy as np
    import onemodel as om
    import onemodel.functional as F
    from onemodel import nn
    from onemodel.data import DataLoader
    from onemodel.optim import AdamW

    class Noise(nn.Module):  # draws from the default generator: an unseeded dropout
        def forward(self, x):
            return F.dropout(x, 0.1, self.training)

    def setup(norm=False):
        om.manual_seed(3)  # the test process and the launched ones start the generator alike
        g = om.Generator(2)
        x = g.uniform(-1.0, 1.0, (60 if norm else 61, 7)).numpy()  # batch norm needs 2+
        y = (x[:, 0] * x[:, 3] > 0).astype(np.int64)
        layers = [nn.Linear(7, 12, generator=g), nn.Tanh(), nn.Dropout(0.3, seed=5), Noise()]
        if norm:
            layers.insert(1, nn.BatchNorm1d(12))
        model = nn.Sequential(*layers, nn.Linear(12, 2, generator=g))
        opt = AdamW(model.parameters(), lr=5e-3, weight_decay=0.01)
        return model, opt, DataLoader((x, y), 5, seed=8, shuffle=True)
""")
namespace: dict = {}
exec(SETUP, namespace)
setup = namespace["setup"]

RUN = SETUP + textwrap.dedent("""
    import json, os, sys
    from onemodel import checkpoint, distributed
    from onemodel.train import Checkpoints, DataParallel, SingleProcess, Trainer, ZeRO
    out, steps, norm = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "norm"
    folder = sys.argv[4] if len(sys.argv) > 4 else None
    model, opt, loader = setup(norm)
    seen = []
    def record(info):
        if info["event"] == "step":
            if os.environ.get("SHARD") == "1":  # the whole state, current on each rank
                t.shards.gather_state()
            seen.append([checkpoint.state_hash(model, opt), info["loss"]])
    # No distributed.init(): the Trainer initialises itself under mpiexec.
    shard = os.environ.get("SHARD") in ("1", "2")
    t = Trainer(model, F.cross_entropy, opt, loader, clip_norm=0.5,
                strategy=(ZeRO if shard else DataParallel)(int(os.environ.get("M", "12"))),
                callbacks=[record],
                checkpoints=Checkpoints(folder, every=5) if folder else None)
    t.fit(steps, resume=folder is not None)
    with open(f"{out}.{distributed.rank()}", "w") as f:
        json.dump({"world": distributed.world_size(), "steps": seen}, f)
""")


def _mpiexec():
    local = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    return local if os.path.exists(local) else shutil.which("mpiexec")


needs_mpi = pytest.mark.skipif(_mpiexec() is None or sys.platform != "linux",
                               reason="no mpiexec")


def _env(**extra):
    return dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(om.__file__)),
                OMP_NUM_THREADS="1", ONEMODEL_NUM_THREADS="1", **extra)


def _mpirun(tmp_path, world, script, *args, timeout=240, **env):
    path = tmp_path / "run.py"
    path.write_text(script)
    return subprocess.run([_mpiexec(), "-n", str(world), sys.executable, str(path), *args],
                          env=_env(**env), capture_output=True, text=True, timeout=timeout)


def _results(prefix, world):
    import json
    return [json.loads(open(f"{prefix}.{r}").read()) for r in range(world)]


def _reference(steps, norm=False, accumulate=12):
    import onemodel.functional as F
    from onemodel.train import SingleProcess, Trainer
    model, opt, loader = setup(norm)
    hashes = []
    Trainer(model, F.cross_entropy, opt, loader, clip_norm=0.5,
            strategy=SingleProcess(accumulate),
            callbacks=[lambda i: hashes.append(checkpoint.state_hash(model, opt))
                       if i["event"] == "step" else None]).fit(steps)
    return hashes


def test_one_process_is_rank_0_of_1():
    assert distributed.init() == (0, 1)
    assert (distributed.rank(), distributed.world_size()) == (0, 1)
    assert list(distributed.local_indices(6)) == list(range(6))
    assert list(distributed.local_indices(6, 1, 3)) == [1, 4]
    with pytest.raises(ValueError, match="divide"):
        distributed.local_indices(5, 0, 2)


def test_reduce_checks_indices():
    a = om.tensor(np.zeros(2, np.float32), requires_grad=True)
    g = np.array([1.0, 3.0], np.float32)
    with pytest.raises(ValueError, match="0 .. M-1"):
        distributed.all_reduce_gradients([a], [(0, [g]), (2, [g])])
    with pytest.raises(ValueError, match="2 gradients"):
        distributed.all_reduce_gradients([a], [(0, [g, None])])


def test_micro_batches_must_divide_among_workers():
    import onemodel.functional as F
    from onemodel.train import DataParallel, Trainer
    model, opt, loader = setup()
    with pytest.raises(ValueError, match="micro_batches"):
        Trainer(model, F.cross_entropy, opt, loader, strategy=DataParallel(0))


@needs_mpi
@pytest.mark.parametrize("world", [1, 2, 3, 4])
def test_every_worker_count_gives_the_bits_of_one_process_accumulating(tmp_path, world):
    pytest.importorskip("mpi4py")
    run = _mpirun(tmp_path, world, RUN, str(tmp_path / "out"), "20", "plain")
    assert run.returncode == 0, run.stderr[-3000:]
    reference = _reference(20)
    results = _results(tmp_path / "out", world)
    assert {r["world"] for r in results} == {world}
    for r in results:  # every rank, after every step
        assert [h for h, _ in r["steps"]] == reference
    # The logged loss is the global one: the same on every rank.
    assert len({tuple(loss for _, loss in r["steps"]) for r in results}) == 1


@needs_mpi
def test_ranks_hold_the_same_buffers_after_every_step(tmp_path):
    # Batch norm: every rank applies all the step's micro-batches' statistics in global order
    # (test_distributed_running_stats.py checks the bits against other worker counts).
    pytest.importorskip("mpi4py")
    run = _mpirun(tmp_path, 2, RUN, str(tmp_path / "out"), "6", "norm")
    assert run.returncode == 0, run.stderr[-3000:]
    a, b = _results(tmp_path / "out", 2)
    assert a["steps"] == b["steps"] and len(a["steps"]) == 6


@needs_mpi
def test_resume_at_two_workers_from_a_checkpoint_written_at_four(tmp_path):
    pytest.importorskip("mpi4py")
    folder = tmp_path / "ckpt"
    first = _mpirun(tmp_path, 4, RUN, str(tmp_path / "a"), "10", "plain", str(folder))
    assert first.returncode == 0, first.stderr[-3000:]
    second = _mpirun(tmp_path, 2, RUN, str(tmp_path / "b"), "20", "plain", str(folder))
    assert second.returncode == 0, second.stderr[-3000:]
    reference = _reference(20)
    for r in _results(tmp_path / "b", 2):
        assert [h for h, _ in r["steps"]] == reference[10:]


@needs_mpi
def test_an_exception_on_one_rank_ends_the_job(tmp_path):
    pytest.importorskip("mpi4py")
    script = SETUP + textwrap.dedent("""
        from onemodel import distributed
        from onemodel.train import Checkpoints, DataParallel, SingleProcess, Trainer, ZeRO
        model, opt, loader = setup()
        def fail(info):
            if distributed.rank() == 1 and info["step"] == 2:
                raise RuntimeError("rank 1 fails on purpose")
        Trainer(model, F.cross_entropy, opt, loader, strategy=DataParallel(2),
                callbacks=[fail]).fit(1000)
    """)
    start = time.monotonic()
    run = _mpirun(tmp_path, 2, script, timeout=60)
    took = time.monotonic() - start
    assert run.returncode != 0
    assert took < 20, took  # the interpreters' start is most of it on a loaded machine
    assert "rank 1 of 2: an exception ends the job" in run.stderr
    assert run.stderr.count("Traceback") == 1  # printed once, by the rank that raised


@needs_mpi
def test_a_rank_that_never_arrives_times_out_with_a_message(tmp_path):
    pytest.importorskip("mpi4py")
    script = SETUP + textwrap.dedent("""
        import time
        from onemodel import distributed
        from onemodel.train import Checkpoints, DataParallel, SingleProcess, Trainer, ZeRO
        distributed.init()
        model, opt, loader = setup()
        if distributed.rank() == 1:
            time.sleep(60)
        Trainer(model, F.cross_entropy, opt, loader, strategy=DataParallel(2),
                callbacks=[]).fit(3)
    """)
    run = _mpirun(tmp_path, 2, script, timeout=60, ONEMODEL_DIST_TIMEOUT="2")
    assert run.returncode != 0
    assert "never arrived" in run.stderr


class _Answer:
    """A stand-in for mpi4py's MPI module whose requests complete `after` seconds from now."""

    def __init__(self, after):
        self.ready = time.monotonic() + after
        self.Request = self

    def Testall(self, requests):
        return time.monotonic() >= self.ready


@pytest.mark.parametrize("window,sleeps", [(2.0, False), (0.005, True)])
def test_a_wait_polls_before_it_sleeps(monkeypatch, window, sleeps):
    """A wait shorter than the polling window never sleeps (a sleep wakes up late, and the
    wait for a reduction comes every step); a longer one backs off into sleeps."""
    slept = []
    monkeypatch.setattr(distributed.world, "_SPIN_SECONDS", window)
    monkeypatch.setattr(distributed.world, "_MPI", _Answer(0.05))
    monkeypatch.setattr(distributed.world.time, "sleep", lambda s: slept.append(s))
    distributed.wait([object()], "reducing")
    assert bool(slept) == sleeps
    assert max(slept, default=0.0) <= 1e-3


def test_a_wait_past_the_timeout_aborts_even_while_polling(monkeypatch):
    monkeypatch.setattr(distributed.world, "_MPI", _Answer(60.0))
    monkeypatch.setattr(distributed.world, "_timeout", 0.01)
    monkeypatch.setattr(distributed.world, "_SPIN_SECONDS", 5.0)  # the timeout falls inside it
    started = time.monotonic()
    with pytest.raises(SystemExit):  # one process: abort raises SystemExit
        distributed.wait([object()], "reducing")
    assert time.monotonic() - started < 2.0


def test_unequal_micro_batches_weigh_by_their_samples():
    # A step over micro-batches of 8 and 4 samples is the step over the 12 (SGD: the update
    # is the mean gradient), and the logged loss is the sample-weighted mean.
    import onemodel.functional as F
    from onemodel import nn
    from onemodel.data import DataLoader
    from onemodel.optim import SGD
    from onemodel.train import DataParallel, Trainer
    g = om.Generator(3)
    x = g.uniform(-1.0, 1.0, (12, 5)).numpy()
    y = (x[:, 0] > 0).astype(np.int64)

    def run(batch, micro):
        model = nn.Linear(5, 3, generator=om.Generator(1))
        losses = []
        Trainer(model, F.cross_entropy, SGD(model.parameters(), lr=0.5),
                DataLoader((x, y), batch, shuffle=False), strategy=DataParallel(micro),
                callbacks=[lambda i: losses.append(i["loss"])]).fit(1)
        return model.weight.detach().numpy(), losses[0]

    (w2, l2), (w1, l1) = run(8, 2), run(12, 1)
    np.testing.assert_allclose(w2, w1, rtol=0, atol=1e-6)
    assert abs(l2 - l1) < 1e-6


def test_randomness_follows_the_global_position_with_a_fixed_stride():
    # Micro-batch i of a step starts every dropout counter, and the default generator, i * 2^32
    # draws after the step's start (whichever worker computes it); after a step of M both stand
    # M * 2^32 further.
    import onemodel.functional as F
    from onemodel.train import SingleProcess, Trainer
    from onemodel.train._step import STRIDE
    model, opt, loader = setup()
    seen = []
    drop = model[2]
    forward = drop.forward
    drop.forward = lambda x: (seen.append((int(drop.draws._data), om.default_generator.state)),
                              forward(x))[1]
    t = Trainer(model, F.cross_entropy, opt, loader, strategy=SingleProcess(12), callbacks=[])
    state = om.default_generator.state
    t.train_step()
    t.train_step()
    assert int(model[2].draws._data) == 24 * STRIDE
    assert om.default_generator.state == om.random.advanced(state, 24 * STRIDE)
    assert seen == [(i * STRIDE, om.random.advanced(state, i * STRIDE)) for i in range(24)]


class _Greedy(om.nn.Module):
    """Draws `draws` numbers from the default generator, or moves its dropout counter."""

    def __init__(self, draws, counter=False):
        super().__init__()
        self.lin = om.nn.Linear(3, 2, generator=om.Generator(1))
        self.register_buffer("draws", om.tensor(np.zeros((), np.int64)))
        self.n, self.counter = draws, counter

    def forward(self, x):
        if self.counter:
            self.draws._data[...] += self.n
        else:
            om.default_generator.state = om.random.advanced(om.default_generator.state, self.n)
        return self.lin(x)


@pytest.mark.parametrize("counter", [False, True])
def test_a_micro_batch_drawing_more_than_the_stride_is_refused(counter):
    import onemodel.functional as F
    from onemodel.data import DataLoader
    from onemodel.optim import SGD
    from onemodel.train import SingleProcess, Trainer
    from onemodel.train._step import STRIDE
    x = np.ones((8, 3), np.float32)
    y = np.zeros(8, np.int64)
    for draws, fails in ((STRIDE, False), (STRIDE + 1, True)):
        model = _Greedy(draws, counter)
        t = Trainer(model, F.cross_entropy, SGD(model.parameters(), lr=0.1),
                    DataLoader((x, y), 2), strategy=SingleProcess(4), callbacks=[])
        if fails:
            what = "dropout counter draws" if counter else "default generator"
            with pytest.raises(RuntimeError, match=f"micro-batch 0 of step 1 moved the {what}"):
                t.train_step()
        else:
            t.train_step()


# Gradients of M micro-batches for three parameters (M = 12, or one a worker), summed by each
# worker's share of them with small buckets (one parameter each) or one bucket; `wide` makes
# one parameter's sums too wide for one int64 (a stale prior 2^30 below them), the others fit:
# both ways of the all-reduce (with one micro-batch a worker and one bucket, the parameters
# that fit were packed directly, without their high limbs, which the wide sum then needs).
# `missing`: the odd micro-batches have no gradient for the last parameter (at W = 2 rank 1
# never completes the first bucket, rank 0 does: the buckets must still start in one order).
SUM = textwrap.dedent("""
    import sys
    import numpy as np
    from onemodel import distributed
    distributed.init()
    rng = np.random.default_rng(7)
    sizes = [3000, 40, 5]
    M, bucket_bytes = int(sys.argv[3]), int(sys.argv[4])
    rows = [[(rng.standard_normal(s) * 2.0 ** rng.integers(-30, -3, s)).astype(np.float32)
             for s in sizes] for _ in range(M)]
    rows[M // 4][1][:4] = [np.inf, np.nan, -np.inf, 1.0]
    acc = distributed.ExactSum(sizes, bucket_bytes=bucket_bytes)
    acc.exponents = [4, 4, 4]
    if sys.argv[2] == "wide":
        for r in rows:
            r[0] *= np.float32(2.0 ** 30)
    W, me = distributed.world_size(), distributed.rank()
    mine = list(range(me, M, W))
    # A step before, whose integers are wide (its high limbs nonzero): what it leaves in the
    # limbs must not reach the next step's sums.
    for k in (2, 1, 0):
        acc.add_one(k, rows[me][k] * np.float32(2.0 ** 20), 1, final=True)
    acc.reduce()
    acc.results(1, update_priors=False)
    acc.reset()
    for i in mine:
        for k in (2, 1, 0):  # as backward completes them
            if sys.argv[2] != "missing" or k != 2 or i % 2 == 0:
                acc.add_one(k, rows[i][k], 3 + i, final=i == mine[-1])
    acc.reduce()
    out = acc.results(sum(3 + i for i in range(M)))
    with open(f"{sys.argv[1]}.{me}", "wb") as f:
        f.write(b"".join(r.tobytes() for r in out) + repr(acc._limbs).encode())
""")


@pytest.mark.slow
@needs_mpi
@pytest.mark.parametrize("world", [2, 3])
def test_packed_and_wide_sums_give_the_bits_of_one_process(tmp_path, world):
    pytest.importorskip("mpi4py")
    cases = [(kind, "12", "1") for kind in ("fits", "wide", "missing")]
    cases += [(kind, str(world), "1000000") for kind in ("fits", "wide")]  # one bucket
    for kind, m, bucket in cases:
        name = f"{kind}-{m}-{bucket}"
        one = _mpirun(tmp_path, 1, SUM, str(tmp_path / f"one-{name}"), kind, m, bucket)
        run = _mpirun(tmp_path, world, SUM, str(tmp_path / f"out-{name}"), kind, m, bucket)
        assert one.returncode == 0 and run.returncode == 0, run.stderr[-3000:] + one.stderr
        want = (tmp_path / f"one-{name}.0").read_bytes()
        got = [(tmp_path / f"out-{name}.{r}").read_bytes() for r in range(world)]
        # Which parameters keep two limbs: the wide one; at W > 1 in one bucket, every one
        # of a bucket whose sum is wide.
        limbs = {"wide": b"[True, False, False]"}.get(kind, b"[False, False, False]")
        assert want.endswith(limbs)
        tail = b"[True, True, True]" if kind == "wide" and bucket != "1" else limbs
        for g in got:
            assert g[:-len(tail)] == want[:-len(limbs)] and g.endswith(tail), name


SINGLE = textwrap.dedent("""
    import sys
    import numpy as np
    from onemodel import distributed
    distributed.init()
    kind, M, bucket_bytes = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    rng = np.random.default_rng(11)
    sizes = [3001, 40, 5]
    rows = [[(rng.standard_normal(s) * 2.0 ** rng.integers(-40, -3, s)).astype(np.float32)
             for s in sizes] for _ in range(M)]
    rows[M - 1][1][:4] = [np.inf, np.nan, -np.inf, 1.0]
    rows[0][1][1] = -np.inf  # +inf and -inf in one element: NaN
    if kind == "clamp":
        rows[1][0][7] = np.float32(2.0 ** 60)  # 2^44 times past the prior: clamped
    if kind == "wide":  # integers beyond one int64 a worker: summed in two limbs
        for r in rows:
            r[0] *= np.float32(2.0 ** 30)
    acc = distributed.ExactSum(sizes, bucket_bytes=bucket_bytes)
    acc.exponents = [4, 4, 4]
    W, me = distributed.world_size(), distributed.rank()
    mine = list(range(me, M, W))
    out = b""
    for step, scale in enumerate((2.0 ** 20, 1.0)):
        acc.reset(single=True)
        for i in mine:
            for k in (2, 1, 0):  # as backward completes them
                if kind != "missing" or k != 2 or i % 2 == 0:
                    acc.add_one(k, rows[i][k] * np.float32(scale), 3 + i,
                                final=i == mine[-1])
        acc.reduce()
        results = acc.results(sum(3 + i for i in range(M)), reuse=step == 1)
        n = len(sizes)
        out += b"".join(b"-" if r is None else r.tobytes() for r in results)
        out += repr((acc.exponents, acc.counts[n:2 * n].tolist())).encode()
    with open(f"{sys.argv[1]}.{me}", "wb") as f:
        f.write(out)
""")


@pytest.mark.slow
@needs_mpi
@pytest.mark.parametrize("world", [2, 3])
def test_one_micro_batch_a_worker_exchanges_float32_with_the_same_bits(tmp_path, world):
    """With one micro-batch a worker the gradients themselves are exchanged and each worker
    sums its shard: the results, the next step's grids and the clamped counts are those of one
    process adding the integers, with non-finite elements, a parameter some workers lack,
    clamping, integers too wide for one int64, one bucket a parameter and one for all, over
    two steps."""
    pytest.importorskip("mpi4py")
    for kind, bucket in [("plain", "1"), ("plain", "1000000"), ("missing", "1"),
                         ("clamp", "1000000"), ("wide", "1")]:
        name = f"{kind}-{bucket}"
        one = _mpirun(tmp_path, 1, SINGLE, str(tmp_path / f"one-{name}"), kind, str(world),
                      bucket)
        run = _mpirun(tmp_path, world, SINGLE, str(tmp_path / f"out-{name}"), kind,
                      str(world), bucket)
        assert one.returncode == 0 and run.returncode == 0, run.stderr[-3000:] + one.stderr
        want = (tmp_path / f"one-{name}.0").read_bytes()
        for r in range(world):
            assert (tmp_path / f"out-{name}.{r}").read_bytes() == want, (name, r)
        if kind == "clamp":
            assert b", [1, 0, 0])" in want  # its element counted (in the first step)


@needs_mpi
@pytest.mark.parametrize("world,shard", [(2, "0"), (3, "0"), (2, "1")])
def test_one_micro_batch_a_worker_gives_the_bits_of_one_process(tmp_path, world, shard):
    """The Trainer with M = W (the float32 exchange), dropout, clipping and a last
    micro-batch of one sample, against one process accumulating M; also with ZeRO-1."""
    pytest.importorskip("mpi4py")
    run = _mpirun(tmp_path, world, RUN, str(tmp_path / "out"), "14", "plain", SHARD=shard,
                  M=str(world))
    assert run.returncode == 0, run.stderr[-3000:]
    reference = _reference(14, accumulate=world)
    for r in _results(tmp_path / "out", world):
        assert [h for h, _ in r["steps"]] == reference


@needs_mpi
def test_buckets_start_their_all_reduce_during_backward(tmp_path):
    # One bucket per parameter: the last layer's bucket starts before the first layer's
    # gradient is in (during backward), and the state hashes stay those of one process.
    pytest.importorskip("mpi4py")
    script = RUN.replace("model, opt, loader = setup(norm)\n", textwrap.dedent("""
        model, opt, loader = setup(norm)
        distributed.exact._BUCKET_BYTES = 1
        added, starts = [0], []
        add_one, start = distributed.ExactSum.add_one, distributed.ExactSum._start
        def counting_add(self, *a, **k):
            added[0] += 1
            return add_one(self, *a, **k)
        def recording_start(self, j):
            if self._waiting[j] == 0:
                starts.append(added[0] % 4)
            return start(self, j)
        distributed.ExactSum.add_one = counting_add
        distributed.ExactSum._start = recording_start
    """)) + "\nopen(f'{out}.starts.{distributed.rank()}', 'w').write(repr(starts[:4]))\n"
    assert script.count("recording_start") == 2
    run = _mpirun(tmp_path, 2, script, str(tmp_path / "out"), "5", "plain")
    assert run.returncode == 0, run.stderr[-3000:]
    # Six micro-batches per rank and step; in the last one, one node gives the last layer's
    # weight then bias, whose buckets (bias first: reverse order) start together after 2 of
    # the 4 parameters are in, before the first layer's gradients exist; the other two after
    # all 4 (every rank starts the buckets in their order).
    for r in range(2):
        assert (tmp_path / f"out.starts.{r}").read_text() == "[2, 2, 0, 0]"
    reference = _reference(5)
    for r in _results(tmp_path / "out", 2):
        assert [h for h, _ in r["steps"]] == reference


@needs_mpi
@pytest.mark.parametrize("world", [2, 3])
def test_a_sharded_optimizer_gives_the_bits_of_the_unsharded_one(tmp_path, world):
    # ZeRO-1: each rank steps its share of AdamW (clipping by the global norm), then the
    # parameters are all-gathered: after every step, the whole state of one process.
    pytest.importorskip("mpi4py")
    run = _mpirun(tmp_path, world, RUN, str(tmp_path / "out"), "12", "plain", SHARD="1")
    assert run.returncode == 0, run.stderr[-3000:]
    reference = _reference(12)
    for r in _results(tmp_path / "out", world):
        assert [h for h, _ in r["steps"]] == reference
    # Without gathering the state, each rank's state of the others' parameters is stale:
    # the state really is sharded.
    run = _mpirun(tmp_path, world, RUN, str(tmp_path / "raw"), "2", "plain", SHARD="2")
    assert run.returncode == 0, run.stderr[-3000:]
    for r in _results(tmp_path / "raw", world):
        assert [h for h, _ in r["steps"]][1] != reference[1]


SHARD_MEMORY = SETUP + textwrap.dedent("""
    import json, sys
    import numpy as np
    from onemodel import distributed
    from onemodel.train import Checkpoints, DataParallel, SingleProcess, Trainer, ZeRO
    model, opt, loader = setup(False)
    t = Trainer(model, F.cross_entropy, opt, loader, strategy=ZeRO(12), callbacks=[],
                checkpoints=Checkpoints(sys.argv[2], every=2))

    def held():  # bytes of optimizer state this rank holds, per parameter index
        out = {}
        for name, a in opt.state_tensors().items():
            i = int(name.rsplit(".", 1)[1])
            out[i] = out.get(i, 0) + (a.nbytes if a.flags.writeable else 0)
        return out

    seen = [held()]
    t.fit(3)                      # writes a checkpoint at step 2
    seen.append(held())
    t.resume()                    # loads the whole state, keeps this rank's share
    seen.append(held())
    t.shards.gather_state()
    seen.append(held())
    with open(f"{sys.argv[1]}.{distributed.rank()}", "w") as f:
        json.dump({"pieces": t.shards.pieces, "held": seen}, f)
""")


@needs_mpi
def test_a_sharded_optimizer_holds_only_its_share_of_the_state(tmp_path):
    pytest.importorskip("mpi4py")
    run = _mpirun(tmp_path, 2, SHARD_MEMORY, str(tmp_path / "mem"), str(tmp_path / "ckpt"))
    assert run.returncode == 0, run.stderr[-3000:]
    model, opt, _ = setup()
    full = {}  # bytes of state per element, per parameter index
    for name, a in opt.state_tensors().items():
        i = int(name.rsplit(".", 1)[1])
        full[i] = full.get(i, 0) + a.nbytes // a.size
    sizes = [p.numel() for p in model.parameters()]
    whole = sum(full[i] * n for i, n in enumerate(sizes))
    shares = []
    for r in _results(tmp_path / "mem", 2):
        own = {i: full[int(i)] * (b - a) for i, (a, b) in r["pieces"].items()}
        # At the start, after steps and a checkpoint, after resuming: its own pieces alone.
        for held in r["held"][:3]:
            assert {i: b for i, b in held.items() if b} == own
        assert r["held"][3] == {str(i): full[i] * n for i, n in enumerate(sizes)}  # gathered
        shares.append(sum(own.values()))
    # The pieces partition the elements, balanced within one element.
    assert sum(shares) == whole and max(shares) <= whole / 2 + max(full.values())


@needs_mpi
def test_a_sharded_checkpoint_is_the_unsharded_format_and_resumes_at_another_world(tmp_path):
    pytest.importorskip("mpi4py")
    folder = tmp_path / "ckpt"
    # SHARD=2: no gathering in the callback, only the checkpoint's own.
    first = _mpirun(tmp_path, 3, RUN, str(tmp_path / "a"), "10", "plain", str(folder),
                    SHARD="2")
    assert first.returncode == 0, first.stderr[-3000:]
    # Written once, by rank 0, in the unsharded format: one process loads it.
    model, opt, _ = setup()
    latest = checkpoint.CheckpointManager(str(folder)).latest()
    checkpoint.load(latest, model, opt)
    reference = _reference(20)
    assert checkpoint.state_hash(model, opt) == reference[9]
    second = _mpirun(tmp_path, 2, RUN, str(tmp_path / "b"), "20", "plain", str(folder),
                     SHARD="1")
    assert second.returncode == 0, second.stderr[-3000:]
    for r in _results(tmp_path / "b", 2):
        assert [h for h, _ in r["steps"]] == reference[10:]


def test_peak_memory_does_not_grow_with_accumulation():
    # The target: accumulating 8 micro-batches peaks at most 1.2x one micro-batch
    # (each gradient goes into the sum, and is released, as backward completes it).
    import tracemalloc

    import onemodel.functional as F
    from onemodel import nn
    from onemodel.data import DataLoader
    from onemodel.optim import AdamW
    from onemodel.train import SingleProcess, Trainer
    g = om.Generator(4)
    x = g.uniform(-1.0, 1.0, (64, 256)).numpy()
    y = (x[:, 0] > 0).astype(np.int64)
    peaks = {}
    for m in (1, 8):
        model = nn.Sequential(nn.Linear(256, 256, generator=g), nn.ReLU(),
                              nn.Linear(256, 256, generator=g), nn.ReLU(),
                              nn.Linear(256, 2, generator=g))
        t = Trainer(model, F.cross_entropy, AdamW(model.parameters()),
                    DataLoader((x, y), 4, seed=1, shuffle=True), strategy=SingleProcess(m),
                    callbacks=[])
        t.train_step()  # the optimizer state and the sum's integers exist from here on
        tracemalloc.start()
        t.train_step()
        peaks[m] = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    assert peaks[8] <= 1.2 * peaks[1], peaks


def test_accumulating_holds_the_sum_in_4_more_bytes_an_element():
    # What a Trainer holds between steps, accumulating 8 micro-batches against 1: the sum's
    # one int64 an element, the gradients rounded into it (a plain step's gradients take 4).
    import tracemalloc

    import onemodel.functional as F
    from onemodel import nn
    from onemodel.data import DataLoader
    from onemodel.optim import AdamW
    from onemodel.train import SingleProcess, Trainer
    g = om.Generator(4)
    x = g.uniform(-1.0, 1.0, (64, 256)).numpy()
    y = (x[:, 0] > 0).astype(np.int64)
    live = {}
    for m in (1, 8):
        tracemalloc.start()
        model = nn.Sequential(nn.Linear(256, 256, generator=g), nn.ReLU(),
                              nn.Linear(256, 256, generator=g), nn.ReLU(),
                              nn.Linear(256, 2, generator=g))
        t = Trainer(model, F.cross_entropy, AdamW(model.parameters()),
                    DataLoader((x, y), 4, seed=1, shuffle=True),
                    strategy=SingleProcess(m), callbacks=[])
        t.train_step()
        t.train_step()
        live[m] = tracemalloc.get_traced_memory()[0]
        tracemalloc.stop()
        del t, model
    elements = 2 * 256 * 257 + 2 * 257
    scratch = 16 * min(distributed.exact._CHUNK, 256 * 256)
    assert live[8] - live[1] <= 4 * elements + scratch + 65536, (live, elements)
