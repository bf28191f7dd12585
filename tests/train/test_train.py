"""Trainer: the loop, evaluation, checkpoints, and resume to the same bits."""
import io
import json
import math
import os
import shutil

import numpy as np
import pytest

import onemodel as om
import onemodel.functional as F
from onemodel import amp, checkpoint, nn
from onemodel.data import DataLoader
from onemodel.optim import SGD, AdamW
from onemodel.optim.lr import warmup_cosine
from onemodel.train import Checkpoints, Evaluation, Precision, SingleProcess, Trainer


def _data(n=44, seed=0):
    g = om.Generator(seed)
    x = g.uniform(-1.0, 1.0, (n, 6)).numpy()
    y = (x[:, 0] + x[:, 1] > 0).astype(np.int64) + 2 * (x[:, 2] > 0)
    return x, y


def _setup(tmp=None, total=12, scaler=None, autocast=None, every=0, keep_last=3,
           checkpoint_every=0, callbacks=None):
    g = om.Generator(1)
    model = nn.Sequential(nn.Linear(6, 16, generator=g), nn.ReLU(), nn.Dropout(0.2, seed=3),
                          nn.Linear(16, 4, generator=g))
    opt = AdamW(model.parameters(), lr=1e-2)
    x, y = _data()
    vx, vy = _data(20, seed=9)
    return Trainer(model, F.cross_entropy, opt, DataLoader((x, y), 8, seed=4, shuffle=True),
                   schedule=warmup_cosine(1e-2, 2, total, 0.1), clip_norm=0.5,
                   precision=Precision(autocast, scaler),
                   evaluation=Evaluation(DataLoader((vx, vy), 8, shuffle=False), every=every),
                   checkpoints=None if tmp is None else Checkpoints(str(tmp), keep_last,
                                                                    checkpoint_every),
                   callbacks=callbacks)


@pytest.mark.parametrize("stop", [3, 5, 7])
def test_resumed_run_has_the_bits_of_the_uninterrupted_one(tmp_path, stop):
    # 44 examples in batches of 8: 6 batches per epoch, so stops fall before, at and after
    # an epoch boundary (the last batch of each epoch is short).
    full = _setup()
    full.fit(12)
    first = _setup(tmp_path)
    first.fit(stop)
    resumed = _setup(tmp_path)
    assert resumed.resume()
    assert resumed.step == stop and resumed.optimizer.step_count == stop
    resumed.fit(12)
    expected = checkpoint.state_hash(full.model, full.optimizer)
    assert checkpoint.state_hash(resumed.model, resumed.optimizer) == expected
    assert checkpoint.state_hash(first.model, first.optimizer) != expected


def test_resume_with_a_loss_scaler_restores_the_scale(tmp_path):
    full = _setup(scaler=amp.GradScaler(init_scale=2.0 ** 100, growth_interval=3))
    full.fit(10)
    first = _setup(tmp_path, scaler=amp.GradScaler(init_scale=2.0 ** 100, growth_interval=3))
    first.fit(4)
    resumed = _setup(tmp_path, scaler=amp.GradScaler(init_scale=2.0 ** 100, growth_interval=3))
    resumed.resume()
    assert resumed.scaler.get_scale() == first.scaler.get_scale()
    resumed.fit(10)
    assert resumed.scaler.state_dict() == full.scaler.state_dict()
    assert checkpoint.state_hash(resumed.model, resumed.optimizer) == \
        checkpoint.state_hash(full.model, full.optimizer)


@pytest.mark.filterwarnings("ignore:overflow encountered")
def test_overflow_skips_the_step_and_the_schedule():
    # 2^127 · 2^20 · loss overflows float32 in backward: the first steps are skipped and the
    # scale halves until gradients are finite again; the schedule only counts real steps.
    trainer = _setup(scaler=amp.GradScaler(init_scale=2.0 ** 127))
    trainer.loss_fn = lambda out, y: F.cross_entropy(out, y) * 2.0 ** 20
    infos = [trainer.train_step() for _ in range(30)]
    skipped = [not i["stepped"] for i in infos]
    first = skipped.index(False)
    assert first >= 2 and not any(skipped[first:])
    assert trainer.scaler.get_scale() == 2.0 ** (127 - first)
    assert trainer.optimizer.step_count == 30 - first
    assert infos[first]["lr"] == infos[0]["lr"] == trainer.schedule.lr_at(0)


def test_evaluation_checkpoints_and_best(tmp_path):
    seen = []
    trainer = _setup(tmp_path, every=3, keep_last=2, callbacks=[seen.append])
    result = trainer.fit(12)
    evals = [i for i in seen if i["event"] == "eval"]
    assert [i["step"] for i in evals] == [3, 6, 9, 12] and result == evals[-1]
    assert len([i for i in seen if i["event"] == "step"]) == 12
    files = sorted(os.listdir(tmp_path))
    assert files == ["best.ckpt", "metrics.jsonl", "step-00000009.ckpt", "step-00000012.ckpt"]
    best = max(i["accuracy"] for i in evals)
    assert trainer.manager.best_metric == best
    assert trainer.model.training


