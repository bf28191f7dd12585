"""Reductions, softmax and layer norm: onemodel against numpy and PyTorch, at 1 and 2 threads.

Sum of a 1M-element vector, softmax and log_softmax of (256, 1000) and (4096, 128) over the
last axis (forward and backward), layer norm of (256, 1024) with weight and bias (forward and
backward). numpy runs single-threaded whatever the thread count (its ufuncs have no threads);
its softmax and layer norm are the plain formulas in float32. Prints microseconds per call and
torch / onemodel (above 1: onemodel is faster). Run: python bench/reduce.py [--quick]
"""
from __future__ import annotations

import argparse

import numpy as np
import torch
from _timing import best_of

from onemodel._kernels import _reduce


def np_softmax(x: np.ndarray, log: bool) -> np.ndarray:
    z = x - x.max(axis=-1, keepdims=True)
    if log:
        return z - np.log(np.exp(z).sum(axis=-1, keepdims=True))
    e = np.exp(z)
    return e / e.sum(axis=-1, keepdims=True)


def np_layer_norm(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    mu = x.mean(axis=-1, keepdims=True)
    d = x - mu
    return d / np.sqrt((d * d).mean(axis=-1, keepdims=True) + np.float32(1e-5)) * w + b


def cases(rng: np.random.Generator):
    """(name, onemodel(threads), numpy(), torch()) for each measured operation."""
    v = rng.standard_normal(1 << 20, dtype=np.float32)
    vt, out1 = torch.from_numpy(v), np.empty(1, np.float32)
    yield ("sum 1M", lambda t: _reduce.sum_axis(v, out1, 1, v.size, 1, t),
           lambda: v.sum(), lambda: vt.sum())
    for rows, n in ((256, 1000), (4096, 128)):
        x = rng.standard_normal((rows, n), dtype=np.float32)
        g = rng.standard_normal((rows, n), dtype=np.float32)
        y, dx = np.empty_like(x), np.empty_like(x)
        xt, gt = torch.from_numpy(x), torch.from_numpy(g)
        for log in (False, True):
            name = f"{'log_' if log else ''}softmax ({rows},{n})"
            tfn = torch.log_softmax if log else torch.softmax
            yield (name, lambda t, x=x, y=y, log=log: _reduce.softmax(x, y, rows, n, 1, log, t),
                   lambda x=x, log=log: np_softmax(x, log), lambda xt=xt, tfn=tfn: tfn(xt, -1))
            _reduce.softmax(x, y, rows, n, 1, log, 1)
            yt = torch.from_numpy(y.copy())
            tb = (torch.ops.aten._log_softmax_backward_data if log
                  else torch.ops.aten._softmax_backward_data)
            yield (name + " bwd",
                   lambda t, y=y.copy(), g=g, dx=dx, log=log:
                       _reduce.softmax_backward(y, g, dx, rows, n, 1, log, t),
                   lambda y=y.copy(), g=g, log=log:
                       g - np.exp(y) * g.sum(-1, keepdims=True) if log
                       else y * (g - (g * y).sum(-1, keepdims=True)),
                   lambda yt=yt, gt=gt, tb=tb: tb(gt, yt, -1, torch.float32))
    rows, n = 256, 1024
    x = rng.standard_normal((rows, n), dtype=np.float32)
    g = rng.standard_normal((rows, n), dtype=np.float32)
    w, b = rng.standard_normal(n, dtype=np.float32), rng.standard_normal(n, dtype=np.float32)
    y, dx, dw, db = np.empty_like(x), np.empty_like(x), np.empty_like(w), np.empty_like(b)
    mean, rstd = np.empty(rows, np.float32), np.empty(rows, np.float32)
    xt, gt, wt, bt = (torch.from_numpy(a) for a in (x, g, w, b))
    yield ("layer_norm (256,1024)",
           lambda t: _reduce.layer_norm(x, w, b, 1e-5, y, mean, rstd, rows, n, t),
           lambda: np_layer_norm(x, w, b),
           lambda: torch.nn.functional.layer_norm(xt, (n,), wt, bt, 1e-5))
    _, tmean, trstd = torch.native_layer_norm(xt, (n,), wt, bt, 1e-5)
    yield ("layer_norm (256,1024) bwd",
           lambda t: _reduce.layer_norm_backward(g, x, mean, rstd, w, dx, dw, db, rows, n, t),
           None,
           lambda: torch.ops.aten.native_layer_norm_backward(gt, xt, (n,), tmean, trstd, wt, bt,
                                                             [True, True, True]))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="shorter timing budget")
    args = parser.parse_args()
    budget = 0.1 if args.quick else 0.5
    rng = np.random.default_rng(0)
    print(f"{'operation':28s} {'thr':>3s} {'onemodel':>9s} {'numpy':>9s} {'torch':>9s} "
          f"{'torch/om':>8s} {'numpy/om':>8s}   (microseconds)")
    for name, om_fn, np_fn, th_fn in cases(rng):
        np_s = best_of(np_fn, budget, 30) if np_fn else float("nan")
        for threads in (1, 2):
            torch.set_num_threads(threads)
            om = best_of(lambda: om_fn(threads), budget, 30)
            th = best_of(th_fn, budget, 30)
            print(f"{name:28s} {threads:3d} {om * 1e6:9.1f} {np_s * 1e6:9.1f} {th * 1e6:9.1f} "
                  f"{th / om:8.2f} {np_s / om:8.2f}")


if __name__ == "__main__":
    main()
