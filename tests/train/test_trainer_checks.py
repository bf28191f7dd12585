"""The Trainer's constructor names the argument that is wrong and says what to do, before it
changes anything."""
import os

import numpy as np
import pytest

import onemodel.functional as F
from onemodel import amp, nn
from onemodel.data import DataLoader
from onemodel.optim import SGD
from onemodel.optim.lr import warmup_cosine
from onemodel.train import Trainer


@pytest.fixture
def parts():
    model = nn.Linear(3, 2)
    x = np.zeros((8, 3), np.float32)
    y = np.zeros(8, np.int64)
    return model, SGD(model.parameters(), lr=0.1), DataLoader((x, y), 4, shuffle=False)


def test_swapped_loss_and_optimizer_is_named(parts):
    model, opt, loader = parts
    with pytest.raises(TypeError, match="did you swap loss_fn and optimizer"):
        Trainer(model, opt, F.cross_entropy, loader)


def test_swapped_model_and_loss_is_named(parts):
    model, opt, loader = parts
    with pytest.raises(TypeError, match="did you swap model and loss_fn"):
        Trainer(F.cross_entropy, model, opt, loader)


@pytest.mark.parametrize("position, value, message", [
    (0, "net", "model must be an nn.Module, got str"),
    (0, nn.Linear, r"model must be an nn.Module, got the class Linear \(did you mean "
                   r"Linear\(...\)\?\)"),
    (1, 3, "loss_fn must be a function"),
    (1, nn.CrossEntropyLoss, r"loss_fn .*did you mean CrossEntropyLoss\(...\)"),
    (2, "adam", "optimizer must be an optimizer"),
    (2, SGD, r"optimizer .*did you mean SGD\(...\)"),
    (3, 7, "loader must be iterable.*got int"),
])
def test_a_wrong_positional_argument_is_named(parts, position, value, message):
    model, opt, loader = parts
    args = [model, F.cross_entropy, opt, loader]
    args[position] = value
    with pytest.raises(TypeError, match="Trainer: " + message):
        Trainer(*args)


@pytest.mark.parametrize("keyword, value, error, message", [
    ("clip_norm", 0.0, ValueError, "clip_norm must be a finite number > 0"),
    ("clip_norm", float("nan"), ValueError, "clip_norm must be a finite number > 0"),
    ("clip_norm", "1", ValueError, "clip_norm"),
    ("keep_last", 0, ValueError, "keep_last must be an integer >= 1"),
    ("eval_every", -1, ValueError, "eval_every must be an integer >= 0"),
    ("log_every", 1.5, ValueError, "log_every must be an integer >= 0"),
    ("schedule", 0.1, TypeError, "schedule must be a schedule of optim.lr"),
    ("schedule", warmup_cosine, TypeError, r"schedule .*did you mean warmup_cosine\(...\)"),
    ("eval_loader", 5, TypeError, "eval_loader must be iterable"),
    ("checkpoint_dir", 3, TypeError, "checkpoint_dir must be a folder path"),
    ("scaler", amp.GradScaler, TypeError, r"scaler .*did you mean GradScaler\(...\)"),
    ("callback", "print", TypeError, "callback must be a function"),
    ("progress", "yes", ValueError, "progress must be None, True or False"),
    ("shard_optimizer", 1, ValueError, "shard_optimizer must be True or False"),
])
def test_a_wrong_keyword_is_named(parts, keyword, value, error, message):
    with pytest.raises(error, match="Trainer: " + message):
        Trainer(*parts[:1], F.cross_entropy, *parts[1:], **{keyword: value})


def test_nothing_is_made_before_the_checks(parts, tmp_path):
    model, opt, loader = parts
    folder = tmp_path / "run"
    with pytest.raises(ValueError, match="clip_norm"):
        Trainer(model, F.cross_entropy, opt, loader, checkpoint_dir=str(folder), clip_norm=-1.0)
    assert not os.path.exists(folder)


def test_good_arguments_still_pass(parts, tmp_path):
    model, opt, loader = parts
    trainer = Trainer(model, nn.CrossEntropyLoss(), opt, [b for b in loader],
                      schedule=warmup_cosine(0.1, 1, 4, 0.1), clip_norm=1, keep_last=1,
                      eval_loader=loader, eval_every=2, checkpoint_dir=tmp_path,
                      scaler=amp.GradScaler(), callback=lambda info: None, progress=False)
    trainer.fit(2)
    assert trainer.step == 2
