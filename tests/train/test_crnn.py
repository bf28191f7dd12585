"""The line recognizer example: its line generator, decoding, CER, a short run, and PyTorch."""
import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

import onemodel as om
import onemodel.functional as F
from onemodel import interop, nn

pytest.importorskip("sklearn")
pytest.importorskip("PIL")

from onemodel.examples.crnn import __main__ as job  # noqa: E402
from onemodel.examples.crnn import lines  # noqa: E402
from onemodel.examples.crnn.model import build, character_errors, edit_distance, greedy_decode  # noqa: E402


def test_a_batch_is_a_pure_function_of_seed_and_step():
    a, b = lines.training_batch(3, 7, 6), lines.training_batch(3, 7, 6)
    assert np.array_equal(a.images, b.images) and a.texts == b.texts
    c = lines.training_batch(3, 8, 6)
    assert a.texts != c.texts
    assert lines.line(3, 0, 0, validation=True)[1] != lines.line(3, 0, 0)[1]


def test_lines_are_what_they_claim():
    batch = lines.training_batch(0, 1, 16)
    assert batch.images.shape[:3] == (16, 1, lines.HEIGHT)
    assert batch.images.shape[3] == batch.widths.max()
    assert (batch.widths % 4 == 0).all() and batch.images.dtype == np.float32
    assert 0.0 <= batch.images.min() and batch.images.max() <= 1.0
    for image, width, text, code, n in zip(batch.images[:, 0], batch.widths, batch.texts,
                                            batch.targets, batch.target_lengths):
        # Padding repeats the line's last column; the label is the text's classes.
        assert (image[:, width:] == image[:, width - 1:width]).all()
        assert lines.decode(list(code[:n])) == text and (code[n:] == 0).all()
        assert image[:, :width].max() > 0.5  # there is ink
    sources = {lines.line(0, 1, i)[1].isdigit() for i in range(16)}
    assert sources == {True, False}  # both sources in one batch
    digits, text = lines.line(0, 2, 0, "handwriting")
    assert text.isdigit() and 3 <= len(text) <= 10
    assert lines.line(0, 2, 0, "print")[1][0].isalnum()


def test_bad_lines_and_labels_are_refused():
    with pytest.raises(ValueError, match="'@' is not in the alphabet"):
        lines.encode("a@b")
    with pytest.raises(ValueError, match="32 px high"):
        lines.collate([(np.zeros((30, 8), np.float32), "1")])
    with pytest.raises(ValueError, match="source"):
        lines.line(0, 0, 0, "photos")


def test_greedy_decoding_and_character_error_rate():
    # Paths over 6 steps: 1 1 0 1 2 2 -> [1, 1, 2]; the second line is cut at 3 steps -> [3].
    path = np.array([[1, 3], [1, 3], [0, 0], [1, 2], [2, 2], [2, 2]])
    log_probs = np.full((6, 2, 4), -10.0, np.float32)
    for t in range(6):
        for b in range(2):
            log_probs[t, b, path[t, b]] = 0.0
    assert greedy_decode(log_probs, np.array([6, 3])) == [[1, 1, 2], [3]]
    assert edit_distance("kitten", "sitting") == 3
    assert edit_distance([], [1, 2]) == 2 and edit_distance([1, 2], [1, 2]) == 0
    assert character_errors([[1, 1, 2], [3]], [[1, 2], [3, 4]]) == (2, 4)


def test_a_short_run_learns(tmp_path, capsys):
    rates = job.main(["--steps", "24", "--batch-size", "8", "--eval-every", "12",
                      "--val-lines", "8", "--warmup", "4", "--out", str(tmp_path)])
    assert set(rates) == set(lines.SOURCES)
    rows = (tmp_path / "1" / "metrics.jsonl").read_text().splitlines()
    losses = [json.loads(r)["loss"] for r in rows if '"step"' in r and '"eval"' not in r]
    assert np.mean(losses[-6:]) < 0.6 * np.mean(losses[:3])
    assert "character error rate after 24 steps" in capsys.readouterr().out


