"""The README's main job: it trains, checkpoints, reports, and behaves like a tool."""
import json
import os
import re
import shutil
from pathlib import Path

import pytest

import onemodel as om
from onemodel import checkpoint
from onemodel.examples import digits

pytest.importorskip("sklearn")

README = Path(__file__).resolve().parents[2] / "README.md"


@pytest.mark.slow
def test_a_default_run_prints_the_accuracy_the_readme_states(tmp_path, capsys):
    stated = re.search(r"test accuracy \((\d+\.\d)%", README.read_text())
    assert stated, "the README states the main job's test accuracy as 'test accuracy (NN.N%'"
    accuracy = digits.main(["--out", str(tmp_path)])
    out, err = capsys.readouterr()
    printed = re.search(r"test accuracy (\d+\.\d)%", out)
    assert printed and float(printed.group(1)) == pytest.approx(100 * accuracy, abs=0.05)
    assert abs(float(stated.group(1)) - 100 * accuracy) <= 0.5
    assert accuracy >= 0.97
    files = sorted(os.listdir(tmp_path / "1"))
    assert {"best.ckpt", "metrics.jsonl", "run.json"} <= set(files)
    assert len([f for f in files if f.startswith("step-")]) == 3
    # Not a terminal: one line per epoch, nothing redrawn.
    assert "\r" not in err and len(re.findall(r"^epoch \d+ ", err, re.M)) == 20
    model = digits.DigitsNet(0)
    assert checkpoint.load(tmp_path / "1" / "best.ckpt", model)  # the position travels too


def test_a_second_run_gets_a_new_folder_and_reports_only_itself(tmp_path, capsys):
    digits.main(["--epochs", "2", "--out", str(tmp_path)])
    first = capsys.readouterr()
    digits.main(["--epochs", "1", "--lr", "1e-4", "--out", str(tmp_path)])
    second = capsys.readouterr()
    assert sorted(os.listdir(tmp_path)) == ["1", "2"]
    assert "a new run in " + str(tmp_path / "2") in second.err
    # A run of one epoch at a tiny learning rate validates far lower than the first: had it
    # inherited the first run's best.ckpt it would report the first run's numbers.
    best = re.search(r"best validation (\d+\.\d)%", second.out).group(1)
    assert best != re.search(r"best validation (\d+\.\d)%", first.out).group(1)


def test_resume_continues_a_run_bit_for_bit(tmp_path, capsys):
    digits.main(["--epochs", "3", "--out", str(tmp_path / "full")])
    run = tmp_path / "full" / "1"
    cut = tmp_path / "cut" / "1"
    shutil.copytree(run, cut)
    steps = sorted(f for f in os.listdir(cut) if f.startswith("step-"))
    for name in steps[1:] + ["best.ckpt"]:  # as if stopped after the first epoch
        os.unlink(cut / name)
    digits.main(["--resume", "--out", str(tmp_path / "cut")])
    assert f"continuing the run in {cut} from step " in capsys.readouterr().err
    assert (cut / steps[-1]).read_bytes() == (run / steps[-1]).read_bytes()

    def rows(folder):  # the log without its wall times
        return [{k: v for k, v in json.loads(line).items() if k != "time"}
                for line in (folder / "metrics.jsonl").read_text().splitlines()]

    assert rows(cut) == rows(run)
    with pytest.raises(SystemExit):
        digits.main(["--resume", str(cut), "--lr", "0.1"])  # a resumed run keeps its options
    assert "a resumed run keeps its options" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        digits.main(["--resume", "--out", str(tmp_path / "nothing")])


def test_help_describes_every_option(capsys):
    with pytest.raises(SystemExit):
        digits.main(["--help"])
    text = capsys.readouterr().out
    for action in digits.parser()._actions:
        assert action.help, f"{action.option_strings} has no help"
        for option in action.option_strings:
            assert option in text


def test_digits_run_is_the_same_on_every_thread_count(tmp_path):
    runs = []
    for threads in (1, 2):
        out = tmp_path / str(threads)
        before = om.get_num_threads()
        try:
            digits.main(["--epochs", "1", "--threads", str(threads), "--out", str(out), "--quiet"])
        finally:
            om.set_num_threads(before)
        runs.append((out / "1" / "best.ckpt").read_bytes())
    assert runs[0] == runs[1]
