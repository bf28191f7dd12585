"""onemodel-plot: a run folder's metrics.jsonl drawn to a PNG."""
import json

import numpy as np
import pytest

import onemodel.functional as F
from onemodel import nn, plot
from onemodel.data import DataLoader
from onemodel.optim import SGD
from onemodel.train import Checkpoints, Evaluation, Trainer

pytest.importorskip("matplotlib")


def _run(folder):
    x = np.random.default_rng(0).standard_normal((32, 4)).astype(np.float32)
    y = (x[:, 0] > 0).astype(np.int64)
    model = nn.Linear(4, 2)
    Trainer(model, F.cross_entropy, SGD(model.parameters(), lr=0.1),
            DataLoader((x, y), 8, shuffle=True),
            evaluation=Evaluation(DataLoader((x, y), 16, shuffle=False), every=4),
            checkpoints=Checkpoints(str(folder)), callbacks=[]).fit(12)


def test_a_run_is_drawn_to_a_png(tmp_path, capsys):
    _run(tmp_path)
    path = plot.main([str(tmp_path)])
    assert path == str(tmp_path / "metrics.png") and capsys.readouterr().out.strip() == path
    data = (tmp_path / "metrics.png").read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000
    steps, evals = plot.read_log(str(tmp_path))
    assert [r["step"] for r in steps] == list(range(1, 13)) and len(evals) == 3


def test_a_folder_without_a_log_or_with_a_broken_one_is_an_error(tmp_path, capsys):
    with pytest.raises(SystemExit):
        plot.main([str(tmp_path)])
    assert "metrics.jsonl" in capsys.readouterr().err
    (tmp_path / "metrics.jsonl").write_text(json.dumps({"event": "step", "step": 1}) + "\n{oops\n")
    with pytest.raises(SystemExit):
        plot.main([str(tmp_path)])
    assert "line 2" in capsys.readouterr().err
