"""Every layer of the five reference models, at its shape there: onemodel against PyTorch.

The models are those of bench/models.py (MLP batch 256; ConvNet [64, 3, 32, 32]; Transformer
classifier, batch 32, sequence 64, d 128; CRNN [32, 1, 32, 128] with a bidirectional LSTM of 128
and CTC; LSTM language model, batch 32, sequence 64), and the causal attention of the GPT-style
decoder of bench/ported.py. Each row is one layer on the input it sees
in its model (a shape that occurs twice is timed once): forward, then backward from a fixed
upstream gradient to every parameter and to the input, with the same weights in both libraries
(moved through onemodel.interop), in training mode and exact mode. Best of interleaved runs, in
milliseconds, with the onemodel / PyTorch ratio, at 1 and 2 threads.
Run: python bench/layers.py [--quick]
"""
from __future__ import annotations

import argparse
from typing import Callable, Iterator

import numpy as np
import torch
import torch.nn as tnn
import torch.nn.functional as TF
from _timing import best_seconds

import onemodel as om
import onemodel.functional as F
from onemodel import interop, nn

Step = Callable[[], None]


def same_weights(ours: nn.Module, theirs: tnn.Module) -> None:
    theirs.load_state_dict(interop.to_torch_state_dict(ours))


def first(out):
    """The output of modules that return (output, state)."""
    return out[0] if isinstance(out, tuple) else out


def module_steps(ours: nn.Module, theirs: tnn.Module, shape: tuple, vocab: int = 0,
                 call: Callable = lambda module, x: first(module(x)),
                 rng: np.random.Generator = np.random.default_rng(0)) -> tuple[Step, Step]:
    """Forward + backward of one module on a (shape) input: floats, or ids below `vocab`;
    `call` applies the module and returns the output to differentiate."""
    same_weights(ours, theirs)
    ours.train()
    theirs.train()
    if vocab:
        x = rng.integers(0, vocab, shape)
        x_om, x_torch = om.from_numpy(x), torch.from_numpy(x)
    else:
        x = rng.standard_normal(shape, dtype=np.float32)
        x_om = om.tensor(x, requires_grad=True)
        x_torch = torch.from_numpy(x).requires_grad_()
    with torch.no_grad():
        gy = rng.standard_normal(tuple(call(theirs, x_torch).shape), dtype=np.float32)
    gy_torch = torch.from_numpy(gy)

    def om_step():
        ours.zero_grad()
        x_om.grad = None
        call(ours, x_om).backward(gy)

    def torch_step():
        theirs.zero_grad()
        x_torch.grad = None
        call(theirs, x_torch).backward(gy_torch)

    return om_step, torch_step


def loss_steps(om_loss: Callable, torch_loss: Callable, shape: tuple,
               rng: np.random.Generator = np.random.default_rng(1)) -> tuple[Step, Step]:
    """Forward + backward of a loss of (shape) scores."""
    x = rng.standard_normal(shape, dtype=np.float32)
    x_om = om.tensor(x, requires_grad=True)
    x_torch = torch.from_numpy(x).requires_grad_()

    def om_step():
        x_om.grad = None
        om_loss(x_om).backward()

    def torch_step():
        x_torch.grad = None
        torch_loss(x_torch).backward()

    return om_step, torch_step


def causal_attention_steps(shape: tuple, rng: np.random.Generator = np.random.default_rng(2)
                           ) -> tuple[Step, Step]:
    """Forward + backward of causal scaled dot-product attention on (shape) q, k and v: half
    its scores are masked to -inf, whose exp underflows."""
    q, k, v, gy = (rng.standard_normal(shape, dtype=np.float32) for _ in range(4))
    ours = [om.tensor(a, requires_grad=True) for a in (q, k, v)]
    theirs = [torch.from_numpy(a).requires_grad_() for a in (q, k, v)]
    gy_torch = torch.from_numpy(gy)

    def om_step():
        for t in ours:
            t.grad = None
        F.scaled_dot_product_attention(*ours, is_causal=True).backward(gy)

    def torch_step():
        for t in theirs:
            t.grad = None
        TF.scaled_dot_product_attention(*theirs, is_causal=True).backward(gy_torch)

    return om_step, torch_step


