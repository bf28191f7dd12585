"""Optimizer step throughput: onemodel against PyTorch (foreach and per-tensor), 1 and 2 threads.

AdamW and SGD with momentum over 10 million float32 parameters in 10 tensors (every parameter
has a gradient). The step is memory-bound, so beside the times it prints the machine's measured
copy bandwidth (numpy at 1 thread, PyTorch's copy_ at 1 and 2) and the fraction of it each
step reaches: AdamW moves 28 bytes per parameter (p, g, m, v read; p, m, v written), SGD with
momentum 20 (p, g, b read; p, b written). Run: python bench/optim.py [--quick]
"""
from __future__ import annotations

import argparse

import numpy as np
import torch
from _timing import best_seconds

import onemodel as om
from onemodel import optim
from onemodel.tensor import tensor

BYTES_PER_PARAM = {"AdamW": 28, "SGD momentum": 20}


def copy_bandwidth(n_bytes: int, threads: int, runs: int) -> tuple[float, float]:
    """(numpy, torch) GB/s of a large copy, counting the bytes read and the bytes written."""
    n = n_bytes // 4
    src, dst = np.ones(n, np.float32), np.empty(n, np.float32)
    torch.set_num_threads(threads)
    tsrc, tdst = torch.from_numpy(src), torch.from_numpy(dst)
    t_np, t_torch = best_seconds([lambda: np.copyto(dst, src), lambda: tdst.copy_(tsrc)],
                                 min_runs=runs)
    return 2 * n_bytes / t_np / 1e9, 2 * n_bytes / t_torch / 1e9


def make_tensors(rng, sizes):
    params = [rng.standard_normal(n).astype(np.float32) for n in sizes]
    grads = [rng.standard_normal(n).astype(np.float32) * 1e-3 for n in sizes]
    return params, grads


def ours(kind: str, params, grads):
    ts = [tensor(p, requires_grad=True) for p in params]
    for t, g in zip(ts, grads):
        t.grad = tensor(g)
    opt = (optim.AdamW(ts, lr=1e-3, weight_decay=0.01) if kind == "AdamW" else
           optim.SGD(ts, lr=1e-3, momentum=0.9))
    opt.step()   # past the momentum buffer's first step
    return opt.step


def theirs(kind: str, params, grads, foreach: bool):
    ts = [torch.tensor(p, requires_grad=True) for p in params]
    for t, g in zip(ts, grads):
        t.grad = torch.tensor(g)
    opt = (torch.optim.AdamW(ts, lr=1e-3, weight_decay=0.01, foreach=foreach)
           if kind == "AdamW" else
           torch.optim.SGD(ts, lr=1e-3, momentum=0.9, foreach=foreach))
    opt.step()
    return opt.step


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1M parameters, fewer runs")
    args = parser.parse_args()
    total = 1_000_000 if args.quick else 10_000_000
    runs = 5 if args.quick else 20
    sizes = [total // 10] * 10
    rng = np.random.default_rng(0)
    params, grads = make_tensors(rng, sizes)
    print(f"optimizer step over {total:,} parameters in {len(sizes)} tensors; isa "
          f"{om.config()['isa']}, best of {runs} steps")

    bandwidth = {}
    for threads in (1, 2):
        bw_np, bw_torch = copy_bandwidth(256 << 20, threads, runs)
        bandwidth[threads] = max(bw_np, bw_torch)
        print(f"copy bandwidth, {threads} thread(s): numpy {bw_np:.1f} GB/s, "
              f"torch copy_ {bw_torch:.1f} GB/s")
    print()
    print(f"{'step':<14}{'thr':>4}{'onemodel ms':>13}{'torch foreach':>15}{'torch loop':>12}"
          f"{'vs foreach':>12}{'vs loop':>9}{'GB/s':>7}{'of bw':>7}")
    for kind in ("AdamW", "SGD momentum"):
        for threads in (1, 2):
            om.set_num_threads(threads)
            torch.set_num_threads(threads)
            t_om, t_fe, t_lp = best_seconds([ours(kind, params, grads),
                                             theirs(kind, params, grads, True),
                                             theirs(kind, params, grads, False)],
                                            min_runs=runs)
            gbs = BYTES_PER_PARAM[kind] * total / t_om / 1e9
            print(f"{kind:<14}{threads:>4}{t_om * 1e3:>13.2f}{t_fe * 1e3:>15.2f}"
                  f"{t_lp * 1e3:>12.2f}{t_fe / t_om:>11.2f}x{t_lp / t_om:>8.2f}x"
                  f"{gbs:>7.1f}{gbs / bandwidth[threads]:>7.0%}")


if __name__ == "__main__":
    main()
