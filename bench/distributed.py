"""Data-parallel step time: onemodel under mpiexec against torch DistributedDataParallel (gloo).

--model mlp (default): the MLP 784-1024-1024-10 (1.86 M parameters, 7.1 MiB of gradients), a
global batch of 256 in micro-batches of 128; --model transformer: the transformer classifier of
bench/models.py (Embedding 1000x128, two encoder layers d=128, 4 heads, ff 512, dropout 0.1,
sequence 64, mean pool, Linear 10: 0.53 M parameters), a global batch of 32 in micro-batches of
16. AdamW, M = 2 (one micro-batch per worker at W = 2), 1 thread per process. Prints the
median step time of each, onemodel's sync share (quantising into the exact sum, the all-reduce
and the rounding, over the step; with --split-wait, the wait for the slower rank before the
reduction apart, by a barrier), and the compute-only step (M = 1 in one process at batch 128:
what a worker computes; with --processes 2, two such processes at once, as the ranks of the
W = 2 run share the machine). With memory, the peak traced memory of one process accumulating
1, 2 and 8 micro-batches.

Run:  mpiexec -n 2 python bench/distributed.py onemodel [--steps N] [--shard (ZeRO-1)]
          [--bucket-bytes B (smaller buckets: reductions overlap backward)] [--split-wait]
      python bench/distributed.py torch [--steps N]      (spawns 2 gloo processes)
      python bench/distributed.py compute [--processes 2 (as many at once as W = 2 runs)]
      python bench/distributed.py memory
      python bench/distributed.py accumulate [--micro-batches M]   (one process: the Trainer's
          exact sum against plain .grad loops, onemodel's and torch's, per micro-batch)
each with [--model mlp|transformer].
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("ONEMODEL_NUM_THREADS", "1")

import numpy as np  # noqa: E402

MODEL = os.environ.get("BENCH_MODEL", "mlp")  # set from --model before anything runs
BATCHES = {"mlp": (256, 128), "transformer": (32, 16)}  # (global batch, micro-batch)


def batches() -> tuple[int, int]:
    return BATCHES[MODEL]


def data(n: int = 1024) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    if MODEL == "transformer":
        return rng.integers(0, 1000, (n, 64)), rng.integers(0, 10, n)
    return rng.standard_normal((n, 784)).astype(np.float32), rng.integers(0, 10, n)


def build(lib):
    """The model in library `lib` (onemodel.nn or torch.nn): the same architecture."""
    if MODEL == "mlp":
        return lib.Sequential(lib.Linear(784, 1024), lib.ReLU(), lib.Linear(1024, 1024),
                              lib.ReLU(), lib.Linear(1024, 10))
    extra = {"enable_nested_tensor": False} if lib.__name__ == "torch.nn" else {}

    class Classifier(lib.Module):
        def __init__(self):
            super().__init__()
            self.embed, self.head = lib.Embedding(1000, 128), lib.Linear(128, 10)
            self.encoder = lib.TransformerEncoder(lib.TransformerEncoderLayer(
                128, 4, 512, dropout=0.1, batch_first=True), 2, **extra)

        def forward(self, ids):
            return self.head(self.encoder(self.embed(ids)).mean(1))
    return Classifier()


def onemodel_trainer(micro_batches: int, micro: int = 0, shard: bool = False):
    import onemodel.functional as F
    from onemodel import nn
    from onemodel.data import DataLoader
    from onemodel.optim import AdamW
    from onemodel.train import DataParallel, Trainer, ZeRO
    x, y = data()
    model = build(nn)
    opt = AdamW(model.parameters(), lr=1e-3)
    loader = DataLoader((x, y), micro or batches()[1], seed=0, shuffle=True)
    return Trainer(model, F.cross_entropy, opt, loader,
                   strategy=(ZeRO if shard else DataParallel)(micro_batches), callbacks=[])


def run_onemodel(steps: int, shard: bool, buckets: int, split_wait: bool) -> None:
    micro_batches = batches()[0] // batches()[1]
    from onemodel import distributed
    distributed.init()
    if buckets:  # smaller buckets than the default 25 MB: overlap on this model
        distributed.exact._BUCKET_BYTES = buckets
    trainer = onemodel_trainer(micro_batches, shard=shard)
    sync = [0.0]
    step: dict[str, float] = {}  # this step's time in each part
    parts: dict[str, list[float]] = {}

    def timed(fn, name):
        def wrapper(*a, **k):
            t = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                dt = time.perf_counter() - t
                sync[0] += dt
                step[name] = step.get(name, 0.0) + dt
        return wrapper

    # add_one (quantising, from backward's hooks; it also packs and starts the buckets'
    # all-reduce), reduce (starting the rest and waiting) and results (rounding).
    acc_cls = distributed.ExactSum
    for name in ("add_one", "reduce", "results"):
        setattr(acc_cls, name, timed(getattr(acc_cls, name), name))
    if split_wait:  # a barrier before the reduction: the wait for the slower rank, apart
        reduce = acc_cls.reduce

        def barrier_first(self, *a, **k):
            t = time.perf_counter()
            distributed.barrier()
            step["slower rank"] = time.perf_counter() - t
            return reduce(self, *a, **k)
        acc_cls.reduce = barrier_first
    times, shares, waits = [], [], []
    for i in range(steps):
        sync[0] = 0.0
        step.clear()
        distributed.barrier()
        t = time.perf_counter()
        trainer.train_step()
        dt = time.perf_counter() - t
        if i >= 2:
            times.append(dt)
            shares.append(sync[0] / dt)
            waits.append(step.get("slower rank", 0.0) / dt)
            for name, value in step.items():
                parts.setdefault(name, []).append(value)

    if distributed.rank() == 0:
        print(f"onemodel {MODEL} W={distributed.world_size()} M={micro_batches}"
              f"{' ZeRO-1' if shard else ''}{f' buckets of {buckets} B' if buckets else ''}: step "
              f"{statistics.median(times) * 1e3:.1f} ms, sync share "
              f"{statistics.median(shares) * 100:.1f}%"
              + (f" + {statistics.median(waits) * 100:.1f}% waiting for the slower rank"
                 if split_wait else "") + " ("
              + ", ".join(f"{k} {statistics.median(v) * 1e3:.1f} ms" for k, v in parts.items())
              + ")")


def _compute_worker(steps: int, out) -> None:
    trainer = onemodel_trainer(1)
    times = []
    for i in range(steps):
        t = time.perf_counter()
        trainer.train_step()
        if i >= 2:
            times.append(time.perf_counter() - t)
    out.put(statistics.median(times))


def run_compute(steps: int, processes: int) -> None:
    """The compute-only step in `processes` processes at once, with no communication: what
    the workers' compute costs when they share the machine as the W = 2 run does."""
    import multiprocessing as mp
    ctx = mp.get_context("spawn")
    out = ctx.SimpleQueue()
    procs = [ctx.Process(target=_compute_worker, args=(steps, out)) for _ in range(processes)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    medians = sorted(out.get() for _ in procs)
    print(f"onemodel {MODEL} compute only (one worker's micro-batch of {batches()[1]}), "
          f"{processes} "
          f"process(es) at once: step " + ", ".join(f"{m * 1e3:.1f}" for m in medians) + " ms")


def run_memory() -> None:
    import tracemalloc
    total = batches()[0]
    for m in (1, 2, 8):
        trainer = onemodel_trainer(m, total // 8)
        trainer.train_step()  # warm: optimizer state and the sum's limbs exist
        tracemalloc.start()
        trainer.train_step()
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        print(f"onemodel {MODEL} one process, accumulate={m} (micro-batch {total // 8}): peak "
              f"{peak / 2 ** 20:.1f} MiB during a step")


def run_accumulate(micro_batches: int) -> None:
    """Time per micro-batch of one process's Trainer step accumulating `micro_batches` of 32
    into the exact sum, against plain loops of as many backward passes into `.grad` and one
    AdamW step, onemodel's and torch's (best of turns: _timing.best_seconds)."""
    import torch
    from _timing import best_seconds

    import onemodel as om
    import onemodel.functional as F
    from onemodel import nn
    from onemodel.optim import AdamW
    micro = 32
    torch.set_num_threads(1)
    trainer = onemodel_trainer(micro_batches, micro)
    x, y = data()
    ours, theirs = build(nn), build(torch.nn)
    opt, topt = AdamW(ours.parameters(), lr=1e-3), torch.optim.AdamW(theirs.parameters())
    xo, yo, xt, yt = om.tensor(x), om.tensor(y), torch.from_numpy(x), torch.from_numpy(y)

    def plain(model, optimizer, xs, ys, loss) -> None:
        for i in range(micro_batches):
            lo = i * micro % (len(xs) - micro)
            loss(model(xs[lo:lo + micro]), ys[lo:lo + micro]).backward()
        optimizer.step()
        optimizer.zero_grad()
    a, b, c = best_seconds([trainer.train_step,
                            lambda: plain(ours, opt, xo, yo, F.cross_entropy),
                            lambda: plain(theirs, topt, xt, yt, torch.nn.functional.cross_entropy)],
                           5.0)
    print(f"{MODEL} accumulating {micro_batches} micro-batches of {micro}, ms a micro-batch: "
          f"Trainer {a / micro_batches * 1e3:.2f}, onemodel loop {b / micro_batches * 1e3:.2f} "
          f"(Trainer/loop {a / b:.2f}), torch loop {c / micro_batches * 1e3:.2f}")


def _torch_worker(rank: int, world: int, steps: int, out) -> None:
    import torch
    import torch.distributed as dist
    torch.set_num_threads(1)
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29517")
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(0)
    ddp = torch.nn.parallel.DistributedDataParallel(build(torch.nn))
    opt = torch.optim.AdamW(ddp.parameters(), lr=1e-3)
    x, y = data()
    xs, ys = torch.from_numpy(x), torch.from_numpy(y)
    total, micro = batches()
    times = []
    for i in range(steps):
        lo = (i * total + rank * micro) % (len(x) - micro)
        dist.barrier()
        t = time.perf_counter()
        opt.zero_grad()
        torch.nn.functional.cross_entropy(ddp(xs[lo:lo + micro]), ys[lo:lo + micro]).backward()
        opt.step()
        if i >= 2:
            times.append(time.perf_counter() - t)
    if rank == 0:
        out.put(statistics.median(times))
    dist.destroy_process_group()


def run_torch(steps: int) -> None:
    import torch.multiprocessing as mp
    ctx = mp.get_context("spawn")
    out = ctx.SimpleQueue()
    procs = [ctx.Process(target=_torch_worker, args=(r, 2, steps, out)) for r in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    print(f"torch {MODEL} DDP gloo W=2: step {out.get() * 1e3:.1f} ms")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("what", choices=["onemodel", "torch", "compute", "memory", "accumulate"])
    parser.add_argument("--model", choices=sorted(BATCHES), default="mlp")
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--shard", action="store_true", help="onemodel: ZeRO-1")
    parser.add_argument("--split-wait", action="store_true",
                        help="onemodel: time the wait for the slower rank apart (a barrier "
                        "before the reduction, left out of the sync share)")
    parser.add_argument("--processes", type=int, default=1,
                        help="compute: that many processes at once (2: as the W = 2 run)")
    parser.add_argument("--micro-batches", type=int, default=8,
                        help="accumulate: micro-batches a step")
    parser.add_argument("--bucket-bytes", type=int, default=0,
                        help="onemodel: the buckets' size (default 25 MB: one bucket here)")
    args = parser.parse_args()
    MODEL = os.environ["BENCH_MODEL"] = args.model  # spawned workers read it at import
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    {"onemodel": lambda: run_onemodel(args.steps, args.shard, args.bucket_bytes,
                                             args.split_wait),
     "torch": lambda: run_torch(args.steps),
     "compute": lambda: run_compute(args.steps, args.processes),
     "memory": run_memory,
     "accumulate": lambda: run_accumulate(args.micro_batches)}[args.what]()
