"""Convolution, pooling and batch-norm speed: onemodel against numpy and PyTorch, 1 and 2 threads.

The layers of a small conv net on a batch of 64 (1 -> 32 -> 64 channels, 3x3 kernels, padding
1) on 28x28, 14x14 and 8x8 images: forward, weight gradient, input gradient, and forward +
backward (input, weight and bias gradients), then 2x2 max pooling and batch norm (training) on
the first layer's output.
numpy runs the forward passes it can express (the convolution as sliding windows times a
tensordot). Prints milliseconds and onemodel / PyTorch. Run: python bench/conv.py [--quick]
"""
from __future__ import annotations

import argparse

import numpy as np
import torch
import torch.nn.functional as TF
from _timing import best_of
from threadpoolctl import threadpool_limits

from onemodel._kernels import _conv

# name, input (N, C, H, W), output channels
CONVS = [
    ("conv 1->32 28x28", (64, 1, 28, 28), 32),
    ("conv 32->64 14x14", (64, 32, 14, 14), 64),
    ("conv 1->32 8x8", (64, 1, 8, 8), 32),
    ("conv 32->64 8x8", (64, 32, 8, 8), 64),
]
ARGS = ((1, 1), (1, 1), (1, 1), 1)  # stride, padding, dilation, groups


def numpy_conv(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    win = np.lib.stride_tricks.sliding_window_view(xp, (3, 3), axis=(2, 3))  # N C H W 3 3
    return np.tensordot(win, w, axes=((1, 4, 5), (1, 2, 3))).transpose(0, 3, 1, 2) \
        + b[:, None, None]


def conv_cases(rng: np.random.Generator):
    for name, shape, k in CONVS:
        x = rng.standard_normal(shape, dtype=np.float32)
        w = rng.standard_normal((k, shape[1], 3, 3), dtype=np.float32)
        b = rng.standard_normal(k, dtype=np.float32)
        y = np.empty((shape[0], k) + shape[2:], np.float32)
        gy = rng.standard_normal(y.shape, dtype=np.float32)
        gx, gw, gb = np.empty_like(x), np.empty_like(w), np.empty_like(b)
        tx, tw, tb = (torch.from_numpy(a).requires_grad_() for a in (x, w, b))
        tgy = torch.from_numpy(gy)

        def om_fwd(t):
            _conv.conv2d_forward(x, w, b, y, *ARGS, t)

        def om_both(t):
            om_fwd(t)
            _conv.conv2d_backward(x, w, gy, gx, gw, gb, *ARGS, t)

        def th_fwd():
            with torch.no_grad():
                TF.conv2d(tx, tw, tb, 1, 1)

        def th_both():
            tx.grad = tw.grad = tb.grad = None
            TF.conv2d(tx, tw, tb, 1, 1).backward(tgy)

        def om_part(weight: bool):
            return lambda t: _conv.conv2d_backward(x, w, gy, None if weight else gx,
                                                   gw if weight else None, None, *ARGS, t)

        def th_part(weight: bool):
            mask = (not weight, weight, False)
            return lambda: torch.ops.aten.convolution_backward(
                tgy, tx.detach(), tw.detach(), [k], (1, 1), (1, 1), (1, 1), False, (0, 0), 1,
                mask)

        yield f"{name} fwd", om_fwd, lambda: numpy_conv(x, w, b), th_fwd
        yield f"{name} weight grad", om_part(True), None, th_part(True)
        yield f"{name} input grad", om_part(False), None, th_part(False)
        yield f"{name} fwd+bwd", om_both, None, th_both


def other_cases(rng: np.random.Generator):
    x = rng.standard_normal((64, 32, 28, 28), dtype=np.float32)
    planes = x.reshape(-1, 28, 28)
    starts = np.arange(14, dtype=np.int64) * 2
    win = (starts, starts + 2, starts, starts + 2)
    y = np.empty((planes.shape[0], 14, 14), np.float32)
    idx = np.empty(y.shape, np.int64)
    tx = torch.from_numpy(x)

    def om_pool(t):
        _conv.max_pool2d(planes, y, idx, *win, 1, 1, t)  # no dilation

    def np_pool():
        return x.reshape(64, 32, 14, 2, 14, 2).max(axis=(3, 5))

    def th_pool():
        TF.max_pool2d(tx, 2)

    yield "max_pool 2x2 (64,32,28,28)", om_pool, np_pool, th_pool

    x3 = x.reshape(64, 32, -1)
    stats = [np.empty(32, np.float32) for _ in range(4)]
    ones, zeros = np.ones(32, np.float32), np.zeros(32, np.float32)
    out = np.empty_like(x3)

    def om_bn(t):
        _conv.batch_norm_stats(x3, 1e-5, *stats, t)
        _conv.batch_norm_apply(x3, stats[0], stats[3], ones, zeros, out, t)

    def np_bn():
        m = x.mean(axis=(0, 2, 3), keepdims=True)
        v = x.var(axis=(0, 2, 3), keepdims=True)
        return (x - m) / np.sqrt(v + 1e-5)

    def th_bn():
        TF.batch_norm(tx, None, None, training=True)

    yield "batch_norm (64,32,28,28)", om_bn, np_bn, th_bn


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="shorter timing budget")
    args = parser.parse_args()
    budget = 0.2 if args.quick else 1.0
    rng = np.random.default_rng(0)
    print(f"{'case':34s} {'thr':>3s} {'onemodel':>9s} {'numpy':>9s} {'torch':>9s} "
          f"{'om/torch':>8s}   (ms; om/torch < 1 is faster)")
    for cases in (conv_cases(rng), other_cases(rng)):
        for name, om, npy, th in cases:
            for threads in (1, 2):
                torch.set_num_threads(threads)
                t_om = best_of(lambda: om(threads), budget)
                t_th = best_of(th, budget)
                if npy is None:
                    t_np = "-"
                else:
                    with threadpool_limits(threads, user_api="blas"):
                        t_np = f"{best_of(npy, budget) * 1e3:9.2f}"
                print(f"{name:34s} {threads:3d} {t_om * 1e3:9.2f} {t_np:>9s} "
                      f"{t_th * 1e3:9.2f} {t_om / t_th:8.2f}")


if __name__ == "__main__":
    main()
