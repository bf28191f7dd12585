"""The Trainer's constructor names the argument that is wrong and says what to do, before it
changes anything."""
import os

import numpy as np
import pytest

import onemodel as om
import onemodel.functional as F
from onemodel import amp, checkpoint, nn
from onemodel.data import DataLoader
from onemodel.optim import SGD
from onemodel.optim.lr import warmup_cosine
from onemodel.train import (
    Checkpoints,
    CSVLogger,
    DataParallel,
    EarlyStopping,
    Evaluation,
    Precision,
    ProgressBar,
    SingleProcess,
    Trainer,
    ZeRO,
)


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
    ("schedule", 0.1, TypeError, "schedule must be a schedule of optim.lr"),
    ("schedule", warmup_cosine, TypeError, r"schedule .*did you mean warmup_cosine\(...\)"),
    ("strategy", ZeRO, TypeError, r"strategy must be Strategy\(...\) or None, got the class "
                                  r"ZeRO \(did you mean ZeRO\(...\)\?\)"),
    ("evaluation", [], TypeError, "evaluation must be Evaluation"),
    ("checkpoints", "run", TypeError, "checkpoints must be Checkpoints"),
    ("precision", "bf16", TypeError, "precision must be Precision"),
    ("callbacks", ["print"], TypeError, "callbacks must be Callback instances or functions"),
    ("callbacks", [EarlyStopping], TypeError, r"callbacks .*did you mean EarlyStopping\(...\)"),
    ("eval_loader_", 1, TypeError, "unexpected keyword argument 'eval_loader_'"),
])
def test_a_wrong_keyword_is_named(parts, keyword, value, error, message):
    with pytest.raises(error, match="Trainer: " + message):
        Trainer(*parts[:1], F.cross_entropy, *parts[1:], **{keyword: value})


@pytest.mark.parametrize("make, error, message", [
    (lambda loader: Evaluation(5), TypeError, "Evaluation: loader must be iterable"),
    (lambda loader: Evaluation(loader, every=-1), ValueError,
     "Evaluation: every must be an integer >= 0"),
    (lambda loader: Evaluation(loader, metrics={"loss": len}), ValueError,
     "Evaluation: metrics must map new names"),
    (lambda loader: Evaluation(loader, best_mode="up"), ValueError,
     "Evaluation: best_mode must be 'max' or 'min'"),
    (lambda loader: Evaluation(loader, best_metric="f1"), ValueError,
     "Evaluation: best_metric must be one of"),
    (lambda loader: Checkpoints(3), TypeError, "Checkpoints: dir must be a folder path"),
    (lambda loader: Checkpoints("run", keep_last=0), ValueError,
     "Checkpoints: keep_last must be an integer >= 1"),
    (lambda loader: Checkpoints("run", every=1.5), ValueError,
     "Checkpoints: every must be an integer >= 0"),
    (lambda loader: Precision(scaler=amp.GradScaler), TypeError,
     r"Precision: scaler .*did you mean GradScaler\(...\)"),
    (lambda loader: Precision("fp8"), ValueError, "fp8"),
    (lambda loader: DataParallel(0), ValueError,
     "DataParallel: micro_batches must be an integer >= 1"),
    (lambda loader: ZeRO(True), ValueError, "ZeRO: micro_batches must be an integer >= 1"),
    (lambda loader: ProgressBar(live="yes"), ValueError, "ProgressBar: live must be None"),
    (lambda loader: ProgressBar(every=1.5), ValueError,
     "ProgressBar: every must be an integer >= 0"),
    (lambda loader: CSVLogger(3), TypeError, "CSVLogger: path must be a file path"),
    (lambda loader: EarlyStopping("mae"), ValueError,
     "EarlyStopping: mode must be 'min' or 'max' \\(monitor 'mae' has no default"),
    (lambda loader: EarlyStopping(patience=-1), ValueError,
     "EarlyStopping: patience must be an integer >= 0"),
    (lambda loader: EarlyStopping(min_delta=float("nan")), ValueError,
     "EarlyStopping: min_delta must be a finite number >= 0"),
])
def test_a_wrong_option_is_named(parts, make, error, message):
    with pytest.raises(error, match=message):
        make(parts[2])


