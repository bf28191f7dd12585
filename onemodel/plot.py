"""Draw a run's metrics.jsonl (written by the Trainer) to a PNG.

    onemodel-plot RUN_DIR [--out FILE]      (or python -m onemodel.plot RUN_DIR)

Four panels against the step: the training loss with the validation loss, the validation
accuracy (and any other evaluation metric), the learning rate and the gradient norm. Needs
matplotlib: pip install 'onemodel[plot]'.
"""
from __future__ import annotations

import argparse
import json
import os
from typing import Optional

from .train import METRICS_LOG


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
    figure.suptitle(os.path.abspath(run_dir))
    figure.tight_layout()
    out = out or os.path.join(run_dir, "metrics.png")
    figure.savefig(out, dpi=100)
    plt.close(figure)
    return out


def main(argv: Optional[list[str]] = None) -> str:
    p = argparse.ArgumentParser(prog="onemodel-plot", description=__doc__.splitlines()[0])
    p.add_argument("run_dir", help="a run folder with a metrics.jsonl")
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
