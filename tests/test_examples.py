"""The README's main job: a short run trains, checkpoints and reports its accuracy."""
import os

import pytest

import onemodel as om
from onemodel import checkpoint
from onemodel.examples import digits

pytest.importorskip("sklearn")


def test_digits_trains_checkpoints_and_reports(tmp_path, capsys):
    accuracy = digits.main(["--epochs", "4", "--out", str(tmp_path)])
    assert accuracy >= 0.95
    files = sorted(os.listdir(tmp_path))
    assert "best.ckpt" in files and len([f for f in files if f.startswith("step-")]) == 3
    assert "test accuracy" in capsys.readouterr().out
    model = digits.DigitsNet(0)
    extra = checkpoint.load(tmp_path / "best.ckpt", model)
    assert extra  # the run's position travels with the weights


def test_digits_run_is_the_same_on_every_thread_count(tmp_path):
    runs = []
    for threads in (1, 2):
        out = tmp_path / str(threads)
        before = om.get_num_threads()
        try:
            digits.main(["--epochs", "1", "--threads", str(threads), "--out", str(out)])
        finally:
            om.set_num_threads(before)
        runs.append((out / "best.ckpt").read_bytes())
    assert runs[0] == runs[1]