def test_nothing_is_made_before_the_checks(parts, tmp_path):
    model, opt, loader = parts
    folder = tmp_path / "run"
    with pytest.raises(ValueError, match="clip_norm"):
        Trainer(model, F.cross_entropy, opt, loader, checkpoints=Checkpoints(str(folder)),
                clip_norm=-1.0)
    assert not os.path.exists(folder)


def test_single_process_is_refused_under_a_launcher_before_joining(parts, monkeypatch):
    from onemodel import distributed
    model, opt, loader = parts
    monkeypatch.setattr(distributed, "launched", lambda: True)
    monkeypatch.setattr(distributed, "init", lambda *a: pytest.fail("init was called"))
    with pytest.raises(ValueError, match=r"SingleProcess\(\) under mpiexec"):
        Trainer(model, F.cross_entropy, opt, loader, strategy=SingleProcess())


def test_good_arguments_still_pass(parts, tmp_path):
    model, opt, loader = parts
    trainer = Trainer(model, nn.CrossEntropyLoss(), opt, [b for b in loader],
                      schedule=warmup_cosine(0.1, 1, 4, 0.1), clip_norm=1,
                      strategy=SingleProcess(2), precision=Precision(scaler=amp.GradScaler()),
                      evaluation=Evaluation(loader, every=2),
                      checkpoints=Checkpoints(tmp_path, keep_last=1),
                      callbacks=[lambda info: None, ProgressBar(live=False)])
    trainer.fit(2)
    assert trainer.step == 2


def test_the_former_keywords_still_work_and_warn(tmp_path):
    # One release of grace: each former group warns, naming its replacement, and the run has
    # the bits, files and reports of the new form.
    def run(folder, legacy):
        model = nn.Sequential(nn.Linear(3, 8, generator=om.Generator(1)), nn.Dropout(0.3, seed=2),
                              nn.Linear(8, 2, generator=om.Generator(2)))
        opt = SGD(model.parameters(), lr=0.1)
        g = om.Generator(5)
        x = g.uniform(-1.0, 1.0, (24, 3)).numpy()
        y = (x[:, 0] > 0).astype(np.int64)
        loader, held_out = DataLoader((x, y), 4, seed=3), DataLoader((x, y), 8, shuffle=False)
        seen = []
        if legacy:
            with pytest.warns(DeprecationWarning) as caught:
                trainer = Trainer(model, F.cross_entropy, opt, loader, eval_loader=held_out,
                                  eval_every=3, best_metric="loss", checkpoint_dir=str(folder),
                                  keep_last=2, checkpoint_every=2, autocast="bf16",
                                  scaler=amp.GradScaler(), accumulate=2, callback=seen.append,
                                  progress=False)
            assert sorted(str(w.message).split("; use ")[1].split("=")[0] for w in caught) == [
                "callbacks", "checkpoints", "evaluation", "precision", "strategy"]
            assert all(w.filename == __file__ for w in caught)  # the caller's line
        else:
            trainer = Trainer(model, F.cross_entropy, opt, loader,
                              strategy=DataParallel(2),
                              precision=Precision("bf16", amp.GradScaler()),
                              evaluation=Evaluation(held_out, every=3, best_metric="loss"),
                              checkpoints=Checkpoints(str(folder), keep_last=2, every=2),
                              callbacks=[seen.append])
        trainer.fit(7)
        return checkpoint.state_hash(model, opt), seen, sorted(os.listdir(folder))

    old, new = run(tmp_path / "old", True), run(tmp_path / "new", False)
    assert old[0] == new[0] and old[2] == new[2]
    assert [{k: v for k, v in i.items() if k != "time"} for i in old[1]] == \
        [{k: v for k, v in i.items() if k != "time"} for i in new[1]]
    assert len(old[1]) == 7 + 2
    with pytest.raises(TypeError, match="give one or the other"):
        Trainer(nn.Linear(3, 2), F.cross_entropy, SGD(nn.Linear(3, 2).parameters(), lr=0.1),
                [], eval_loader=[], evaluation=Evaluation([]))
