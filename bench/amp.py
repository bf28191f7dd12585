"""Autocast against float32, one training step (forward, loss, backward), in one process.

The MLP, the transformer classifier, the convnet and the LSTM language model of
bench/models.py, each run in float32,
under autocast("bf16") and under autocast("fp16"), the three in turns (best of interleaved
runs, so a burst of load hits all alike), at 1 and 2 threads; beside them torch's CPU autocast
(bfloat16) on the same architecture. Peak memory is tracemalloc's peak during one step above
what was allocated before it (numpy reports its arrays to tracemalloc): the step's activations,
saved operands and gradients, not the weights (the float32 peak in MiB, then the autocast
peaks' ratios). "saved" is what the step holds when its backward starts, the values the graph
saved, against float32's. Ratios are against the float32 step of the same library.
Run: python bench/amp.py [--quick] [--threads 1 2] [--widen | --dot] [--model LSTM]
(--widen: bf16 products widen as on a CPU without AVX512_BF16; --dot: they run the AVX512_BF16
kernel even where it is not the default (CPUs with AMX). Both give the same bits.)
"""
from __future__ import annotations

import argparse
import contextlib
import gc
import tracemalloc

import torch
from _timing import best_seconds
from models import convnet, image_steps, lm_om, lm_torch, mlp, transformer_om, transformer_torch

import onemodel as om
from onemodel import amp

MODELS = {
    "MLP 784-1024-1024-10 b256": lambda: image_steps(mlp, (256, 784)),
    "Transformer cls b32 L64": lambda: (transformer_om(), transformer_torch()),
    "ConvNet [64,3,32,32]": lambda: image_steps(convnet, (64, 3, 32, 32)),
    "LSTM LM b32 L64 V5000": lambda: (lm_om(), lm_torch()),
}
CASTS = (None, "bf16", "fp16")


def under(step, cast, torch_step: bool = False):
    def run():
        if cast is None:
            ctx = contextlib.nullcontext()
        elif torch_step:
            ctx = torch.autocast("cpu", dtype=torch.bfloat16)
        else:
            ctx = amp.autocast(cast)
        with ctx:
            step()
    return run


def memory(fn) -> tuple[int, int]:
    """(tracemalloc's peak during the step, what is held when its backward starts: the values
    the graph saved), both above what was allocated before the step."""
    held: list[int] = []
    backward = om.Tensor.backward

    def noting_backward(self, *args, **kwargs):
        held.append(tracemalloc.get_traced_memory()[0])
        return backward(self, *args, **kwargs)

    gc.collect()
    om.Tensor.backward = noting_backward
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        fn()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
        om.Tensor.backward = backward
    return peak - base, held[0] - base


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    kernel = p.add_mutually_exclusive_group()
    kernel.add_argument("--widen", action="store_true")
    kernel.add_argument("--dot", action="store_true")
    p.add_argument("--model", default="", help="only the models whose name contains this")
    args = p.parse_args()
    if args.widen or args.dot:
        from onemodel._kernels import _gemm
        _gemm.bf16_dot(args.dot)
    budget = 0.5 if args.quick else 2.0
    print(f"isa {om.config()['isa']}, bf16 dot-product kernel "
          f"{'on' if om.config()['bf16_dot'] else 'off'}; step time and peak memory against "
          f"float32")
    print(f"{'model':<27} {'thr':>3} {'f32 ms':>8} {'bf16 x':>7} {'fp16 x':>7} "
          f"{'torch bf16 x':>12} {'f32 MiB':>8} {'mem bf16':>8} {'mem fp16':>8} {'saved bf16':>10}")
    refused: dict[str, str] = {}
    for threads in args.threads:
        om.set_num_threads(threads)
        torch.set_num_threads(threads)
        for name, build in MODELS.items():
            if args.model not in name:
                continue
            om_step, torch_step = build()
            fns = [under(om_step, c) for c in CASTS]
            torch_fns = [under(torch_step, None, True), under(torch_step, "bf16", True)]
            try:  # torch's bf16 kernels may refuse a CPU (oneDNN's LSTM without AVX512_BF16)
                torch_fns[1]()
                fns += torch_fns
            except RuntimeError as e:
                refused.setdefault(name, str(e).splitlines()[0])
            t = best_seconds(fns, budget)
            mem = [memory(fn) for fn in fns[:3]] if threads == 1 else None
            mem_text = (f"{mem[0][0] / 2**20:8.2f} {mem[1][0] / mem[0][0]:8.2f} "
                        f"{mem[2][0] / mem[0][0]:8.2f} {mem[1][1] / mem[0][1]:10.2f}"
                        if mem else "")
            torch_text = f"{t[4] / t[3]:12.2f}" if len(t) == 5 else f"{'refused':>12}"
            print(f"{name:<27} {threads:>3} {t[0] * 1e3:8.2f} {t[1] / t[0]:7.2f} "
                  f"{t[2] / t[0]:7.2f} {torch_text} {mem_text}", flush=True)
    for name, reason in refused.items():
        print(f"torch's bf16 autocast refused {name} here: {reason}")


if __name__ == "__main__":
    main()