def _reference():
    """tools/crnn_ref/compare.py, the PyTorch side."""
    path = Path(__file__).resolve().parents[2] / "tools" / "crnn_ref" / "compare.py"
    spec = importlib.util.spec_from_file_location("crnn_compare", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _first_step(model, batch, ctc_loss, to_input):
    images, steps, target = job.as_inputs(batch)
    log_probs = model(to_input(batch.images), steps)
    loss = ctc_loss(log_probs, target)
    loss.backward()
    return loss.item(), {n: p.grad.numpy() for n, p in model.named_parameters()}


@pytest.mark.oracle
def test_first_step_matches_pytorch_as_closely_as_pytorch_matches_itself():
    # docs/spec/training.txt section 10's standard: our distance to PyTorch in float64 is of the
    # order of PyTorch float32's own (with a floor of 1e-5 scaled); the loss within 1e-6
    # relative. Ours is the same on every CPU, torch's own is not: features.0.weight 2.38e-5
    # against torch's 1.19e-5 on an AVX2 AMD EPYC (2.0x), a smaller ratio on AVX-512 CPUs.
    torch = pytest.importorskip("torch")
    from conftest import scaled_error

    tool = _reference()
    torch_ctc = tool.torch_ctc(torch)
    torch.manual_seed(0)
    reference = tool.torch_recognizer(torch)
    ours = build(nn, F, lines.CLASSES)
    interop.load_torch_state_dict(ours, reference.state_dict())
    wide = tool.torch_recognizer(torch)
    wide.load_state_dict(reference.state_dict())
    wide.double()
    batch = lines.training_batch(0, 0, 6)
    loss, grads = _first_step(ours, batch, job.ctc, om.from_numpy)
    loss32, grads32 = _first_step(reference, batch, torch_ctc, torch.from_numpy)
    loss64, grads64 = _first_step(wide, batch, torch_ctc,
                                  lambda a: torch.from_numpy(a.astype(np.float64)))
    assert abs(loss - loss32) <= 1e-6 * abs(loss32)
    for name, grad in grads.items():
        ours_error = scaled_error(grad, grads64[name])
        torch_error = scaled_error(grads32[name], grads64[name])
        assert ours_error <= max(1e-5, 2.5 * torch_error), (name, ours_error, torch_error)


def test_export_folds_batch_norm_within_float32_rounding(tmp_path):
    from conftest import scaled_error

    from onemodel.examples.crnn.export import export, folded_state

    model = build(nn, F, lines.CLASSES)
    g = om.Generator(5)
    for name, buffer in model.named_buffers():  # statistics and scales far from 0 and 1
        if name.endswith("running_mean"):
            buffer.numpy()[...] = g.uniform(-0.5, 0.5, buffer.shape).numpy()
        elif name.endswith("running_var"):
            buffer.numpy()[...] = g.uniform(0.2, 3.0, buffer.shape).numpy()
    for name, p in model.named_parameters():
        if name.startswith("features.") and p.ndim == 1:
            p.detach().numpy()[...] = g.uniform(0.5, 1.5, p.shape).numpy()
    model.eval()
    folded = build(nn, F, lines.CLASSES, folded=True)
    folded.load_state_dict(folded_state(model))
    folded.eval()
    images, steps, _ = job.as_inputs(lines.training_batch(1, 0, 4))
    with om.no_grad():
        assert scaled_error(folded(images, steps).numpy(), model(images, steps).numpy()) < 1e-5
    path = tmp_path / "model.safetensors"
    export(model, str(path))
    safetensors = pytest.importorskip("safetensors.numpy")
    loaded = safetensors.load_file(str(path))
    expected = folded_state(model)
    assert set(loaded) == set(expected)
    for name, value in expected.items():
        assert np.array_equal(loaded[name], value), name


@pytest.mark.oracle
def test_the_comparison_tool_runs_the_three_trainings():
    pytest.importorskip("torch")
    report = _reference().main(["--steps", "3", "--batch-size", "4", "--val-lines", "4",
                                "--warmup", "1"])
    first = {name: run["losses"][0] for name, run in report["runs"].items()}
    assert abs(first["onemodel"] - first["torch32"]) <= 1e-6 * first["torch32"]
    assert len(report["onemodel_vs_torch32"]["windows"]) == 1
    assert set(report["runs"]["torch64"]["cer"]) == set(lines.SOURCES)
