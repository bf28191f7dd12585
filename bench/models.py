"""The five reference models, forward + backward: onemodel against PyTorch, 1 and 2 threads.

MLP 784-1024-1024-10 (batch 256); ConvNet [64, 3, 32, 32] with conv3x3 32/64/128, batch norm,
ReLU, max pool, global average pool, Linear 10; Transformer classifier (Embedding 1000x128, two
encoder layers d=128, 4 heads, ff 512, dropout 0.1, sequence 64, batch 32, mean pool, Linear
10); CRNN ([32, 1, 32, 128], four conv blocks 32/64/128/128 with batch norm and pools (2,2),
(2,2), (2,1), (2,1), a two-layer bidirectional LSTM of 128, Linear 80, CTC); LSTM language model
(Embedding 5000x256, two-layer LSTM 512, Linear 5000, batch 32, sequence 64).
Both libraries build the same architecture on the same inputs (weights are each library's own
initialisation: the work does not depend on their values). Each timing is one training step's
forward, loss and backward, best of interleaved runs, in exact mode.
Run: python bench/models.py [--quick] [--mode exact|fast]
"""
from __future__ import annotations

import argparse

import numpy as np
import torch
import torch.nn as tnn
import torch.nn.functional as TF
from _timing import best_seconds

import onemodel as om
import onemodel.functional as F
from onemodel import nn


def conv_block(lib, cin: int, cout: int, pool):
    layers = [lib.Conv2d(cin, cout, 3, padding=1), lib.BatchNorm2d(cout), lib.ReLU()]
    return layers + ([lib.MaxPool2d(pool, pool)] if pool else [])


def mlp(lib):
    return lib.Sequential(lib.Linear(784, 1024), lib.ReLU(), lib.Linear(1024, 1024), lib.ReLU(),
                          lib.Linear(1024, 10))


def convnet(lib):
    return lib.Sequential(*conv_block(lib, 3, 32, 2), *conv_block(lib, 32, 64, 2),
                          *conv_block(lib, 64, 128, None), lib.AdaptiveAvgPool2d(1),
                          lib.Flatten(), lib.Linear(128, 10))


def crnn_features(lib):
    return lib.Sequential(*conv_block(lib, 1, 32, (2, 2)), *conv_block(lib, 32, 64, (2, 2)),
                          *conv_block(lib, 64, 128, (2, 1)), *conv_block(lib, 128, 128, (2, 1)))


def classifier_step(model, loss, x, y):
    def step():
        loss(model(x), y).backward()
    return step


def transformer_om():
    embed, head = nn.Embedding(1000, 128), nn.Linear(128, 10)
    layers = [nn.TransformerEncoderLayer(128, 4, 512, dropout=0.1, batch_first=True, seed=i)
              for i in range(2)]
    ids = om.from_numpy(np.random.default_rng(0).integers(0, 1000, (32, 64)))
    y = np.random.default_rng(1).integers(0, 10, 32)

    def step():
        h = embed(ids)
        for layer in layers:
            h = layer(h)
        F.cross_entropy(head(h.mean(1)), y).backward()
    return step


def transformer_torch():
    embed, head = tnn.Embedding(1000, 128), tnn.Linear(128, 10)
    encoder = tnn.TransformerEncoder(
        tnn.TransformerEncoderLayer(128, 4, 512, dropout=0.1, batch_first=True), 2,
        enable_nested_tensor=False)
    ids = torch.from_numpy(np.random.default_rng(0).integers(0, 1000, (32, 64)))
    y = torch.from_numpy(np.random.default_rng(1).integers(0, 10, 32))

    def step():
        TF.cross_entropy(head(encoder(embed(ids)).mean(1)), y).backward()
    return step


CTC_TARGETS = np.random.default_rng(2).integers(1, 80, (32, 12))


