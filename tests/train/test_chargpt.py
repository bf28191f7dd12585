"""The character-level GPT job: data windows, a short run that learns, sampling."""
import json

import numpy as np
import pytest

from onemodel.examples import chargpt


def test_windows_are_next_character_pairs_fixed_by_seed_and_step():
    ids = np.arange(1000) % 97
    windows = chargpt.Windows(ids, 16, 4, seed=3, interval=5)
    x, positions, y = windows.batch(7)
    again = windows.batch(7)[0]
    assert np.array_equal(x.numpy(), again.numpy())
    assert not np.array_equal(x.numpy(), windows.batch(8)[0].numpy())
    assert positions.numpy().tolist() == list(range(16))
    assert np.array_equal(y.reshape(4, 16)[:, :-1], x.numpy()[:, 1:])  # y is x shifted by one
    with pytest.raises(ValueError, match="too short"):
        chargpt.Windows(ids[:10], 16, 4, 0, 1)


def test_vocabulary_round_trips_and_names_unknown_characters():
    vocab = chargpt.Vocabulary("hello world")
    assert vocab.decode(vocab.encode("low hold")) == "low hold"
    with pytest.raises(ValueError, match="'z' is not in the vocabulary"):
        vocab.encode("zoo")


def test_a_short_run_learns_and_samples(tmp_path, capsys):
    result = chargpt.main(["--steps", "30", "--eval-every", "15", "--width", "32",
                           "--block", "32", "--out", str(tmp_path), "--prompt", "def "])
    rows = [json.loads(r) for r in (tmp_path / "1" / "metrics.jsonl").read_text().splitlines()]
    evals = [r["loss"] for r in rows if r["event"] == "eval"]
    assert len(evals) == 2 and evals[1] < evals[0] < np.log(120)
    assert result["sample"].startswith("def ") and len(result["sample"]) == 204
    assert "validation loss" in capsys.readouterr().out