def conv_bn_pool(prefix: str, batch: int, cin: int, cout: int, size: tuple, pool) -> Iterator:
    """One conv block of the ConvNet or the CRNN: conv 3x3, batch norm, ReLU, max pool."""
    h, w = size
    yield (f"{prefix} Conv2d {cin}->{cout} 3x3 [{batch},{cin},{h},{w}]",
           lambda: module_steps(nn.Conv2d(cin, cout, 3, padding=1),
                                tnn.Conv2d(cin, cout, 3, padding=1), (batch, cin, h, w)))
    yield (f"{prefix} BatchNorm2d [{batch},{cout},{h},{w}]",
           lambda: module_steps(nn.BatchNorm2d(cout), tnn.BatchNorm2d(cout),
                                (batch, cout, h, w)))
    yield (f"{prefix} ReLU [{batch},{cout},{h},{w}]",
           lambda: module_steps(nn.ReLU(), tnn.ReLU(), (batch, cout, h, w)))
    if pool:
        yield (f"{prefix} MaxPool2d {pool} [{batch},{cout},{h},{w}]",
               lambda: module_steps(nn.MaxPool2d(pool, pool), tnn.MaxPool2d(pool, pool),
                                    (batch, cout, h, w)))


CTC_TARGETS = np.random.default_rng(2).integers(1, 80, (32, 12))