def test_evaluate_weights_batches_by_size_and_uses_eval_mode():
    trainer = _setup()
    vx, vy = _data(20, seed=9)
    metrics = trainer.evaluate()
    trainer.model.eval()
    with om.no_grad():
        logits = trainer.model(om.from_numpy(vx))
        whole = F.cross_entropy(logits, vy).item()
    trainer.model.train()
    assert metrics["loss"] == pytest.approx(whole, rel=1e-6)
    assert metrics["accuracy"] == float((logits.numpy().argmax(1) == vy).mean())


def test_training_learns():
    trainer = _setup(total=60)
    before = trainer.evaluate()["loss"]
    trainer.fit(60)
    assert trainer.evaluate()["loss"] < 0.7 * before


def test_accumulation_equals_one_big_batch_mean_for_sgd():
    # Two micro-batches of 4 averaged = the batch of 8 when each micro-batch loss is a mean.
    x, y = _data(16)

    def run(batch, accumulate):
        g = om.Generator(1)
        model = nn.Linear(6, 4, generator=g)
        opt = SGD(model.parameters(), lr=0.1)
        t = Trainer(model, F.cross_entropy, opt, DataLoader((x, y), batch, shuffle=False),
                    strategy=SingleProcess(accumulate))
        t.fit(2)
        return model.weight.detach().numpy()

    np.testing.assert_allclose(run(4, 2), run(8, 1), rtol=0, atol=1e-6)


def test_bad_arguments():
    x, y = _data()
    model = nn.Linear(6, 4)
    opt = SGD(model.parameters(), lr=0.1)
    loader = DataLoader((x, y), 8, shuffle=True)
    with pytest.raises(TypeError, match="Evaluation: loader must be iterable"):
        Trainer(model, F.cross_entropy, opt, loader, evaluation=Evaluation(None, every=2))
    with pytest.raises(ValueError, match="SingleProcess: micro_batches must be an integer >= 1"):
        Trainer(model, F.cross_entropy, opt, loader, strategy=SingleProcess(0))
    with pytest.raises(ValueError, match="autocast"):
        Trainer(model, F.cross_entropy, opt, loader, precision=Precision("fp8"))
    with pytest.raises(ValueError, match="sharded"):
        Trainer(model, F.cross_entropy, opt, DataLoader((x, y), 8, world_size=2, shuffle=True))
    with pytest.raises(ValueError, match="tuple"):
        Trainer(model, F.cross_entropy, opt, DataLoader(x, 8, shuffle=True)).train_step()


def test_bf16_autocast_training_learns_and_differs_from_float32():
    plain = _setup(total=60)
    plain.fit(60)
    low = _setup(total=60, autocast="bf16")
    before = low.evaluate()["loss"]
    low.fit(60)
    assert low.evaluate()["loss"] < 0.7 * before
    assert checkpoint.state_hash(low.model) != checkpoint.state_hash(plain.model)


class _DropoutNet(nn.Module):
    """Draws from om.default_generator while training: an unseeded F.dropout each step."""

    def __init__(self) -> None:
        super().__init__()
        g = om.Generator(1)
        self.a, self.b = nn.Linear(6, 16, generator=g), nn.Linear(16, 4, generator=g)

    def forward(self, x):
        return self.b(F.dropout(F.relu(self.a(x)), 0.3, self.training))


def _generator_setup(tmp):
    model = _DropoutNet()
    x, y = _data()
    return Trainer(model, F.cross_entropy, AdamW(model.parameters(), lr=1e-2),
                   DataLoader((x, y), 8, seed=4, shuffle=True),
                   checkpoints=Checkpoints(str(tmp), every=4), callbacks=[])


def test_fit_resume_continues_the_default_generator_bit_for_bit(tmp_path):
    om.manual_seed(11)
    full = _generator_setup(tmp_path / "full")
    full.fit(10)
    om.manual_seed(11)
    _generator_setup(tmp_path / "cut").fit(6)  # checkpoints at 4 and at the end, 6
    shutil.copytree(tmp_path / "cut", tmp_path / "copy")
    om.manual_seed(999)  # a new process would start elsewhere: the checkpoint must restore it
    resumed = _generator_setup(tmp_path / "cut")
    resumed.fit(10, resume=True)
    assert checkpoint.state_hash(resumed.model, resumed.optimizer) == \
        checkpoint.state_hash(full.model, full.optimizer)
    # Without the generator's state the masks differ: the test can fail.
    other = _generator_setup(tmp_path / "copy")
    other.resume()
    om.manual_seed(999)
    other.fit(10)
    assert checkpoint.state_hash(other.model, other.optimizer) != \
        checkpoint.state_hash(full.model, full.optimizer)


def test_resume_from_a_run_folder_and_fit_resume_without_checkpoint(tmp_path):
    first = _generator_setup(tmp_path / "run")
    first.fit(5)
    second = _generator_setup(tmp_path / "elsewhere")
    assert second.resume(str(tmp_path / "run")) and second.step == 5
    fresh = _generator_setup(tmp_path / "empty")
    fresh.fit(2, resume=True)  # nothing to resume: starts at step 0
    assert fresh.step == 2