def crnn_om():
    features, lstm = crnn_features(nn), nn.LSTM(256, 128, 2, bidirectional=True)
    head = nn.Linear(256, 80)
    x = om.from_numpy(np.random.default_rng(0).standard_normal((32, 1, 32, 128)))

    def step():
        f = features(x)                                        # (32, 128, 2, 32)
        seq = f.reshape(32, 256, 32).permute(2, 0, 1)          # (T=32, B, 256)
        out, _ = lstm(seq)
        logp = F.log_softmax(head(out), 2)
        F.ctc_loss(logp, CTC_TARGETS, [32] * 32, [12] * 32, zero_infinity=True).backward()
    return step


def crnn_torch():
    features, lstm = crnn_features(tnn), tnn.LSTM(256, 128, 2, bidirectional=True)
    head = tnn.Linear(256, 80)
    x = torch.from_numpy(np.random.default_rng(0).standard_normal((32, 1, 32, 128)).astype(
        np.float32))
    targets = torch.from_numpy(CTC_TARGETS)

    def step():
        f = features(x)
        seq = f.reshape(32, 256, 32).permute(2, 0, 1)
        out, _ = lstm(seq)
        logp = head(out).log_softmax(2)
        TF.ctc_loss(logp, targets, [32] * 32, [12] * 32, zero_infinity=True).backward()
    return step


def lm_om():
    embed, lstm, head = nn.Embedding(5000, 256), nn.LSTM(256, 512, 2), nn.Linear(512, 5000)
    ids = om.from_numpy(np.random.default_rng(0).integers(0, 5000, (64, 32)))
    y = np.random.default_rng(1).integers(0, 5000, 64 * 32)

    def step():
        out, _ = lstm(embed(ids))
        F.cross_entropy(head(out).reshape(-1, 5000), y).backward()
    return step


def lm_torch():
    embed, lstm, head = tnn.Embedding(5000, 256), tnn.LSTM(256, 512, 2), tnn.Linear(512, 5000)
    ids = torch.from_numpy(np.random.default_rng(0).integers(0, 5000, (64, 32)))
    y = torch.from_numpy(np.random.default_rng(1).integers(0, 5000, 64 * 32))

    def step():
        out, _ = lstm(embed(ids))
        TF.cross_entropy(head(out).reshape(-1, 5000), y).backward()
    return step


def image_steps(build, shape, classes=10):
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape).astype(np.float32)
    y = rng.integers(0, classes, shape[0])
    om_model, torch_model = build(nn), build(tnn)
    return (classifier_step(om_model, F.cross_entropy, om.from_numpy(x), y),
            classifier_step(torch_model, TF.cross_entropy, torch.from_numpy(x),
                            torch.from_numpy(y)))


MODELS = {
    "MLP 784-1024-1024-10 b256": lambda: image_steps(mlp, (256, 784)),
    "ConvNet [64,3,32,32]": lambda: image_steps(convnet, (64, 3, 32, 32)),
    "Transformer cls b32 L64": lambda: (transformer_om(), transformer_torch()),
    "CRNN [32,1,32,128] + CTC": lambda: (crnn_om(), crnn_torch()),
    "LSTM LM b32 L64 V5000": lambda: (lm_om(), lm_torch()),
}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--mode", default="exact", choices=("exact", "fast"))
    args = p.parse_args()
    om.set_mode(args.mode)
    budget = 0.5 if args.quick else 2.0
    print(f"mode {args.mode}, isa {om.config()['isa']}; forward + loss + backward per step, ms")
    print(f"{'model':<28} {'thr':>3} {'onemodel':>9} {'torch':>9} {'om/torch':>8}")
    for threads in (1, 2):
        om.set_num_threads(threads)
        torch.set_num_threads(threads)
        for name, build in MODELS.items():
            om_step, torch_step = build()
            t_om, t_torch = best_seconds([om_step, torch_step], budget)
            print(f"{name:<28} {threads:>3} {t_om * 1e3:9.2f} {t_torch * 1e3:9.2f} "
                  f"{t_om / t_torch:8.2f}", flush=True)


if __name__ == "__main__":
    main()