def cases() -> Iterator[tuple[str, Callable[[], tuple[Step, Step]]]]:
    # MLP 784-1024-1024-10, batch 256
    for fin, fout in ((784, 1024), (1024, 1024), (1024, 10)):
        yield (f"MLP Linear {fin}->{fout} [256,{fin}]",
               lambda fin=fin, fout=fout: module_steps(nn.Linear(fin, fout),
                                                       tnn.Linear(fin, fout), (256, fin)))
    yield "MLP ReLU [256,1024]", lambda: module_steps(nn.ReLU(), tnn.ReLU(), (256, 1024))
    yield ("MLP cross_entropy [256,10]",
           lambda: loss_steps(lambda s: F.cross_entropy(s, np.arange(256) % 10),
                              lambda s: TF.cross_entropy(s, torch.arange(256) % 10), (256, 10)))
    # ConvNet [64, 3, 32, 32]
    yield from conv_bn_pool("ConvNet", 64, 3, 32, (32, 32), 2)
    yield from conv_bn_pool("ConvNet", 64, 32, 64, (16, 16), 2)
    yield from conv_bn_pool("ConvNet", 64, 64, 128, (8, 8), None)
    yield ("ConvNet AdaptiveAvgPool2d [64,128,8,8]",
           lambda: module_steps(nn.AdaptiveAvgPool2d(1), tnn.AdaptiveAvgPool2d(1),
                                (64, 128, 8, 8)))
    yield ("ConvNet Linear 128->10 [64,128]",
           lambda: module_steps(nn.Linear(128, 10), tnn.Linear(128, 10), (64, 128)))
    # Transformer classifier: batch 32, sequence 64
    yield ("Transformer Embedding 1000x128 [32,64]",
           lambda: module_steps(nn.Embedding(1000, 128), tnn.Embedding(1000, 128), (32, 64),
                                vocab=1000))
    yield ("Transformer MultiheadAttention d128 h4 [32,64,128]",
           lambda: module_steps(nn.MultiheadAttention(128, 4, dropout=0.1, batch_first=True),
                                tnn.MultiheadAttention(128, 4, dropout=0.1, batch_first=True),
                                (32, 64, 128),
                                call=lambda m, x: m(x, x, x, need_weights=False)[0]))
    yield ("Transformer EncoderLayer d128 h4 ff512 [32,64,128]",
           lambda: module_steps(nn.TransformerEncoderLayer(128, 4, 512, dropout=0.1,
                                                           batch_first=True),
                                tnn.TransformerEncoderLayer(128, 4, 512, dropout=0.1,
                                                            batch_first=True), (32, 64, 128)))
    yield ("Transformer LayerNorm 128 [32,64,128]",
           lambda: module_steps(nn.LayerNorm(128), tnn.LayerNorm(128), (32, 64, 128)))
    # The GPT-style decoder of bench/ported.py: batch 16, 4 heads, context 64, head width 24
    yield ("GPT causal scaled_dot_product_attention [16,4,64,24]",
           lambda: causal_attention_steps((16, 4, 64, 24)))
    # CRNN [32, 1, 32, 128]
    yield from conv_bn_pool("CRNN", 32, 1, 32, (32, 128), (2, 2))
    yield from conv_bn_pool("CRNN", 32, 32, 64, (16, 64), (2, 2))
    yield from conv_bn_pool("CRNN", 32, 64, 128, (8, 32), (2, 1))
    yield from conv_bn_pool("CRNN", 32, 128, 128, (4, 32), (2, 1))
    yield ("CRNN LSTM 256->128 x2 bi [32,32,256]",
           lambda: module_steps(nn.LSTM(256, 128, 2, bidirectional=True),
                                tnn.LSTM(256, 128, 2, bidirectional=True), (32, 32, 256)))
    yield ("CRNN Linear 256->80 [32,32,256]",
           lambda: module_steps(nn.Linear(256, 80), tnn.Linear(256, 80), (32, 32, 256)))
    yield ("CRNN log_softmax + ctc_loss [32,32,80]",
           lambda: loss_steps(
               lambda s: F.ctc_loss(F.log_softmax(s, 2), CTC_TARGETS, [32] * 32, [12] * 32),
               lambda s: TF.ctc_loss(s.log_softmax(2), torch.from_numpy(CTC_TARGETS),
                                     [32] * 32, [12] * 32), (32, 32, 80)))
    # LSTM language model: sequence 64, batch 32
    yield ("LM Embedding 5000x256 [64,32]",
           lambda: module_steps(nn.Embedding(5000, 256), tnn.Embedding(5000, 256), (64, 32),
                                vocab=5000))
    yield ("LM LSTM 256->512 x2 [64,32,256]",
           lambda: module_steps(nn.LSTM(256, 512, 2), tnn.LSTM(256, 512, 2), (64, 32, 256)))
    yield ("LM Linear 512->5000 [64,32,512]",
           lambda: module_steps(nn.Linear(512, 5000), tnn.Linear(512, 5000), (64, 32, 512)))
    yield ("LM cross_entropy [2048,5000]",
           lambda: loss_steps(lambda s: F.cross_entropy(s, np.arange(2048) % 5000),
                              lambda s: TF.cross_entropy(s, torch.arange(2048) % 5000),
                              (2048, 5000)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="shorter timing budget")
    args = parser.parse_args()
    budget = 0.3 if args.quick else 1.5
    print(f"isa {om.config()['isa']}, exact mode; forward + backward per layer, ms")
    print(f"{'layer [input shape]':<56} {'thr':>3} {'onemodel':>9} {'torch':>9} {'om/torch':>8}")
    for threads in (1, 2):
        om.set_num_threads(threads)
        torch.set_num_threads(threads)
        for name, build in cases():
            t_om, t_torch = best_seconds(list(build()), budget)
            print(f"{name:<56} {threads:>3} {t_om * 1e3:9.3f} {t_torch * 1e3:9.3f} "
                  f"{t_om / t_torch:8.2f}", flush=True)


if __name__ == "__main__":
    main()
