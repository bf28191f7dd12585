"""Seeded trainings in PyTorch, the oracle of docs/spec/training.txt section 8.

Each training runs 50 steps of a small model with gradient-norm clipping (1.0) and the
warmup_cosine schedule of section 10 (5 warm-up steps, then a half cosine to 10% of the base
rate at step 50), written here from its formula and set on the optimizer before every step.
For each it records the initial weights (the PyTorch state dict as numpy), the data, the batch
order, the loss of every step (before that step's update) and the final state dict, and
writes them to testdata/training/<name>.npz. tests/train/test_training_oracle.py loads the same
weights and batches into onemodel's modules and compares.

    python tools/training_oracle.py            # writes every training
    python tools/training_oracle.py mlp_adamw  # writes one

PyTorch 2.13.0 on CPU (the version the tests name). Parameters whose true gradient is zero are
listed in each training's `excluded` (section 8): the biases of convolutions in front of batch
norm and the batch norm running means that absorb them; the key rows of attention's
in_proj_bias in `excluded_rows`.
"""
from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch
from torch import nn
from torch.nn import functional as TF

STEPS = 50
WARMUP = 5
FINAL_FACTOR = 0.1
MAX_NORM = 1.0
OUT = Path(__file__).resolve().parent.parent / "testdata" / "training"

TRAININGS: dict[str, dict[str, Any]] = {
    "mlp_adamw": dict(model="mlp", optimizer="adamw", lr=3e-3, weight_decay=0.01),
    "mlp_sgd_nesterov": dict(model="mlp", optimizer="sgd", lr=0.05, momentum=0.9,
                             nesterov=True, weight_decay=1e-4),
    "mlp_adam_amsgrad": dict(model="mlp", optimizer="adam", lr=3e-3, amsgrad=True,
                             weight_decay=1e-4),
    "convnet_adamw": dict(model="convnet", optimizer="adamw", lr=3e-3, weight_decay=0.01,
                          excluded=["0.bias", "4.bias", "1.running_mean", "5.running_mean"]),
    "transformer_adamw": dict(model="transformer", optimizer="adamw", lr=1e-3,
                              weight_decay=0.01,
                              excluded_rows={f"enc.layers.{i}.self_attn.in_proj_bias": [32, 64]
                                             for i in range(2)}),
    "lstm_ctc_adamw": dict(model="lstm_ctc", optimizer="adamw", lr=3e-3, weight_decay=0.01),
}


def lr_at(base: float, step: int) -> float:
    """warmup_cosine (docs/spec/training.txt 10): base·(s+1)/W, a half cosine down to f·base."""
    if step < WARMUP:
        return base * (step + 1) / WARMUP
    p = min((step - WARMUP) / (STEPS - WARMUP), 1.0)
    return base * (FINAL_FACTOR + (1.0 - FINAL_FACTOR) * (1.0 + math.cos(math.pi * p)) / 2.0)


# ---- data: every array a training reads, and the batch size -----------------------------------

def data_mlp(rng: np.random.Generator) -> tuple[dict, int]:
    x = rng.standard_normal((512, 32)).astype(np.float32)
    w = rng.standard_normal((32, 10))
    y = np.argmax(x @ w + 0.5 * rng.standard_normal((512, 10)), 1)
    return dict(x=x, y=y.astype(np.int64)), 32


def data_convnet(rng: np.random.Generator) -> tuple[dict, int]:
    x = rng.standard_normal((256, 1, 12, 12)).astype(np.float32)
    quadrants = x.reshape(256, 2, 6, 2, 6).mean((2, 4)).reshape(256, 4)
    return dict(x=x, y=np.argmax(quadrants, 1).astype(np.int64)), 16


def data_transformer(rng: np.random.Generator) -> tuple[dict, int]:
    x = rng.integers(0, 16, (256, 8))
    return dict(x=x.astype(np.int64), y=((x < 8).sum(1) % 4).astype(np.int64)), 16


def data_lstm_ctc(rng: np.random.Generator) -> tuple[dict, int]:
    """Sequences of 16 steps of 8 features whose first input_length steps spell the target
    (labels 1..5, blank 0) with noise; targets padded to 5."""
    n, steps, features = 64, 16, 8
    target_lengths = rng.integers(2, 6, n)
    targets = rng.integers(1, 6, (n, 5))
    input_lengths = rng.integers(2 * target_lengths + 1, steps + 1)
    x = 0.5 * rng.standard_normal((steps, n, features))
    for b in range(n):
        span = input_lengths[b] / target_lengths[b]
        for k in range(target_lengths[b]):
            x[int(k * span):int((k + 1) * span), b, targets[b, k]] += 2.0
        x[input_lengths[b]:, b] = 0.0
    return dict(x=x.astype(np.float32), targets=targets.astype(np.int64),
                input_lengths=input_lengths.astype(np.int64),
                target_lengths=target_lengths.astype(np.int64)), 8


