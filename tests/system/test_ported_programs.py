"""Public PyTorch programs, ported in tests/ported/, run unchanged but for the import.

Every program runs twice: as written under torch 2.13 (all of them in one process, which also
records their initial weights), then with every whole word `torch` renamed `onemodel` (each in a
process of its own). Both runs must reach the end. The lines a program prints with the word
"loss" in them are its losses: they must be as many under both libraries, and, where the table
says the run is comparable, agree to 1e-5 relative (plus half a unit of the last digit printed
by each). tests/ported/_run.py says how the runs are made to start from the same weights and
draws; what they cannot share (dropout masks, shuffled orders, samples) is why a program is
compared only up to some line, or not at all, below. docs/porting.md lists the programs.
"""
import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")
pytestmark = pytest.mark.oracle

PORTED = Path(__file__).resolve().parents[1] / "ported"
RUNNER = PORTED / "_run.py"

ALL = None  # compare every loss line
# program[:arguments] -> (loss lines compared: ALL, a count, or 0 for "runs only", why not all)
PROGRAMS = {
    "mnist": (0, "dropout masks and the shuffled order are each library's own"),
    "regression": (ALL, ""),
    "siamese_network": (ALL, "pairs are drawn with Python's random, seeded by the harness"),
    "super_resolution": (ALL, "one batch per epoch, so the shuffle only reorders a sum"),
    "word_language_model": (ALL, ""),
    "word_language_model:--model,Transformer": (0, "nn.Transformer's own dropout (0.1)"),
    "dcgan": (ALL, "one batch per epoch, so the shuffle only reorders a sum"),
    "vae": (0, "the shuffle gives each example another row of the shared noise"),
    "time_sequence_prediction": (ALL, ""),
    "gcn": (ALL, ""),
    "ddp_trainer": (ALL, "one batch per epoch, so the sampler's order only reorders a sum"),
    "nn_tutorial": (5, "the losses after fit() follow a shuffled loader"),
    "polynomial_custom_function": (ALL, ""),
    "optimization_tutorial": (ALL, ""),
    "saving_loading_checkpoint": (ALL, ""),
    "char_rnn_classification": (0, "random_split draws from the library's own generator"),
    "char_rnn_generation": (0, "the model's dropout masks are each library's own"),
    "seq2seq_translation": (ALL, "one batch per epoch, so the shuffle only reorders a sum"),
    "lstm_tagger": (ALL, ""),
    "spatial_transformer": (0, "dropout masks and the shuffled order are each library's own"),
    "cifar10_tutorial": (ALL, "one batch per epoch, so the shuffle only reorders a sum"),
    "text_classification": (ALL, "one batch per epoch, so the shuffle only reorders a sum"),
    "bigram": (ALL, ""),
    "gpt": (ALL, ""),
    "build_nanogpt": (0, "torch's CPU autocast rounds products to bfloat16, onemodel's keeps "
                      "float32 products of bfloat16 operands"),
    "llmc_train_gpt2": (ALL, ""),
    "makemore": (0, "batches come from a sampler with replacement, the library's own draws"),
    "makemore:--type,gru": (0, "batches come from a sampler with replacement"),
}

NUMBER = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?|\bnan\b|\binf\b")


def _run(lib, folder, specs, weights="weights.npz"):
    report = folder / f"{lib}.json"
    proc = subprocess.run([sys.executable, str(RUNNER), lib, str(report), str(folder / lib),
                           str(folder / weights), *specs],
                          capture_output=True, text=True, timeout=600,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert proc.returncode == 0, f"the runner failed under {lib}:\n{proc.stderr[-3000:]}"
    return json.loads(report.read_text())


@pytest.fixture(scope="module")
def torch_runs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("ported")
    return folder, _run("torch", folder, list(PROGRAMS))


def _unit(text):
    """The unit of the last digit printed: 0 for an integer (compared exactly)."""
    mantissa, _, exponent = text.lower().partition("e")
    if "." not in mantissa:
        return 0.0 if not exponent else 10.0 ** int(exponent)
    return 10.0 ** (int(exponent or 0) - len(mantissa.split(".")[1]))


def _losses(stdout):
    """Each loss line's numbers with the unit of the last digit each was printed with."""
    lines = [line for line in stdout.splitlines() if "loss" in line.lower()]
    return [[(float(m), _unit(m)) for m in NUMBER.findall(line)] for line in lines], lines


def _agree(ours, theirs):
    (a, unit_a), (b, unit_b) = ours, theirs
    if math.isnan(b) or math.isinf(b):
        return str(a) == str(b)
    return abs(a - b) <= 1e-5 * max(abs(a), abs(b)) + 0.5 * (unit_a + unit_b)


@pytest.mark.parametrize("spec", list(PROGRAMS))
def test_program_runs_under_onemodel_as_under_torch(spec, torch_runs):
    folder, torch_results = torch_runs
    theirs = torch_results[spec]
    if theirs["error"] is not None:
        pytest.fail(f"{spec} fails under torch:\n{theirs['error']}", pytrace=False)
    t_losses, t_lines = _losses(theirs["stdout"])
    assert t_lines, f"{spec} printed no loss under torch"
    compared, _why = PROGRAMS[spec]
    # Runs-only programs keep their own initial weights: nothing of theirs is compared, and some
    # hold layers whose parameters are not torch's one for one (nn.Transformer's attention).
    if compared == 0 and not (folder / "no-weights.npz").exists():
        np.savez(folder / "no-weights.npz")
    weights = "no-weights.npz" if compared == 0 else "weights.npz"
    ours = _run("onemodel", folder, [spec], weights)[spec]
    if ours["error"] is not None:
        pytest.fail(f"{spec} fails under onemodel:\n{ours['error']}", pytrace=False)
    o_losses, o_lines = _losses(ours["stdout"])
    assert len(o_lines) == len(t_lines), (spec, o_lines, t_lines)
    for numbers in o_losses:
        assert all(math.isfinite(v) for v, _ in numbers), (spec, o_lines)
    count = len(t_lines) if compared is ALL else compared
    for i in range(count):
        o, t = o_losses[i], t_losses[i]
        assert len(o) == len(t) and all(map(_agree, o, t)), \
            f"{spec}: loss line {i} differs:\n  onemodel: {o_lines[i]}\n  torch:    {t_lines[i]}"
