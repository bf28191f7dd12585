"""One training step of an MLP 784-1024-1024-10 at batch 256: onemodel against PyTorch.

Forward (linear, relu, linear, relu, linear, cross-entropy), backward and a plain SGD update
(p -= lr·grad under no_grad, written here), on the same weights and batch in the same process,
at 1 and 2 threads. Prints the median time per step of each and onemodel / PyTorch, then a
profile of onemodel's step (where the time goes, by function).

Run: python bench/mlp_step.py [--steps N] [--no-profile]
"""
from __future__ import annotations

import argparse
import cProfile
import pstats
import statistics
import time

import numpy as np
import torch

import onemodel
import onemodel.functional as F
from onemodel import autograd
from onemodel.tensor import Tensor, tensor

SIZES = (784, 1024, 1024, 10)
BATCH = 256
LR = 0.01


def cross_entropy(logits: Tensor, target: Tensor) -> Tensor:
    """Mean negative log-likelihood of the targets, from the loss module when it exists."""
    if hasattr(F, "cross_entropy"):
        return F.cross_entropy(logits, target)
    picked = F.gather(F.log_softmax(logits, 1), 1, F.reshape(target, (-1, 1)))
    return -F.mean(picked)


def make_params(rng: np.random.Generator) -> list[np.ndarray]:
    params = []
    for n_in, n_out in zip(SIZES[:-1], SIZES[1:]):
        bound = 1.0 / np.sqrt(n_in)
        params.append(rng.uniform(-bound, bound, (n_out, n_in)).astype(np.float32))
        params.append(rng.uniform(-bound, bound, (n_out,)).astype(np.float32))
    return params


def om_step(params: list[Tensor], x: Tensor, y: Tensor) -> float:
    h = x
    for i in range(0, len(params), 2):
        h = F.linear(h, params[i], params[i + 1])
        if i + 2 < len(params):
            h = F.relu(h)
    loss = cross_entropy(h, y)
    loss.backward()
    with autograd.no_grad():
        for p in params:
            p.add_(p.grad, alpha=-LR)
            p.grad = None
    return loss.item()


def torch_step(params: list[torch.Tensor], x: torch.Tensor, y: torch.Tensor) -> float:
    h = x
    for i in range(0, len(params), 2):
        h = torch.nn.functional.linear(h, params[i], params[i + 1])
        if i + 2 < len(params):
            h = torch.relu(h)
    loss = torch.nn.functional.cross_entropy(h, y)
    loss.backward()
    with torch.no_grad():
        for p in params:
            p -= LR * p.grad
            p.grad = None
    return loss.item()


def median_seconds(steps: int, *fns) -> list[float]:
    """Median time of each function, run alternately so both see the same machine load."""
    for _ in range(3):
        for fn in fns:
            fn()
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(steps):
        for fn, ts in zip(fns, times):
            t0 = time.perf_counter()
            fn()
            ts.append(time.perf_counter() - t0)
    return [statistics.median(ts) for ts in times]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--no-profile", action="store_true")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    init = make_params(rng)
    x_np = rng.standard_normal((BATCH, SIZES[0])).astype(np.float32)
    y_np = rng.integers(0, SIZES[-1], BATCH).astype(np.int64)

    om_params = [tensor(p, requires_grad=True) for p in init]
    om_x, om_y = tensor(x_np), tensor(y_np)
    th_params = [torch.from_numpy(p.copy()).requires_grad_(True) for p in init]
    th_x, th_y = torch.from_numpy(x_np), torch.from_numpy(y_np)

    # The two engines start from the same weights: their first losses agree.
    first_om, first_th = om_step(om_params, om_x, om_y), torch_step(th_params, th_x, th_y)
    print(f"first loss: onemodel {first_om:.6f}  PyTorch {first_th:.6f}   "
          f"(mode {onemodel.get_mode()}, isa {onemodel.config()['isa']})")
    print(f"{'threads':>7s} {'onemodel ms':>12s} {'PyTorch ms':>11s} {'om/torch':>9s}")
    for threads in (1, 2):
        onemodel.set_num_threads(threads)
        torch.set_num_threads(threads)
        t_om, t_th = median_seconds(args.steps, lambda: om_step(om_params, om_x, om_y),
                                    lambda: torch_step(th_params, th_x, th_y))
        print(f"{threads:7d} {t_om * 1e3:12.2f} {t_th * 1e3:11.2f} {t_om / t_th:9.2f}")

    if not args.no_profile:
        onemodel.set_num_threads(1)
        profiler = cProfile.Profile()
        profiler.enable()
        for _ in range(args.steps):
            om_step(om_params, om_x, om_y)
        profiler.disable()
        print(f"\nonemodel step at 1 thread, {args.steps} steps, by own time:")
        pstats.Stats(profiler).sort_stats("tottime").print_stats(12)


if __name__ == "__main__":
    main()
