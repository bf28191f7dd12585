"""The Trainer's option groups, small frozen dataclasses checked when made: `Evaluation` (the
held-out loader, how often, the metrics and the best checkpoint's metric), `Checkpoints` (the run
folder, how many to keep, how often), `Precision` (autocast and loss scaling) and the strategies
`SingleProcess`, `DataParallel` and `ZeRO` (how the M micro-batches of a step are shared among
the workers, and whether the optimizer's state is sharded); and the mapping of the Trainer's
former keyword arguments onto them, kept for one release with a DeprecationWarning."""
from __future__ import annotations

import os
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Optional, Union

from .. import amp, distributed
from .._trainer_checks import _instantiate_hint, _is_iterable, _kind

_DIRECTIONS = {"accuracy": "max", "loss": "min"}  # the built-in metrics: which way is better


def _count(owner: str, name: str, value: Any, least: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise ValueError(f"{owner}: {name} must be an integer >= {least}, got {value!r}")


@dataclass(frozen=True)
class Evaluation:
    """Every `every` steps (0: only when evaluate() is called) `loader` runs in eval mode
    without gradients, giving the loss, the accuracy when targets are class indices, and each
    of `metrics` (name -> function (output, target) -> float, weighted by batch size); with
    Checkpoints, each evaluation writes a checkpoint. The best checkpoint is chosen by
    `best_metric` (default: accuracy when targets are class indices, loss otherwise; a name of
    `metrics` needs `best_mode` "max" or "min")."""

    loader: Any
    every: int = 0
    metrics: Mapping[str, Callable[[Any, Any], float]] = field(default_factory=dict)
    best_metric: Optional[str] = None
    best_mode: Optional[str] = None

    def __post_init__(self) -> None:
        if self.loader is None or not _is_iterable(self.loader):
            raise TypeError(f"Evaluation: loader must be iterable, yielding batches (inputs..., "
                            f"target), got {_kind(self.loader)}")
        _count("Evaluation", "every", self.every, 0)
        metrics = dict(self.metrics or {})
        for name, fn in metrics.items():
            if name in ("event", "step", *_DIRECTIONS) or not callable(fn):
                raise ValueError(f"Evaluation: metrics must map new names to functions "
                                 f"(output, target) -> float, got {name!r}: {fn!r}")
        object.__setattr__(self, "metrics", metrics)
        if self.best_mode not in (None, "max", "min"):
            raise ValueError(f"Evaluation: best_mode must be 'max' or 'min', got "
                             f"{self.best_mode!r}")
        if self.best_metric is not None:
            if self.best_metric not in _DIRECTIONS and self.best_metric not in metrics:
                raise ValueError(f"Evaluation: best_metric must be one of "
                                 f"{list(_DIRECTIONS) + list(metrics)}, got "
                                 f"{self.best_metric!r}")
            if self.best_mode is None and self.best_metric not in _DIRECTIONS:
                raise ValueError(f"Evaluation: best_metric {self.best_metric!r} needs best_mode "
                                 "'max' or 'min'")


@dataclass(frozen=True)
class Checkpoints:
    """Checkpoints in the folder `dir`, which keeps the `keep_last` newest and the best: one at
    every evaluation, one every `every` steps (0: none besides), one at the end of fit(). The
    folder also gets metrics.jsonl (the package notes)."""

    dir: Union[str, "os.PathLike[str]"]
    keep_last: int = 3
    every: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.dir, (str, os.PathLike)):
            raise TypeError(f"Checkpoints: dir must be a folder path, got {_kind(self.dir)}")
        _count("Checkpoints", "keep_last", self.keep_last, 1)
        _count("Checkpoints", "every", self.every, 0)


@dataclass(frozen=True)
class Precision:
    """Forward and loss under `autocast` ("bf16", "fp16", om.bfloat16, om.float16; None: all
    float32), the loss scaled by `scaler` (an amp.GradScaler) and a step with non-finite
    gradients skipped."""

    autocast: Optional[Any] = None
    scaler: Optional[amp.GradScaler] = None

    def __post_init__(self) -> None:
        if self.autocast is not None:
            object.__setattr__(self, "autocast", amp.dtype_name(self.autocast))
        if self.scaler is not None and not isinstance(self.scaler, amp.GradScaler):
            raise TypeError(f"Precision: scaler must be an amp.GradScaler or None, got "
                            f"{_kind(self.scaler)}" + _instantiate_hint(self.scaler))


@dataclass(frozen=True)
class Strategy:
    """How the M = `micro_batches` micro-batches of a step are shared among the workers; the
    mean gradient is an exact sum over all M, rounded once, so the bits are the same for every
    worker count W dividing M (and for one process computing all M)."""

    micro_batches: Optional[int] = None

    def __post_init__(self) -> None:
        if self.micro_batches is not None:
            _count(type(self).__name__, "micro_batches", self.micro_batches, 1)

    def joins_world(self) -> bool:
        """Whether the Trainer joins the mpiexec world (distributed.init) before plan()."""
        return True

    def plan(self, world: int) -> int:
        """M for a run of `world` workers (each computes M / world of them)."""
        total = world if self.micro_batches is None else self.micro_batches
        if total % world:
            raise ValueError(f"Trainer: micro_batches {total} do not divide among {world} "
                             "workers")
        return total

    def shards(self, optimizer: Any) -> Optional[distributed.OptimizerShards]:
        """The optimizer's shards among the workers; None: every worker steps all of it."""
        return None


@dataclass(frozen=True)
class SingleProcess(Strategy):
    """One process, `micro_batches` (None: 1) a step. Refused under an mpiexec of several
    processes, whose W copies would each write the run folder."""

    def joins_world(self) -> bool:
        if distributed.launched() or distributed.world_size() > 1:
            raise ValueError("Trainer: strategy SingleProcess() under mpiexec with several "
                             "processes; use DataParallel(...)")
        return False


