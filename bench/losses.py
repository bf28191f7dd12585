"""CTC loss, forward and backward: onemodel against PyTorch at 1 and 2 threads.

CRNN-like shapes: log-probabilities (T=64, B=32, C=96) from a log_softmax, targets of 14 to 26
labels (padded (B, S) form), every input length T, mean reduction. Both engines run the public
call and its backward on a leaf holding the log-probabilities; "kernel" times onemodel's forward
and backward kernels alone. numpy has no CTC, so it has no column here. Prints milliseconds per
forward+backward and torch / onemodel (above 1: onemodel is faster).
On a host loaded by other processes, OMP_WAIT_POLICY=passive keeps either engine's spinning
OpenMP threads from taking the cores the other one is timed on.
Run: python bench/losses.py [--quick]
"""
from __future__ import annotations

import argparse
import time

import numpy as np
import torch

import onemodel as om
import onemodel.functional as F
from onemodel._kernels import _ctc


def best_seconds(fns: list, budget: float, rounds: int = 5) -> list[float]:
    """Best time of each function over `rounds` rounds, each a block of runs per function.

    Blocks rather than alternate calls: after a call, the idle threads of the other engine's
    OpenMP runtime keep spinning for a while and would be charged to the next call; a block
    starts with an untimed call that absorbs it. Best of many runs, since a 2-thread call stalls
    whenever another process holds a core.
    """
    best = [float("inf")] * len(fns)
    for _ in range(rounds):
        for i, fn in enumerate(fns):
            fn()
            spent, runs = 0.0, 0
            while spent < budget / rounds or runs < 5:
                t0 = time.perf_counter()
                fn()
                dt = time.perf_counter() - t0
                best[i], spent, runs = min(best[i], dt), spent + dt, runs + 1
    return best


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="shorter timing budget")
    args = parser.parse_args()
    budget = 0.3 if args.quick else 2.0
    rng = np.random.default_rng(0)
    steps, batch, classes = 64, 32, 96
    logits = torch.from_numpy(rng.standard_normal((steps, batch, classes), dtype=np.float32))
    lp = torch.log_softmax(logits, 2).numpy()
    target_lengths = rng.integers(14, 27, batch)
    targets = rng.integers(1, classes, (batch, int(target_lengths.max())))
    input_lengths = np.full(batch, steps)

    lp_om = om.tensor(lp, requires_grad=True)
    lp_th = torch.from_numpy(lp.copy()).requires_grad_(True)
    tg_th, il_th, tl_th = (torch.from_numpy(a) for a in (targets, input_lengths, target_lengths))

    def run_om() -> None:
        lp_om.grad = None
        F.ctc_loss(lp_om, targets, input_lengths, target_lengths).backward()

    def run_th() -> None:
        lp_th.grad = None
        torch.nn.functional.ctc_loss(lp_th, tg_th, il_th, tl_th).backward()

    flat = np.ascontiguousarray(targets, dtype=np.int64).reshape(-1)
    offsets = np.arange(batch, dtype=np.int64) * targets.shape[1]
    lengths = (input_lengths.astype(np.int64), target_lengths.astype(np.int64))
    alpha = np.empty((batch, steps, 2 * targets.shape[1] + 3), np.float32)
    nll, scale = np.empty(batch, np.float32), np.ones(batch, np.float32)
    grad = np.empty_like(lp)

    def run_kernel(threads: int) -> None:
        _ctc.forward(lp, flat, offsets, *lengths, 0, alpha, nll, threads)
        _ctc.backward(lp, flat, offsets, *lengths, 0, alpha, nll, scale, False, grad, threads)

    print(f"ctc_loss fwd+bwd, T={steps} B={batch} C={classes}, targets 14-26 labels")
    print(f"{'thr':>3s} {'onemodel':>9s} {'kernel':>9s} {'torch':>9s} {'torch/om':>8s}"
          f"   (milliseconds)")
    for threads in (1, 2):
        torch.set_num_threads(threads)
        om.set_num_threads(threads)
        t_om, t_kernel, t_th = best_seconds([run_om, lambda: run_kernel(threads), run_th],
                                            budget)
        print(f"{threads:3d} {t_om * 1e3:9.3f} {t_kernel * 1e3:9.3f} {t_th * 1e3:9.3f} "
              f"{t_th / t_om:8.2f}")


if __name__ == "__main__":
    main()
