"""Elementwise transcendentals: onemodel's exact-mode kernels against numpy and PyTorch.

Each op over 1M float32 values (standard normal times 3; positive for log), forward and
backward, at 1 and 2 threads. numpy is single-threaded (its ufuncs have no threads); where it
has no such function the plain formula stands in (sigmoid 1/(1+exp(-x))), scipy.special.erf
for erf if scipy is installed, nothing for gelu. numpy add and mul of 1M floats are printed as
a memory-bound floor. Prints microseconds per call and numpy/onemodel, torch/onemodel (above 1:
onemodel is faster). Run: python bench/ops.py [--quick]
"""
from __future__ import annotations

import argparse

import numpy as np
import torch
from _timing import best_of

from onemodel._kernels import _vmath

N = 1 << 20


def numpy_forward(x: np.ndarray, out: np.ndarray) -> dict:
    fns = {"exp": lambda: np.exp(x, out=out), "log": lambda: np.log(x, out=out),
           "relu": lambda: np.maximum(x, np.float32(0), out=out),
           "tanh": lambda: np.tanh(x, out=out), "sin": lambda: np.sin(x, out=out),
           "cos": lambda: np.cos(x, out=out),
           "sigmoid": lambda: np.divide(1.0, np.add(1.0, np.exp(np.negative(x, out=out),
                                                              out=out), out=out), out=out)}
    try:
        from scipy import special
        fns["erf"] = lambda: special.erf(x, out=out)
    except ImportError:
        pass
    return fns


def torch_forward(op: str, xt: torch.Tensor, ot: torch.Tensor):
    F = torch.nn.functional
    return {"exp": lambda: torch.exp(xt, out=ot), "log": lambda: torch.log(xt, out=ot),
            "tanh": lambda: torch.tanh(xt, out=ot), "sigmoid": lambda: torch.sigmoid(xt, out=ot),
            "erf": lambda: torch.erf(xt, out=ot), "softplus": lambda: F.softplus(xt),
            "gelu": lambda: F.gelu(xt), "gelu_tanh": lambda: F.gelu(xt, approximate="tanh"),
            "relu": lambda: torch.relu(xt), "sin": lambda: torch.sin(xt, out=ot),
            "cos": lambda: torch.cos(xt, out=ot)}[op]


def torch_backward(op: str, st: torch.Tensor, gt: torch.Tensor):
    aten = torch.ops.aten
    return {"exp": lambda: gt * st, "log": lambda: gt / st,
            "tanh": lambda: aten.tanh_backward(gt, st),
            "sigmoid": lambda: aten.sigmoid_backward(gt, st),
            "erf": lambda: 1.1283791670955126 * torch.exp(-(st * st)) * gt,
            "softplus": lambda: aten.softplus_backward(gt, st, 1.0, 20.0),
            "gelu": lambda: aten.gelu_backward(gt, st),
            "gelu_tanh": lambda: aten.gelu_backward(gt, st, approximate="tanh"),
            "relu": lambda: aten.threshold_backward(gt, st, 0.0),
            "sin": lambda: gt * st.cos(), "cos": lambda: gt * -st.sin()}[op]


def row(name: str, threads: int, om: float, np_s: float, th: float) -> None:
    print(f"{name:18s} {threads:3d} {om * 1e6:9.1f} {np_s * 1e6:9.1f} {th * 1e6:9.1f} "
          f"{np_s / om:8.2f} {th / om:8.2f}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="shorter timing budget")
    args = parser.parse_args()
    budget = 0.1 if args.quick else 0.4
    rng = np.random.default_rng(0)
    x = rng.standard_normal(N, dtype=np.float32) * np.float32(3.0)
    g = rng.standard_normal(N, dtype=np.float32)
    out = np.empty_like(x)
    print(f"{'operation (1M)':18s} {'thr':>3s} {'onemodel':>9s} {'numpy':>9s} {'torch':>9s} "
          f"{'np/om':>8s} {'torch/om':>8s}   (microseconds)")
    b = rng.standard_normal(N, dtype=np.float32)
    for name, fn in (("numpy add", lambda: np.add(x, b, out=out)),
                     ("numpy mul", lambda: np.multiply(x, b, out=out))):
        t = best_of(fn, budget, 20)
        print(f"{name:18s} {1:3d} {'':9s} {t * 1e6:9.1f}")
    for op in _vmath.OPS:
        xi = np.abs(x) + np.float32(1e-3) if op == "log" else x
        xt, ot, gt = torch.from_numpy(xi), torch.from_numpy(out.copy()), torch.from_numpy(g)
        np_fn = numpy_forward(xi, out).get(op)
        np_s = best_of(np_fn, budget, 20) if np_fn else float("nan")
        _vmath.unary(op, xi, out, 1)
        saved = out.copy() if _vmath.saves_output(op) else xi
        st = torch.from_numpy(saved)
        grad_in = np.empty_like(x)
        for threads in (1, 2):
            torch.set_num_threads(threads)
            om = best_of(lambda: _vmath.unary(op, xi, out, threads), budget, 20)
            row(op, threads, om, np_s, best_of(torch_forward(op, xt, ot), budget, 20))
        for threads in (1, 2):
            torch.set_num_threads(threads)
            om = best_of(lambda: _vmath.unary_backward(op, saved, g, grad_in, threads),
                         budget, 20)
            row(op + " bwd", threads, om, float("nan"),
                best_of(torch_backward(op, st, gt), budget, 20))


if __name__ == "__main__":
    main()
