"""The examples' run.json: a parseable but wrong one is refused with one line naming the file
and the field, never a traceback; a new run writes it whole (temporary, fsync, rename)."""
import json
import os

import pytest

from onemodel.examples import chargpt, digits


def _resume_with(tmp_path, capsys, tool, options):
    run = tmp_path / "1"
    run.mkdir()
    (run / "run.json").write_text(json.dumps(options))
    with pytest.raises(SystemExit) as stop:
        tool.main(["--resume", str(run)])
    assert stop.value.code == 2  # argparse's usage error, not a traceback
    return capsys.readouterr().err.strip().splitlines()[-1]


@pytest.mark.parametrize("options,field", [
    ([1, 2, 3], None),
    ("steps", None),
    ({**chargpt.DEFAULTS, "steps": "400"}, "steps"),
    ({**chargpt.DEFAULTS, "steps": -5}, "steps"),
    ({**chargpt.DEFAULTS, "steps": 0}, "steps"),
    ({**chargpt.DEFAULTS, "steps": 4.5}, "steps"),
    ({**chargpt.DEFAULTS, "steps": True}, "steps"),
    ({**chargpt.DEFAULTS, "lr": float("nan")}, "lr"),
    ({**chargpt.DEFAULTS, "lr": None}, "lr"),
    ({**chargpt.DEFAULTS, "seed": -1}, "seed"),
    ({k: v for k, v in chargpt.DEFAULTS.items() if k != "heads"}, "heads"),
    ({**chargpt.DEFAULTS, "colour": 3}, "colour"),
])
def test_a_wrong_run_file_is_one_line_naming_file_and_field(tmp_path, capsys, options, field):
    line = _resume_with(tmp_path, capsys, chargpt, options)
    assert f"error: --resume: {tmp_path / '1' / 'run.json'}: " in line
    if field is not None:
        assert f"field {field!r}" in line
    else:
        assert "not an object of options" in line


def test_a_run_file_with_a_whole_number_for_a_float_is_accepted(tmp_path, capsys):
    # lr 1 is a float option written as an integer: valid; the run folder holds no checkpoint.
    line = _resume_with(tmp_path, capsys, digits, {**digits.DEFAULTS, "lr": 1})
    assert "holds no checkpoint yet" in line


def test_a_negative_option_on_the_command_line_is_refused_by_name(tmp_path, capsys):
    with pytest.raises(SystemExit):
        digits.main(["--seed", "-3", "--out", str(tmp_path)])
    assert "--seed must be >= 0, got -3" in capsys.readouterr().err
    assert not os.path.exists(tmp_path / "1")  # refused before the run folder is made


def test_a_new_run_writes_its_run_file_atomically(tmp_path, monkeypatch):
    replaced = []
    real_replace = os.replace

    def spy(src, dst):
        replaced.append((os.path.basename(src), os.path.basename(dst)))
        return real_replace(src, dst)

    monkeypatch.setattr(os, "replace", spy)
    monkeypatch.setattr(digits, "load_splits", _stop)
    with pytest.raises(_Stop):
        digits.main(["--epochs", "1", "--out", str(tmp_path)])
    assert ("run.json.tmp", "run.json") in replaced
    assert json.loads((tmp_path / "1" / "run.json").read_text())["epochs"] == 1
    assert os.listdir(tmp_path / "1") == ["run.json"]


class _Stop(Exception):
    pass


def _stop(seed):
    raise _Stop
