"""Trainings against PyTorch (docs/spec/training.txt section 8): the same initial weights and
batches in onemodel's modules give per-step losses within 1e-3 relative and final parameters within
1e-3 scaled error of PyTorch's.

The recorded runs are testdata/training/*.npz (tools/training_oracle.py writes them); the
`oracle` variant runs PyTorch in-process instead of reading the files.
"""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import onemodel as om
import onemodel.functional as F
from onemodel import nn, optim
from onemodel.interop import load_torch_state_dict, to_torch_arrays

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "testdata" / "training"
NAMES = ["mlp_adamw", "mlp_sgd_nesterov", "mlp_adam_amsgrad", "convnet_adamw",
         "transformer_adamw", "lstm_ctc_adamw"]
LOSS_TOL = 1e-3
PARAM_TOL = 1e-3


def oracle_module() -> Any:
    spec = importlib.util.spec_from_file_location("training_oracle",
                                                  ROOT / "tools" / "training_oracle.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Transformer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(16, 32)
        self.enc = nn.TransformerEncoder(
            nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True), 2)
        self.head = nn.Linear(32, 4)

    def forward(self, x: om.Tensor) -> om.Tensor:
        return self.head(F.mean(self.enc(self.emb(x)), 1))


class LstmCtc(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.rnn = nn.LSTM(8, 16, bidirectional=True)
        self.out = nn.Linear(32, 6)

    def forward(self, x: om.Tensor, lengths: np.ndarray) -> om.Tensor:
        y, _ = self.rnn(x, lengths=lengths)
        return F.log_softmax(self.out(y), 2)


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


def batch_loss(model: str, net: nn.Module, data: dict, idx: np.ndarray) -> om.Tensor:
    if model == "lstm_ctc":
        lengths = data["input_lengths"][idx]
        logp = net(om.tensor(data["x"][:, idx]), lengths)
        return F.ctc_loss(logp, data["targets"][idx], lengths, data["target_lengths"][idx],
                          blank=0, reduction="mean", zero_infinity=True)
    return F.cross_entropy(net(om.tensor(data["x"][idx])), data["y"][idx])


def optimizer(config: dict, params: list) -> optim.Optimizer:
    kind, lr, wd = config["optimizer"], config["lr"], config["weight_decay"]
    if kind == "sgd":
        return optim.SGD(params, lr=lr, momentum=config["momentum"],
                         nesterov=config["nesterov"], weight_decay=wd)
    cls = optim.AdamW if kind == "adamw" else optim.Adam
    return cls(params, lr=lr, weight_decay=wd, amsgrad=config.get("amsgrad", False))


def train(record: dict) -> tuple[np.ndarray, dict]:
    """onemodel's run of the recorded training: per-step losses and the final state dict in
    PyTorch's names."""
    config = record["config"]
    net = build(config["model"]).train()
    load_torch_state_dict(net, record["init"])
    params = list(net.parameters())
    opt = optimizer(config, params)
    schedule = optim.lr.warmup_cosine(config["lr"], config["warmup"], config["steps"],
                                       config["final_factor"])
    losses = []
    for step in range(config["steps"]):
        loss = batch_loss(config["model"], net, record["data"], record["order"][step])
        opt.zero_grad()
        loss.backward()
        optim.clip_grad_norm(params, config["max_norm"])
        schedule.apply(opt)
        opt.step()
        losses.append(loss.item())
    return np.array(losses), to_torch_arrays(net)


def compare(record: dict) -> dict[str, float]:
    """Runs onemodel on the record and checks the tolerances; returns the worst differences."""
    losses, final = train(record)
    config = record["config"]
    loss_rel = np.abs(losses - record["losses"]) / np.abs(record["losses"])
    assert loss_rel.max() <= LOSS_TOL, \
        f"step {int(loss_rel.argmax())}: loss relative difference {loss_rel.max():.3g}"
    assert final.keys() == record["final"].keys()
    excluded = set(config.get("excluded", []))
    rows = config.get("excluded_rows", {})
    worst = 0.0
    for name, expected in record["final"].items():
        if name in excluded:
            continue
        actual = final[name]
        assert actual.shape == expected.shape, name
        if expected.dtype.kind in "iu":
            np.testing.assert_array_equal(actual, expected, err_msg=name)
            continue
        keep = np.ones(expected.shape[0], bool)
        if name in rows:
            keep[slice(*rows[name])] = False
        diff = np.abs(actual[keep].astype(np.float64) - expected[keep]).max()
        err = diff / np.abs(expected[keep]).max()
        assert err <= PARAM_TOL, f"{name}: scaled error {err:.3g}"
        worst = max(worst, err)
    return dict(loss=float(loss_rel.max()), param=worst)


@pytest.mark.parametrize("name", NAMES)
def test_recorded_training(name):
    path = DATA / f"{name}.npz"
    if not path.exists():
        pytest.skip(f"{path} missing: run tools/training_oracle.py")
    with np.load(path) as z:
        record: dict[str, Any] = dict(config=json.loads(str(z["config"])), order=z["order"],
                                      losses=z["losses"], data={}, init={}, final={})
        for key in z.files:
            group, _, entry = key.partition("/")
            if entry:
                record[group][entry] = z[key]
    compare(record)


@pytest.mark.oracle
@pytest.mark.parametrize("name", NAMES)
def test_live_training(name):
    torch = pytest.importorskip("torch")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the trainings are tiny: a team of threads only adds waiting
    try:
        compare(oracle_module().run(name))
    finally:
        torch.set_num_threads(threads)

