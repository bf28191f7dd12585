"""Trainer callbacks: the hooks and their order, stopping, CSVLogger, EarlyStopping, ProgressBar."""
import csv
import os

import numpy as np
import pytest

import onemodel as om
import onemodel.functional as F
from onemodel import nn
from onemodel.data import DataLoader
from onemodel.optim import SGD
from onemodel.train import (
    Callback,
    Checkpoints,
    CSVLogger,
    EarlyStopping,
    Evaluation,
    ProgressBar,
    Trainer,
)


def _trainer(folder=None, every=2, metrics=None, callbacks=(), best_metric=None, best_mode=None):
    g = om.Generator(3)
    x = g.uniform(-1.0, 1.0, (40, 5)).numpy()
    y = (x[:, 0] > x[:, 1]).astype(np.int64)
    model = nn.Sequential(nn.Linear(5, 8, generator=g), nn.Tanh(), nn.Linear(8, 2, generator=g))
    return Trainer(model, F.cross_entropy, SGD(model.parameters(), lr=0.2),
                   DataLoader((x, y), 8, seed=1, shuffle=True),
                   evaluation=Evaluation(DataLoader((x, y), 20, shuffle=False), every=every,
                                         metrics=metrics or {}, best_metric=best_metric,
                                         best_mode=best_mode),
                   checkpoints=None if folder is None else Checkpoints(str(folder)),
                   callbacks=list(callbacks))


class _Record(Callback):
    def __init__(self):
        self.calls = []

    def on_fit_start(self, trainer):
        self.calls.append(("fit_start", trainer.step, trainer.max_steps))

    def on_step_end(self, trainer, info):
        self.calls.append(("step", info["step"]))

    def on_eval_end(self, trainer, info):
        self.calls.append(("eval", info["step"]))

    def on_checkpoint(self, trainer):
        self.calls.append(("checkpoint", trainer.step))

    def on_fit_end(self, trainer):
        self.calls.append(("fit_end", trainer.step))


def test_hooks_are_called_in_order_and_a_resumed_fit_starts_at_its_step(tmp_path):
    record = _Record()
    _trainer(tmp_path, callbacks=[record]).fit(5)
    assert record.calls == [
        ("fit_start", 0, 5), ("step", 1), ("step", 2), ("eval", 2), ("checkpoint", 2),
        ("step", 3), ("step", 4), ("eval", 4), ("checkpoint", 4), ("step", 5),
        ("checkpoint", 5), ("fit_end", 5)]
    again = _Record()
    _trainer(tmp_path, callbacks=[again]).fit(6, resume=True)
    assert again.calls[:2] == [("fit_start", 5, 6), ("step", 6)]


def test_a_callback_that_sets_should_stop_ends_fit_with_a_checkpoint(tmp_path):
    class StopAt3(Callback):
        def on_step_end(self, trainer, info):
            trainer.should_stop = info["step"] == 3

    trainer = _trainer(tmp_path, every=0, callbacks=[StopAt3()])
    trainer.fit(10)
    assert trainer.step == 3 and trainer.manager.latest().endswith("step-00000003.ckpt")
    trainer.fit(5)  # the next fit() starts with should_stop cleared
    assert trainer.step == 5


def test_an_exception_still_ends_the_fit_of_every_callback():
    record = _Record()

    def fail(info):
        raise KeyError("boom")

    with pytest.raises(KeyError):
        _trainer(callbacks=[record, fail]).fit(4)
    assert record.calls[-1] == ("fit_end", 1)


def _read(path):
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        return reader.fieldnames, list(reader)


def test_csv_logger_writes_a_row_per_step_and_evaluation(tmp_path):
    seen = []
    path = tmp_path / "log.csv"
    _trainer(metrics={"half": lambda o, t: 0.5},
             callbacks=[CSVLogger(path), seen.append]).fit(5)
    header, rows = _read(path)
    # The first row's keys, widened by the evaluation's new ones.
    assert header == ["event", "step", "loss", "lr", "grad_norm", "stepped", "time",
                      "accuracy", "half"]
    assert [(r["event"], int(r["step"])) for r in rows] == [
        (i["event"], i["step"]) for i in seen]
    for row, info in zip(rows, seen):
        assert float(row["loss"]) == info["loss"]  # every float round-trips
        if info["event"] == "step":
            assert row["accuracy"] == row["half"] == "" and row["stepped"] == "True"
        else:
            assert float(row["accuracy"]) == info["accuracy"] and row["half"] == "0.5"
            assert row["lr"] == ""
    with open(path) as f:
        assert f.read().count("event,step") == 1


