"""Matrix-product throughput: onemodel against numpy and PyTorch, at 1 and 2 threads.

Square products and the products of training an MLP layer (batch 256, 784 -> 1024): the
forward x @ W.T with Linear's (out, in) weight layout, and the backward dX = dY @ W and
dW = dY.T @ X. Prints GFLOP/s and onemodel / PyTorch. Run: python bench/gemm.py [--quick]
"""
from __future__ import annotations

import argparse

import numpy as np
import torch
from _timing import best_of
from threadpoolctl import threadpool_limits

from onemodel._kernels import _gemm

# name, (rows, cols) of a and b as stored, trans_a, trans_b
CASES = [
    ("512 A.B", (512, 512), (512, 512), False, False),
    ("1024 A.B", (1024, 1024), (1024, 1024), False, False),
    ("2048 A.B", (2048, 2048), (2048, 2048), False, False),
    ("fwd x.W (784,1024)", (256, 784), (784, 1024), False, False),
    ("fwd x.W^T (1024,784)", (256, 784), (1024, 784), False, True),
    ("bwd dX = dY.W", (256, 1024), (1024, 784), False, False),
    ("bwd dW = dY^T.X", (256, 1024), (256, 784), True, False),
]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="shorter timing budget")
    args = parser.parse_args()
    budget = 0.15 if args.quick else 0.6
    rng = np.random.default_rng(0)
    print(f"{'product':24s} {'thr':>3s} {'onemodel':>9s} {'numpy':>9s} {'torch':>9s} "
          f"{'om/torch':>8s}   (GFLOP/s)")
    for name, sa, sb, ta, tb in CASES:
        a = rng.standard_normal(sa, dtype=np.float32)
        b = rng.standard_normal(sb, dtype=np.float32)
        m, k = (sa[1], sa[0]) if ta else sa
        n = sb[0] if tb else sb[1]
        out = np.empty((m, n), np.float32)
        opa, opb = (a.T if ta else a), (b.T if tb else b)
        tA, tB = torch.from_numpy(a), torch.from_numpy(b)
        topa, topb = (tA.T if ta else tA), (tB.T if tb else tB)
        tout = torch.empty((m, n))
        flops = 2.0 * m * n * k
        for threads in (1, 2):
            torch.set_num_threads(threads)
            om = best_of(lambda: _gemm.gemm(a, b, out, ta, tb, threads), budget)
            with threadpool_limits(threads, user_api="blas"):
                npy = best_of(lambda: np.matmul(opa, opb), budget)
            th = best_of(lambda: torch.matmul(topa, topb, out=tout), budget)
            g = [flops / s / 1e9 for s in (om, npy, th)]
            print(f"{name:24s} {threads:3d} {g[0]:9.1f} {g[1]:9.1f} {g[2]:9.1f} "
                  f"{g[0] / g[2]:8.2f}")


if __name__ == "__main__":
    main()
