"""Draw a run's metrics.jsonl (written by the Trainer) to a PNG.

    onemodel-plot RUN_DIR [--out FILE]      (or python -m onemodel.plot RUN_DIR)

Four panels against the step: the training loss with the validation loss, the validation
accuracy (and any other evaluation metric), the learning rate and the gradient norm. A dashed
line marks the best checkpoint; the title names the run and its options (run.json) and, once
the run has finished, its result (result.json). RUN_DIR may also be a folder of numbered runs
(runs/digits): the newest is drawn. Needs matplotlib: pip install 'onemodel[plot]'.
"""
from __future__ import annotations

import argparse
import json
import os
import textwrap
from typing import Any, Optional

from .examples._runs import RESULT_FILE, RUN_FILE, numbered_runs
from .train import METRICS_LOG


def newest_run(path: str) -> str:
    """`path` itself if it holds a metrics log, else the newest numbered run inside it."""
    if os.path.exists(os.path.join(path, METRICS_LOG)):
        return path
    runs = numbered_runs(path)
    return os.path.join(path, str(runs[-1])) if runs else path


def _read_json(path: str) -> Optional[dict]:
    """A run file's object, None when it is absent (a run still going has no result)."""
    try:
        with open(path, encoding="utf-8") as f:
            value = json.load(f)
    except FileNotFoundError:
        return None
    except ValueError as e:
        raise ValueError(f"{path}: not JSON ({e})") from None
    if not isinstance(value, dict):
        raise ValueError(f"{path}: holds {type(value).__name__}, not an object")
    return value


def run_title(run_dir: str, options: Optional[dict], result: Optional[dict]) -> str:
    """The run's name (its folder and the one above, never the absolute path), its options
    and its result, on lines of at most 110 characters."""
    parts = os.path.normpath(os.path.abspath(run_dir)).split(os.sep)
    name = "/".join(p for p in parts[-2:] if p)
    text = name + (": " + ", ".join(f"{k} {v}" for k, v in options.items()) if options else "")
    lines = textwrap.wrap(text, 110)
    if result and isinstance(result.get("headline"), str):
        lines.append(result["headline"])
    return "\n".join(lines)


def best_step(evals: list[dict], result: Optional[dict]) -> Optional[int]:
    """The best checkpoint's step: result.json's, else the evaluation the Trainer's default
    rule picks (the highest accuracy when there is one, else the lowest loss; the first of
    equals, as only a strictly better metric replaces the best)."""
    best = (result or {}).get("best")
    if isinstance(best, dict) and isinstance(best.get("step"), int):
        return best["step"]
    key, sign = ("accuracy", -1.0) if any(r.get("accuracy") is not None for r in evals) \
        else ("loss", 1.0)
    scored = [(sign * r[key], r["step"]) for r in evals if r.get(key) is not None]
    return min(scored, key=lambda pair: pair[0])[1] if scored else None


def read_log(run_dir: str) -> tuple[list[dict], list[dict]]:
    """The step rows and the evaluation rows of a run folder's metrics log."""
    path = os.path.join(run_dir, METRICS_LOG)
    steps: list[dict] = []
    evals: list[dict] = []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except ValueError as e:
                raise ValueError(f"{path}, line {number}: not a JSON object ({e})") from None
            (evals if row.get("event") == "eval" else steps).append(row)
    return steps, evals


def _series(rows: list[dict], key: str) -> tuple[list[int], list[float]]:
    pairs = [(r["step"], r[key]) for r in rows if r.get(key) is not None]
    return [s for s, _ in pairs], [v for _, v in pairs]


def plot(run_dir: str, out: Optional[str] = None) -> str:
    """Draws the run's curves; returns the PNG's path (default RUN_DIR/metrics.png)."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise SystemExit("onemodel-plot needs matplotlib: pip install 'onemodel[plot]'") from None
    run_dir = newest_run(run_dir)
    steps, evals = read_log(run_dir)
    if not steps:
        raise ValueError(f"{os.path.join(run_dir, METRICS_LOG)} holds no training steps")
    figure, axes = plt.subplots(2, 2, figsize=(10, 7), sharex=True)
    loss, metric, lr, norm = axes.flat
    loss.plot(*_series(steps, "loss"), lw=0.8, label="training")
    if evals:
        loss.plot(*_series(evals, "loss"), "o-", label="validation")
    loss.set(title="loss", yscale="log")
    loss.legend()
    others = sorted({k for r in evals for k, v in r.items()
                     if k not in ("event", "step", "loss") and v is not None})
    for key in others:
        metric.plot(*_series(evals, key), "o-", label=key)
    metric.set(title="validation " + (", ".join(others) if others else "metrics (none)"))
    if others:
        metric.legend()
    lr.plot(*_series(steps, "lr"))
    lr.set(title="learning rate", xlabel="step")
    norm.plot(*_series(steps, "grad_norm"), lw=0.8)
    norm.set(title="gradient norm (before clipping)", xlabel="step", yscale="log")
    result = _read_json(os.path.join(run_dir, RESULT_FILE))
    options: Any = (result or {}).get("options") or _read_json(os.path.join(run_dir, RUN_FILE))
    best = best_step(evals, result)
    if best is not None:
        for panel in axes.flat:
            panel.axvline(best, color="tab:green", ls="--", lw=1,
                          label=f"best checkpoint (step {best})")
        loss.legend()
    figure.suptitle(run_title(run_dir, options, result), fontsize=10)
    figure.tight_layout()
    out = out or os.path.join(run_dir, "metrics.png")
    figure.savefig(out, dpi=100)
    plt.close(figure)
    return out


def main(argv: Optional[list[str]] = None) -> str:
    p = argparse.ArgumentParser(prog="onemodel-plot", description=__doc__.splitlines()[0])
    p.add_argument("run_dir", help="a run folder with a metrics.jsonl, or a folder of "
                                   "numbered runs (runs/digits: the newest)")
    p.add_argument("--out", help="the PNG to write (default RUN_DIR/metrics.png)")
    args = p.parse_args(argv)
    try:
        path = plot(args.run_dir, args.out)
    except (OSError, ValueError) as e:
        p.error(str(e))
    print(path)
    return path


def console() -> None:
    """The onemodel-plot command."""
    main()


if __name__ == "__main__":
    console()
