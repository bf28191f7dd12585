"""onemodel-plot on an example's run: the newest run of a folder, the best checkpoint marked,
the run's name, options and result in the title; result.json as the example printed it."""
import json
import os

import pytest

from onemodel import plot
from onemodel.examples import digits

pytest.importorskip("matplotlib")
pytest.importorskip("sklearn")


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    out = tmp_path_factory.mktemp("runs") / "digits"
    digits.main(["--epochs", "1", "--batch-size", "256", "--out", str(out), "--quiet"])
    accuracy = digits.main(["--epochs", "3", "--batch-size", "128", "--lr", "0.01",
                            "--out", str(out), "--quiet"])
    return out, accuracy


def test_result_json_keeps_the_headline_the_best_and_the_options(runs, capsys):
    out, accuracy = runs
    result = json.loads((out / "2" / "result.json").read_text())
    assert result["tool"] == "onemodel-digits"
    assert result["result"]["test_accuracy"] == accuracy
    assert result["headline"].startswith(f"test accuracy {100 * accuracy:.1f}% ")
    assert result["options"] == json.loads((out / "2" / "run.json").read_text())
    assert result["options"]["epochs"] == 3 and result["options"]["lr"] == 0.01
    evals = plot.read_log(str(out / "2"))[1]
    best = max(evals, key=lambda r: r["accuracy"])  # max() keeps the first of equals
    assert result["best"] == {"step": best["step"], "metric": "accuracy",
                              "value": best["accuracy"]}
    assert result["steps"] == evals[-1]["step"]


def test_a_folder_of_runs_draws_the_newest_with_the_best_marked(runs, monkeypatch):
    out, _ = runs
    import matplotlib.pyplot as plt

    figures = []
    monkeypatch.setattr(plt, "close", figures.append)
    path = plot.main([str(out)])
    assert path == str(out / "2" / "metrics.png") and os.path.getsize(path) > 10_000
    figure, = figures
    result = json.loads((out / "2" / "result.json").read_text())
    title = figure._suptitle.get_text()
    assert title == plot.run_title(str(out / "2"), result["options"], result)
    assert title.startswith("digits/2: epochs 3, batch_size 128, lr 0.01, ")
    assert str(out) not in title and result["headline"] in title
    for axes in figure.axes:
        marks = [line for line in axes.get_lines() if line.get_label().startswith("best")]
        assert [m.get_xdata()[0] for m in marks] == [result["best"]["step"]]


def test_the_best_step_without_a_result_follows_the_trainers_rule():
    evals = [{"step": 10, "loss": 0.9, "accuracy": 0.5}, {"step": 20, "loss": 0.5,
                                                          "accuracy": 0.8},
             {"step": 30, "loss": 0.4, "accuracy": 0.8}]
    assert plot.best_step(evals, None) == 20  # accuracy first; the first of equals
    no_accuracy = [{**r, "accuracy": None} for r in evals]
    assert plot.best_step(no_accuracy, None) == 30  # else the lowest loss
    assert plot.best_step(evals, {"best": {"step": 10}}) == 10  # result.json's choice
    assert plot.best_step([], None) is None


def test_the_title_names_the_run_not_its_path(tmp_path):
    run = tmp_path / "runs" / "crnn" / "4"
    assert plot.run_title(str(run), None, None) == "crnn/4"
    title = plot.run_title(str(run), {"steps": 300, "seed": 1}, {"headline": "CER 12%"})
    assert title == "crnn/4: steps 300, seed 1\nCER 12%"
    many = {f"option_{k}": k for k in range(20)}
    lines = plot.run_title(str(run), many, None).split("\n")
    assert len(lines) > 1 and all(len(line) <= 110 for line in lines)


def test_an_unfinished_run_is_titled_from_run_json(tmp_path, monkeypatch):
    (tmp_path / "1").mkdir()
    (tmp_path / "1" / "metrics.jsonl").write_text(
        json.dumps({"event": "step", "step": 1, "loss": 1.0, "lr": 0.1, "grad_norm": 1.0}) + "\n"
        + json.dumps({"event": "eval", "step": 1, "loss": 0.8, "accuracy": None}) + "\n")
    (tmp_path / "1" / "run.json").write_text(json.dumps({"steps": 5}))
    import matplotlib.pyplot as plt

    figures = []
    monkeypatch.setattr(plt, "close", figures.append)
    plot.plot(str(tmp_path))
    assert figures[0]._suptitle.get_text() == f"{tmp_path.name}/1: steps 5"