def test_csv_logger_is_append_safe_across_a_resume(tmp_path):
    path = tmp_path / "log.csv"
    _trainer(tmp_path / "run", callbacks=[CSVLogger(path)]).fit(5)
    os.unlink(tmp_path / "run" / "step-00000005.ckpt")  # the run continues from step 4
    with open(path, "a") as f:
        f.write("step,3,0.2")  # a line a crash cut short (its step is kept, were it whole)
    _trainer(tmp_path / "run", callbacks=[CSVLogger(path)]).fit(7, resume=True)
    header, rows = _read(path)
    assert header[:2] == ["event", "step"]
    assert [(r["event"], int(r["step"])) for r in rows] == [
        ("step", 1), ("step", 2), ("eval", 2), ("step", 3), ("step", 4), ("eval", 4),
        ("step", 5), ("step", 6), ("eval", 6), ("step", 7)]
    with open(path) as f:
        assert f.read().count("event,step") == 1


def test_early_stopping_stops_after_patience_evaluations_without_improvement(tmp_path):
    # The metric improves by 0.01 an evaluation: more than min_delta 0 is an improvement,
    # not more than 0.05.
    values = [1.0 - 0.01 * k for k in range(50)]

    def run(**options):
        stop = EarlyStopping("m", mode="min", **options)
        holder = []
        trainer = _trainer(tmp_path / str(len(os.listdir(tmp_path))), every=1,
                           metrics={"m": lambda o, t: values[holder[0].step]},
                           callbacks=[stop])
        holder.append(trainer)
        trainer.fit(12)
        return trainer, stop

    trainer, stop = run(patience=2, min_delta=0.05)
    assert trainer.step == stop.stopped_step == 3 and stop.best == pytest.approx(values[1])
    assert trainer.manager.latest().endswith("step-00000003.ckpt")
    trainer, stop = run(patience=2)
    assert trainer.step == 12 and stop.stopped_step is None \
        and stop.best == pytest.approx(values[12])
    trainer, stop = run(patience=0, min_delta=0.05)
    assert trainer.step == 2


def test_early_stopping_directions_and_what_it_needs():
    up = iter(range(100))
    assert EarlyStopping("accuracy").mode == "max" and EarlyStopping().mode == "min"  # loss
    higher = EarlyStopping("up", patience=1, mode="max")
    _trainer(every=1, metrics={"up": lambda o, t: float(next(up))}, callbacks=[higher]).fit(6)
    assert higher.stopped_step is None
    lower = EarlyStopping("up", patience=1, mode="min")
    _trainer(every=1, metrics={"up": lambda o, t: float(next(up))}, callbacks=[lower]).fit(6)
    assert lower.stopped_step == 2
    with pytest.raises(ValueError, match=r"EarlyStopping: the evaluation has no 'f1'; it has "
                                         r"\['loss', 'accuracy'\]"):
        _trainer(every=1, callbacks=[EarlyStopping("f1", mode="max")]).fit(2)
    with pytest.raises(ValueError, match="EarlyStopping: .*every > 0"):
        _trainer(every=0, callbacks=[EarlyStopping()]).fit(2)


def test_early_stopping_takes_a_non_finite_value_as_no_improvement():
    values = [None, 1.0, float("nan"), float("inf"), 0.5]
    stop = EarlyStopping("m", patience=2, mode="min")
    holder = []
    trainer = _trainer(every=1, metrics={"m": lambda o, t: values[holder[0].step]},
                       callbacks=[stop])
    holder.append(trainer)
    trainer.fit(4)
    assert stop.stopped_step == 3 and stop.best == 1.0


def test_progress_bar_every_adds_a_line_of_numbers(capsys):
    _trainer(every=0, callbacks=[ProgressBar(live=False, every=2)]).fit(4)
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("step ")]
    assert [line.split()[:2] for line in lines[:2]] == [["step", "2"], ["step", "4"]]
    assert "loss" in lines[0] and "grad_norm" in lines[0]
    _trainer(every=0, callbacks=[]).fit(2)
    assert capsys.readouterr().err == ""