DATA: dict[str, Callable] = dict(mlp=data_mlp, convnet=data_convnet,
                                 transformer=data_transformer, lstm_ctc=data_lstm_ctc)


# ---- models and their loss on a batch ----------------------------------------------------------

class Transformer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(16, 32)
        layer = nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True)
        self.enc = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.head = nn.Linear(32, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.enc(self.emb(x)).mean(1))


class LstmCtc(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.rnn = nn.LSTM(8, 16, bidirectional=True)
        self.out = nn.Linear(32, 6)

    def forward(self, x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        packed = nn.utils.rnn.pack_padded_sequence(x, lengths, enforce_sorted=False)
        y, _ = self.rnn(packed)
        y, _ = nn.utils.rnn.pad_packed_sequence(y, total_length=x.shape[0])
        return TF.log_softmax(self.out(y), 2)


def build(model: str) -> nn.Module:
    if model == "mlp":
        return nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(),
                             nn.Linear(64, 10))
    if model == "convnet":
        return nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                             nn.MaxPool2d(2), nn.Conv2d(8, 16, 3, padding=1),
                             nn.BatchNorm2d(16), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                             nn.Flatten(), nn.Linear(16, 4))
    return Transformer() if model == "transformer" else LstmCtc()


def batch_loss(model: str, net: nn.Module, data: dict, idx: np.ndarray) -> torch.Tensor:
    if model == "lstm_ctc":
        x = torch.from_numpy(data["x"][:, idx])
        lengths = torch.from_numpy(data["input_lengths"][idx])
        logp = net(x, lengths)
        return TF.ctc_loss(logp, torch.from_numpy(data["targets"][idx]), lengths,
                           torch.from_numpy(data["target_lengths"][idx]), blank=0,
                           reduction="mean", zero_infinity=True)
    return TF.cross_entropy(net(torch.from_numpy(data["x"][idx])),
                            torch.from_numpy(data["y"][idx]))


def optimizer(config: dict, params: list) -> torch.optim.Optimizer:
    kind, lr, wd = config["optimizer"], config["lr"], config["weight_decay"]
    if kind == "sgd":
        return torch.optim.SGD(params, lr=lr, momentum=config["momentum"],
                               nesterov=config["nesterov"], weight_decay=wd)
    cls = torch.optim.AdamW if kind == "adamw" else torch.optim.Adam
    return cls(params, lr=lr, weight_decay=wd, amsgrad=config.get("amsgrad", False))


def state(net: nn.Module) -> dict[str, np.ndarray]:
    return {k: v.detach().numpy().copy() for k, v in net.state_dict().items()}


def run(name: str) -> dict[str, Any]:
    """One training: {'config', 'data', 'order', 'init', 'losses', 'final'}."""
    config = dict(TRAININGS[name], steps=STEPS, warmup=WARMUP, final_factor=FINAL_FACTOR,
                  max_norm=MAX_NORM)
    seed = sum(name.encode())
    rng = np.random.default_rng(seed)
    data, batch = DATA[config["model"]](rng)
    n = len(data["x"]) if config["model"] != "lstm_ctc" else data["x"].shape[1]
    order = np.stack([rng.choice(n, batch, replace=False) for _ in range(STEPS)])
    torch.manual_seed(seed)
    net = build(config["model"]).train()
    init = state(net)
    params = list(net.parameters())
    opt = optimizer(config, params)
    losses = []
    for step in range(STEPS):
        loss = batch_loss(config["model"], net, data, order[step])
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(params, MAX_NORM)
        for group in opt.param_groups:
            group["lr"] = lr_at(config["lr"], step)
        opt.step()
        losses.append(loss.item())
    return dict(config=config, data=data, order=order, init=init,
                losses=np.array(losses), final=state(net))


def save(name: str, result: dict[str, Any]) -> Path:
    arrays = {"config": np.array(json.dumps(result["config"], sort_keys=True)),
              "order": result["order"], "losses": result["losses"]}
    for group in ("data", "init", "final"):
        arrays.update({f"{group}/{k}": v for k, v in result[group].items()})
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / f"{name}.npz"
    np.savez_compressed(path, **arrays)
    return path


def main(names: list[str]) -> None:
    torch.set_num_threads(1)
    for name in names or list(TRAININGS):
        result = run(name)
        path = save(name, result)
        print(f"{name:20s} loss {result['losses'][0]:.4f} -> {result['losses'][-1]:.4f}  "
              f"{path.stat().st_size / 1024:.0f} KiB")


if __name__ == "__main__":
    if torch.__version__.split("+")[0] != "2.13.0":
        print(f"warning: PyTorch {torch.__version__}, the oracle files name 2.13.0",
              file=sys.stderr)
    main(sys.argv[1:])
