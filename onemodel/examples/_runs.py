"""What the example jobs share as command-line tools: numbered run folders, the options a run
is defined by (run.json), --resume, --threads, --out and --quiet.

A new run writes to OUT/1, OUT/2, ...; --resume continues the newest run of OUT, or the run
folder named, with the options it was started with (an option given again must not differ).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

import onemodel as om
from onemodel import checkpoint

RUN_FILE = "run.json"


def job_options(p: argparse.ArgumentParser, defaults: dict[str, Any],
                helps: dict[str, str]) -> None:
    """A tool's own options, --name-with-dashes of its defaults' types, None when not given."""
    for name, text in helps.items():
        p.add_argument("--" + name.replace("_", "-"), type=type(defaults[name]),
                       help=f"{text} (default {defaults[name]})")


def speaker(quiet: bool) -> Any:
    """print to stderr, or nothing with --quiet."""
    return (lambda text: None) if quiet else (lambda text: print(text, file=sys.stderr))


def run_options(p: argparse.ArgumentParser, out: str) -> None:
    """Adds the shared options. A tool's own options default to None, so that a resumed run can
    tell which were given."""
    p.add_argument("--threads", type=int, default=None,
                   help="kernel threads (default: the cores this process may use); the "
                        "result has the same bits at every count")
    p.add_argument("--out", default=out,
                   help=f"folder of the runs; each run writes to a new numbered folder in it "
                        f"(default {out})")
    p.add_argument("--resume", nargs="?", const="latest", default=None, metavar="RUN",
                   help="continue a run from its last checkpoint: the newest run in --out, or "
                        "the run folder RUN; its options are the ones it was started with")
    p.add_argument("--quiet", action="store_true", help="print only the result")


def _numbered_runs(out: str) -> list[int]:
    try:
        return sorted(int(n) for n in os.listdir(out) if n.isdigit())
    except FileNotFoundError:
        return []


def open_run(args: argparse.Namespace, p: argparse.ArgumentParser, defaults: dict[str, Any],
             tool: str, positive: tuple[str, ...] = ()) -> tuple[str, dict, bool]:
    """Checks the options (those named in `positive` must be > 0), sets the threads; returns
    the run folder, the run's options and whether it continues an earlier run."""
    if args.threads is not None:
        if args.threads < 1:
            p.error(f"--threads must be >= 1, got {args.threads}")
        om.set_num_threads(args.threads)
    given = {k: getattr(args, k) for k in defaults if getattr(args, k) is not None}
    for name in positive:
        value = given.get(name)
        if value is not None and value <= 0:
            p.error(f"--{name.replace('_', '-')} must be > 0, got {value}")
    if args.resume is None:
        runs = _numbered_runs(args.out)
        folder = os.path.join(args.out, str(runs[-1] + 1 if runs else 1))
        os.makedirs(folder)
        options = {**defaults, **given}
        with open(os.path.join(folder, RUN_FILE), "w", encoding="utf-8") as f:
            json.dump(options, f, indent=2)
        return folder, options, False
    if args.resume == "latest":
        runs = _numbered_runs(args.out)
        if not runs:
            p.error(f"--resume: there is no run in {args.out} to continue")
        folder = os.path.join(args.out, str(runs[-1]))
    else:
        folder = args.resume
    try:
        with open(os.path.join(folder, RUN_FILE), encoding="utf-8") as f:
            options = json.load(f)
    except (OSError, ValueError) as e:
        p.error(f"--resume: {folder} is not a run folder of {tool} ({e})")
    changed = {k: v for k, v in given.items() if options.get(k) != v}
    if changed:
        p.error(f"--resume: the run in {folder} was started with "
                + ", ".join(f"--{k.replace('_', '-')} {options.get(k)}" for k in changed)
                + "; a resumed run keeps its options (start a new run to change them)")
    return folder, options, True


def decay_on_matrices(model: Any, weight_decay: float) -> list[dict]:
    """Parameter groups that decay the matrices and kernels only, not biases or norm scales
    (decaying them pulls what should sit at its own scale towards zero)."""
    params = list(model.parameters())
    return [{"params": [p for p in params if p.ndim > 1], "weight_decay": weight_decay},
            {"params": [p for p in params if p.ndim <= 1], "weight_decay": 0.0}]


def fit_run(trainer: Any, steps: int, folder: str, resumed: bool, p: argparse.ArgumentParser,
            say: Any) -> float:
    """Continues the run (resumed) or starts it, trains to `steps`, and loads the best checkpoint
    into the model; returns the seconds the training took."""
    if resumed:
        if not trainer.resume():
            p.error(f"--resume: {folder} holds no checkpoint yet")
        say(f"continuing the run in {folder} from step {trainer.step}")
    else:
        say(f"a new run in {folder}")
    start = time.perf_counter()
    trainer.fit(steps)
    checkpoint.load(trainer.manager.best_path, trainer.model)
    return time.perf_counter() - start