@dataclass(frozen=True)
class DataParallel(Strategy):
    """W workers under mpiexec (W = 1 without it), `micro_batches` a step in all (None: one a
    worker, M = W), worker r computing micro-batches r, r + W, ... (docs/guide/data_parallel.md).
    The default strategy."""


@dataclass(frozen=True)
class ZeRO(DataParallel):
    """DataParallel with the optimizer's state sharded (ZeRO stage 1, distributed.OptimizerShards,
    kept as the Trainer's `shards`): each worker steps the optimizer for its share of the
    parameters, which are then all-gathered; the same bits as unsharded. A worker holds the
    optimizer state of its own parameters only (the others' are zero placeholders) except from
    `shards.gather_state()` (which save() calls on every worker before rank 0 writes the
    unsharded checkpoint) to `shards.release()`, and after a step only the worker's own
    parameters keep their gradients."""

    def shards(self, optimizer: Any) -> Optional[distributed.OptimizerShards]:
        return distributed.OptimizerShards(optimizer)


# The former keyword arguments: name -> (option group, its field).
_LEGACY = {"eval_loader": ("evaluation", "loader"), "eval_every": ("evaluation", "every"),
           "metrics": ("evaluation", "metrics"), "best_metric": ("evaluation", "best_metric"),
           "best_mode": ("evaluation", "best_mode"), "checkpoint_dir": ("checkpoints", "dir"),
           "keep_last": ("checkpoints", "keep_last"),
           "checkpoint_every": ("checkpoints", "every"),
           "autocast": ("precision", "autocast"), "scaler": ("precision", "scaler"),
           "micro_batches": ("strategy", "micro_batches"),
           "accumulate": ("strategy", "accumulate"), "shard_optimizer": ("strategy", "shard"),
           "callback": ("callbacks", "callback"), "progress": ("callbacks", "progress"),
           "log_every": ("callbacks", "log_every")}
_REPLACEMENT = {"evaluation": "evaluation=Evaluation(loader, every, metrics, best_metric, "
                              "best_mode)",
                "checkpoints": "checkpoints=Checkpoints(dir, keep_last, every)",
                "precision": "precision=Precision(autocast, scaler)",
                "strategy": "strategy=DataParallel(micro_batches) or ZeRO(micro_batches)",
                "callbacks": "callbacks=[ProgressBar(live, every), your function]"}


def from_legacy(given: dict, new: dict) -> tuple[dict, Optional[int]]:
    """The option groups the former keyword arguments `given` stand for, merged into `new`
    (the groups given the new way), with a DeprecationWarning naming the replacement; and the
    former `accumulate` (micro-batches per worker, turned into M once W is known)."""
    unknown = sorted(set(given) - set(_LEGACY))
    if unknown:
        raise TypeError(f"Trainer: unexpected keyword argument {unknown[0]!r}")
    groups: dict[str, dict] = {}
    for name, value in given.items():
        group, key = _LEGACY[name]
        groups.setdefault(group, {})[key] = value
    for group in groups:
        if new.get(group) is not None:
            raise TypeError(f"Trainer: {group}= given with the former keyword arguments "
                            f"{sorted(k for k in given if _LEGACY[k][0] == group)}; give "
                            "one or the other")
        names = ", ".join(f"{k}=" for k in given if _LEGACY[k][0] == group)
        warnings.warn(f"Trainer: the keyword arguments {names} are deprecated (gone in the "
                      f"next release); use {_REPLACEMENT[group]}", DeprecationWarning,
                      stacklevel=3)
    out = dict(new)
    accumulate = None
    if "evaluation" in groups:
        out["evaluation"] = _legacy_evaluation(groups["evaluation"])
    if "checkpoints" in groups:
        options = groups["checkpoints"]
        if options.get("dir") is None:
            if options.get("every"):
                raise ValueError("Trainer: checkpoint_every needs a checkpoint_dir")
            _count("Trainer", "keep_last", options.get("keep_last", 3), 1)
        else:
            out["checkpoints"] = Checkpoints(**options)
    if "precision" in groups:
        out["precision"] = Precision(**groups["precision"])
    if "strategy" in groups:
        options = groups["strategy"]
        shard = options.pop("shard", False)
        if not isinstance(shard, bool):
            raise ValueError(f"Trainer: shard_optimizer must be True or False, got {shard!r}")
        accumulate = options.pop("accumulate", None)
        if accumulate is not None:
            _count("Trainer", "accumulate", accumulate, 1)
            if options.get("micro_batches") is not None:
                accumulate = None  # micro_batches, when given, has always won
        out["strategy"] = (ZeRO if shard else DataParallel)(**options)
    if "callbacks" in groups:
        out["callbacks"] = _legacy_callbacks(**groups["callbacks"])
    return out, accumulate


def _legacy_evaluation(options: dict) -> Optional[Evaluation]:
    if options.get("loader") is None:
        if options.get("every"):
            raise ValueError("Trainer: eval_every needs an eval_loader")
        return None
    return Evaluation(**options)


def _legacy_callbacks(callback: Any = None, progress: Any = None, log_every: int = 0) -> list:
    from .callbacks import ProgressBar

    if callback is not None and not callable(callback):
        raise TypeError(f"Trainer: callback must be a function (info) -> None or None, got "
                        f"{_kind(callback)}")
    if progress not in (None, True, False):
        raise ValueError(f"Trainer: progress must be None, True or False, got {progress!r}")
    shown = [] if progress is False else [ProgressBar(live=progress, every=log_every)]
    return ([callback] if callback is not None else []) + shown
