"""What the example jobs share as command-line tools: numbered run folders, the options a run
is defined by (run.json), --resume, --threads, --out and --quiet.

A new run writes to OUT/1, OUT/2, ...; --resume continues the newest run of OUT, or the run
folder named, with the options it was started with (an option given again must not differ).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import shlex
import sys
import time
from typing import Any, Optional

import onemodel as om
from onemodel import checkpoint

RUN_FILE = "run.json"
RESULT_FILE = "result.json"


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


def numbered_runs(out: str) -> list[int]:
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
    for name, value in given.items():
        problem = _option_problem(name, value, defaults[name], positive)
        if problem:
            p.error(f"--{name.replace('_', '-')} {problem}")
    if args.resume is None:
        runs = numbered_runs(args.out)
        folder = os.path.join(args.out, str(runs[-1] + 1 if runs else 1))
        os.makedirs(folder)
        options = {**defaults, **given}
        # whole or absent after a kill, never torn
        checkpoint._write_small_file(os.path.join(folder, RUN_FILE),
                                     json.dumps(options, indent=2).encode())
        return folder, options, False
    if args.resume == "latest":
        runs = numbered_runs(args.out)
        if not runs:
            p.error(f"--resume: there is no run in {args.out} to continue")
        folder = os.path.join(args.out, str(runs[-1]))
    else:
        folder = args.resume
    path = os.path.join(folder, RUN_FILE)
    try:
        with open(path, encoding="utf-8") as f:
            options = json.load(f)
    except (OSError, ValueError) as e:
        p.error(f"--resume: {folder} is not a run folder of {tool} ({e})")
    problem = _run_file_problem(options, defaults, positive)
    if problem:
        p.error(f"--resume: {path}: {problem}; it is not a run file of {tool}")
    changed = {k: v for k, v in given.items() if options.get(k) != v}
    if changed:
        p.error(f"--resume: the run in {folder} was started with "
                + ", ".join(f"--{k.replace('_', '-')} {options.get(k)}" for k in changed)
                + "; a resumed run keeps its options (start a new run to change them)")
    return folder, options, True


def _option_problem(name: str, value: Any, default: Any,
                    positive: tuple[str, ...]) -> Optional[str]:
    """What is wrong with an option's value (None: nothing): its default's type (an integer
    counts as a float), finite, > 0 if named in `positive` and >= 0 otherwise."""
    kind = type(default)
    if isinstance(value, bool) != (kind is bool) or not isinstance(
            value, (int, float) if kind is float else kind):
        return f"must be {kind.__name__}, got {value!r}"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if not math.isfinite(value) or value < 0 or (name in positive and value == 0):
            return f"must be {'> 0' if name in positive else '>= 0'}, got {value!r}"
    return None


def _run_file_problem(options: Any, defaults: dict[str, Any],
                      positive: tuple[str, ...]) -> Optional[str]:
    """What is wrong with the options read from run.json (None: nothing), naming the field."""
    if not isinstance(options, dict):
        return f"holds {type(options).__name__}, not an object of options"
    for name, default in defaults.items():
        if name not in options:
            return f"field {name!r} is missing"
        problem = _option_problem(name, options[name], default, positive)
        if problem:
            return f"field {name!r} {problem}"
    unknown = sorted(set(options) - set(defaults))
    if unknown:
        return f"field {unknown[0]!r} is no option"
    return None


def decay_on_matrices(model: Any, weight_decay: float) -> list[dict]:
    """Parameter groups that decay the matrices and kernels only, not biases or norm scales
    (decaying them pulls what should sit at its own scale towards zero)."""
    params = list(model.parameters())
    return [{"params": [p for p in params if p.ndim > 1], "weight_decay": weight_decay},
            {"params": [p for p in params if p.ndim <= 1], "weight_decay": 0.0}]


def fit_run(trainer: Any, steps: int, folder: str, resumed: bool, p: argparse.ArgumentParser,
            say: Any) -> tuple[float, Optional[int]]:
    """Continues the run (resumed) or starts it, trains to `steps`, and loads the best checkpoint
    into the model; returns the seconds the training took and the best checkpoint's step.
    Ctrl-C ends the process with one line naming the last checkpoint and the command that
    continues from it (exit code 130, the shell's for SIGINT)."""
    if resumed:
        if not trainer.resume():
            p.error(f"--resume: {folder} holds no checkpoint yet")
        say(f"continuing the run in {folder} from step {trainer.step}")
    else:
        say(f"a new run in {folder}")
    start = time.perf_counter()
    try:
        trainer.fit(steps)
    except KeyboardInterrupt:
        print(interrupted_line(p.prog, folder, trainer.step, trainer.manager.latest()),
              file=sys.stderr)
        sys.exit(130)
    extra = checkpoint.load(trainer.manager.best_path, trainer.model)
    step = extra.get("train.step")
    return time.perf_counter() - start, step if isinstance(step, int) else None


def interrupted_line(tool: str, folder: str, step: int, latest: Optional[str]) -> str:
    """What Ctrl-C leaves on the screen: where the run stands and how to go on."""
    if latest is None:
        return (f"{tool}: stopped at step {step}, before the first checkpoint; nothing to "
                f"resume (run {tool} again to start over)")
    return (f"{tool}: stopped at step {step}; the last checkpoint is {latest}; continue with: "
            f"{tool} --resume {shlex.quote(folder)}")


def write_result(folder: str, tool: str, options: dict[str, Any], headline: str,
                 result: dict[str, Any], trainer: Any, best_step: Optional[int],
                 seconds: float) -> str:
    """Keeps the run's result in RESULT_FILE beside run.json (what onemodel-plot shows): the
    headline as printed, its figures, the best checkpoint's step and metric, and the options."""
    last = trainer.last_eval or {}
    metric = trainer.best_metric or ("accuracy" if last.get("accuracy") is not None else "loss")
    record = {"tool": tool, "headline": headline, "result": result, "steps": trainer.step,
              "seconds": round(seconds, 1),
              "best": {"step": best_step, "metric": metric,
                       "value": trainer.manager.best_metric},
              "options": options}
    path = os.path.join(folder, RESULT_FILE)
    checkpoint._write_small_file(path, json.dumps(record, indent=2).encode())
    return path
