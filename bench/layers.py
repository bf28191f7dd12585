"""Recurrent and transformer layers: onemodel against numpy and PyTorch, 1 and 2 threads.

LSTM: T=64 steps, batch 32, input 256, hidden 192, 2 layers, bidirectional (the CRNN's
recurrent head, training.txt section 10). Transformer: one TransformerEncoderLayer, batch 32,
length 128, d_model 256, 4 heads, feed-forward 1024, dropout 0 (post-norm, relu). Each is timed
forward alone and forward + backward (all parameter and input gradients), with the same
weights in both engines (moved through onemodel.interop). numpy runs the LSTM forward (its
transcendentals are numpy's, so it is only a speed reference). Best of interleaved runs, in
milliseconds, with the onemodel / PyTorch ratio. Run: python bench/layers.py [--quick]
"""
from __future__ import annotations

import argparse

import numpy as np
import torch
from threadpoolctl import threadpool_limits

import onemodel as om
from onemodel import interop, nn

from _timing import best_seconds


def numpy_lstm(x: np.ndarray, sd: dict, layers: int, hidden: int) -> np.ndarray:
    """Forward of a bidirectional LSTM in numpy (zero initial state)."""
    def sigmoid(v):
        return 1.0 / (1.0 + np.exp(-v))

    for k in range(layers):
        outs = []
        for suffix in ("", "_reverse"):
            p = f"_l{k}{suffix}"
            xw = x @ sd["weight_ih" + p].T + sd["bias_ih" + p] + sd["bias_hh" + p]
            w_hh = sd["weight_hh" + p].T
            h = np.zeros((x.shape[1], hidden), np.float32)
            c = np.zeros_like(h)
            steps = range(x.shape[0] - 1, -1, -1) if suffix else range(x.shape[0])
            y = np.empty((x.shape[0], x.shape[1], hidden), np.float32)
            for t in steps:
                g = xw[t] + h @ w_hh
                i, f, gg, o = np.split(g, 4, axis=1)
                c = sigmoid(f) * c + sigmoid(i) * np.tanh(gg)
                h = sigmoid(o) * np.tanh(c)
                y[t] = h
            outs.append(y)
        x = np.concatenate(outs, axis=2)
    return x


def lstm_cases(rng: np.random.Generator):
    steps, batch, width, hidden, layers = 64, 32, 256, 192, 2
    ours = nn.LSTM(width, hidden, layers, bidirectional=True, seed=0)
    theirs = torch.nn.LSTM(width, hidden, layers, bidirectional=True)
    theirs.load_state_dict({k: torch.from_numpy(v)
                            for k, v in interop.to_torch_state_dict(ours).items()})
    x = rng.standard_normal((steps, batch, width), dtype=np.float32)
    gy = rng.standard_normal((steps, batch, 2 * hidden), dtype=np.float32)
    sd = ours.state_dict()
    tx = torch.from_numpy(x).requires_grad_()

    def om_fwd():
        with om.no_grad():
            ours(om.tensor(x))

    def om_both():
        ours.zero_grad()
        xo = om.tensor(x, requires_grad=True)
        ours(xo)[0].backward(gy)

    def th_fwd():
        with torch.no_grad():
            theirs(tx)

    def th_both():
        theirs.zero_grad()
        tx.grad = None
        theirs(tx)[0].backward(torch.from_numpy(gy))

    name = f"LSTM T={steps} B={batch} {width}->{hidden} x{layers} bi"
    yield f"{name} fwd", om_fwd, lambda: numpy_lstm(x, sd, layers, hidden), th_fwd
    yield f"{name} fwd+bwd", om_both, None, th_both


def transformer_cases(rng: np.random.Generator):
    batch, length, d, heads, ff = 32, 128, 256, 4, 1024
    ours = nn.TransformerEncoderLayer(d, heads, ff, dropout=0.0, seed=0)
    theirs = torch.nn.TransformerEncoderLayer(d, heads, ff, dropout=0.0, batch_first=True)
    theirs.load_state_dict({k: torch.from_numpy(v)
                            for k, v in interop.to_torch_state_dict(ours).items()})
    x = rng.standard_normal((batch, length, d), dtype=np.float32)
    gy = rng.standard_normal(x.shape, dtype=np.float32)
    tx = torch.from_numpy(x).requires_grad_()

    def om_fwd():
        with om.no_grad():
            ours(om.tensor(x))

    def om_both():
        ours.zero_grad()
        ours(om.tensor(x, requires_grad=True)).backward(gy)

    def th_fwd():
        with torch.no_grad():
            theirs(tx)

    def th_both():
        theirs.zero_grad()
        tx.grad = None
        theirs(tx).backward(torch.from_numpy(gy))

    name = f"encoder layer B={batch} L={length} d={d} h={heads} ff={ff}"
    yield f"{name} fwd", om_fwd, None, th_fwd
    yield f"{name} fwd+bwd", om_both, None, th_both


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="shorter timing budget")
    args = parser.parse_args()
    budget = 0.5 if args.quick else 3.0
    rng = np.random.default_rng(0)
    cases = list(lstm_cases(rng)) + list(transformer_cases(rng))
    print(f"{'case':<58} {'thr':>3} {'onemodel':>9} {'numpy':>9} {'torch':>9} {'om/torch':>8}")
    for threads in (1, 2):
        om.set_num_threads(threads)
        torch.set_num_threads(threads)
        with threadpool_limits(threads):
            for name, om_fn, np_fn, th_fn in cases:
                fns = [om_fn, th_fn] + ([np_fn] if np_fn else [])
                times = best_seconds(fns, budget)
                t_np = f"{times[2] * 1e3:9.2f}" if np_fn else f"{'-':>9}"
                print(f"{name:<58} {threads:>3} {times[0] * 1e3:9.2f} {t_np} "
                      f"{times[1] * 1e3:9.2f} {times[0] / times[1]:8.2f}", flush=True)


if __name__ == "__main__":
    main()
