"""Trainer: the loop, evaluation, checkpoints, and resume to the same bits."""
import os

import numpy as np
import pytest

import onemodel as om
import onemodel.functional as F
from onemodel import amp, checkpoint, nn
from onemodel.data import DataLoader
from onemodel.optim import SGD, AdamW
from onemodel.optim.lr import WarmupCosineLR
from onemodel.train import Trainer


def _data(n=44, seed=0):
    g = om.Generator(seed)
    x = g.uniform(-1.0, 1.0, (n, 6)).numpy()
    y = (x[:, 0] + x[:, 1] > 0).astype(np.int64) + 2 * (x[:, 2] > 0)
    return x, y


def _setup(tmp=None, total=12, scaler=None, **kwargs):
    g = om.Generator(1)
    model = nn.Sequential(nn.Linear(6, 16, generator=g), nn.ReLU(), nn.Dropout(0.2, seed=3),
                          nn.Linear(16, 4, generator=g))
    opt = AdamW(model.parameters(), lr=1e-2)
    x, y = _data()
    vx, vy = _data(20, seed=9)
    return Trainer(model, F.cross_entropy, opt, DataLoader((x, y), 8, seed=4),
                   schedule=WarmupCosineLR(1e-2, 2, total, 0.1), clip_norm=0.5,
                   eval_loader=DataLoader((vx, vy), 8, shuffle=False), scaler=scaler,
                   checkpoint_dir=None if tmp is None else str(tmp), **kwargs)


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
    trainer = _setup(tmp_path, eval_every=3, keep_last=2, callback=seen.append)
    result = trainer.fit(12)
    evals = [i for i in seen if i["event"] == "eval"]
    assert [i["step"] for i in evals] == [3, 6, 9, 12] and result == evals[-1]
    assert len([i for i in seen if i["event"] == "step"]) == 12
    files = sorted(os.listdir(tmp_path))
    assert files == ["best.ckpt", "step-00000009.ckpt", "step-00000012.ckpt"]
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
                    accumulate=accumulate)
        t.fit(2)
        return model.weight.detach().numpy()

    np.testing.assert_allclose(run(4, 2), run(8, 1), rtol=0, atol=1e-6)


def test_bad_arguments():
    x, y = _data()
    model = nn.Linear(6, 4)
    opt = SGD(model.parameters(), lr=0.1)
    loader = DataLoader((x, y), 8)
    with pytest.raises(ValueError, match="eval_loader"):
        Trainer(model, F.cross_entropy, opt, loader, eval_every=2)
    with pytest.raises(ValueError, match="accumulate"):
        Trainer(model, F.cross_entropy, opt, loader, accumulate=0)
    with pytest.raises(ValueError, match="autocast"):
        Trainer(model, F.cross_entropy, opt, loader, autocast="fp8")
    with pytest.raises(ValueError, match="sharded"):
        Trainer(model, F.cross_entropy, opt, DataLoader((x, y), 8, world_size=2))
    with pytest.raises(ValueError, match="tuple"):
        Trainer(model, F.cross_entropy, opt, DataLoader(x, 8)).train_step()


def test_bf16_autocast_training_learns_and_differs_from_float32():
    plain = _setup(total=60)
    plain.fit(60)
    low = _setup(total=60, autocast="bf16")
    before = low.evaluate()["loss"]
    low.fit(60)
    assert low.evaluate()["loss"] < 0.7 * before
    assert checkpoint.state_hash(low.model) != checkpoint.state_hash(plain.model)