def test_checkpoint_every_is_independent_of_evaluation(tmp_path):
    trainer = _setup(tmp_path, every=5, checkpoint_every=4, keep_last=10, callbacks=[])
    trainer.fit(12)
    steps = sorted(int(f[5:13]) for f in os.listdir(tmp_path) if f.startswith("step-"))
    assert steps == [4, 5, 8, 10, 12]


def _rows(folder):
    with open(os.path.join(folder, "metrics.jsonl")) as f:
        return [json.loads(line) for line in f]


def test_metrics_log_has_a_row_per_step_and_evaluation_and_reads_as_one_run(tmp_path):
    _setup(tmp_path, every=3, callbacks=[]).fit(7)
    rows = _rows(tmp_path)
    assert [(r["event"], r["step"]) for r in rows][:4] == [
        ("step", 1), ("step", 2), ("step", 3), ("eval", 3)]
    assert len([r for r in rows if r["event"] == "step"]) == 7
    step = rows[0]
    assert set(step) == {"event", "step", "loss", "lr", "grad_norm", "stepped", "time"}
    assert step["grad_norm"] > 0 and step["lr"] > 0
    # The last checkpoint is at 7; a run resumed from step 6's checkpoint drops row 7 first.
    os.unlink(tmp_path / "step-00000007.ckpt")
    resumed = _setup(tmp_path, every=3, callbacks=[])
    resumed.fit(8, resume=True)
    steps = [r["step"] for r in _rows(tmp_path) if r["event"] == "step"]
    assert steps == list(range(1, 9))


def test_gradient_norm_is_reported_without_clipping():
    trainer = _setup()
    trainer.clip_norm = None
    info = trainer.train_step()
    assert info["grad_norm"] is not None and info["grad_norm"] > 0


def _regression(tmp, callbacks=(), **options):
    g = om.Generator(2)
    model = nn.Linear(6, 1, generator=g)
    x, _ = _data()
    y = x[:, :1] * 2.0 - x[:, 1:2]
    return Trainer(model, F.mse_loss, SGD(model.parameters(), lr=0.05),
                   DataLoader((x, y), 8, seed=1, shuffle=True),
                   evaluation=Evaluation(DataLoader((x, y), 16, shuffle=False), every=2,
                                         **options),
                   checkpoints=Checkpoints(str(tmp)), callbacks=callbacks)


def test_a_regression_takes_the_best_by_validation_loss(tmp_path):
    seen = []
    trainer = _regression(tmp_path, callbacks=[seen.append])
    trainer.fit(10)
    losses = [i["loss"] for i in seen if i["event"] == "eval"]
    assert all(i["accuracy"] is None for i in seen if i["event"] == "eval")
    assert trainer.manager.best_metric == min(losses)


def test_a_custom_metric_chooses_the_best_and_needs_a_direction(tmp_path):
    def mae(output, target):
        return float(np.abs(output.numpy() - np.asarray(target.numpy())).mean())

    trainer = _regression(tmp_path, metrics={"mae": mae}, best_metric="mae", best_mode="min")
    trainer.fit(6)
    maes = [r["mae"] for r in _rows(tmp_path) if r["event"] == "eval"]
    assert len(maes) == 3 and trainer.manager.best_metric == min(maes)
    with pytest.raises(ValueError, match="best_mode"):
        _regression(tmp_path / "x", metrics={"mae": mae}, best_metric="mae")
    with pytest.raises(ValueError, match="best_metric"):
        _regression(tmp_path / "y", best_metric="f1")


def test_a_non_finite_metric_warns_and_never_crashes(tmp_path):
    trainer = _regression(tmp_path, metrics={"bad": lambda o, t: math.nan}, best_metric="bad",
                          best_mode="max")
    with pytest.warns(RuntimeWarning, match="not finite"):
        trainer.fit(4)
    assert trainer.manager.best_metric is None and trainer.manager.latest() is not None
    assert _rows(tmp_path)[-1]["bad"] is None  # JSON has no NaN: the log holds null


def test_progress_off_a_terminal_prints_a_line_per_epoch_and_no_carriage_return(capsys):
    trainer = _setup()  # 44 examples in batches of 8: 6 steps an epoch; ProgressBar() default
    trainer.fit(12)
    err = capsys.readouterr().err
    assert "\r" not in err
    lines = [line for line in err.splitlines() if line.startswith("epoch")]
    assert [line.split()[:3] for line in lines] == [["epoch", "1", "step"], ["epoch", "2", "step"]]


def test_progress_on_a_terminal_redraws_one_line():
    from onemodel.progress import Progress

    out = io.StringIO()
    shown = Progress(4, per_epoch=2, stream=out, live=True)
    for step in range(1, 5):
        shown.step({"step": step, "loss": 1.0 / step, "lr": 0.1, "grad_norm": 0.5})
    shown.close()
    text = out.getvalue()
    assert text.count("\rstep ") >= 2 and "epoch 2 step 4/4" in text
