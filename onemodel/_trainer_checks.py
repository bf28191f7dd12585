"""The Trainer's argument checks: each names the argument and says what to do, and all run
before the Trainer changes anything (no distributed.init, no loader.shard, no folder made)."""
from __future__ import annotations

import math
import os
from typing import Any

from . import amp


def _is_optimizer(value: Any) -> bool:
    from .optim.optimizer import Optimizer

    return isinstance(value, Optimizer)


def _is_module(value: Any) -> bool:
    from .nn import Module

    return isinstance(value, Module)


def _is_iterable(value: Any) -> bool:
    # Not iter(value): a DataLoader's iterator may start workers.
    kind = type(value)
    return hasattr(kind, "__iter__") or hasattr(kind, "__getitem__")


def _kind(value: Any) -> str:
    return f"the class {value.__name__}" if isinstance(value, type) else type(value).__name__


def _instantiate_hint(value: Any) -> str:
    """A class given where one of its instances was meant."""
    return f" (did you mean {value.__name__}(...)?)" if isinstance(value, type) else ""


def check_core(model: Any, loss_fn: Any, optimizer: Any, loader: Any) -> None:
    """The four positional arguments, with the likeliest mix-ups named."""
    if not _is_module(model):
        if _is_module(loss_fn) and callable(model):
            raise TypeError("Trainer: model must be an nn.Module, got a "
                            f"{_kind(model)}, and loss_fn is a {_kind(loss_fn)}: did you swap "
                            "model and loss_fn? The order is Trainer(model, loss_fn, "
                            "optimizer, loader)")
        raise TypeError(f"Trainer: model must be an nn.Module, got {_kind(model)}"
                        + _instantiate_hint(model))
    if _is_optimizer(loss_fn):
        hint = (" did you swap loss_fn and optimizer? The order is Trainer(model, loss_fn, "
                "optimizer, loader)" if callable(optimizer) else
                " pass a function (output, target) -> loss, such as F.cross_entropy")
        raise TypeError(f"Trainer: loss_fn is an optimizer ({_kind(loss_fn)});{hint}")
    if not callable(loss_fn) or isinstance(loss_fn, type):
        raise TypeError(f"Trainer: loss_fn must be a function (output, target) -> loss, such "
                        f"as F.cross_entropy, got {_kind(loss_fn)}"
                        + _instantiate_hint(loss_fn))
    if not _is_optimizer(optimizer):
        raise TypeError(f"Trainer: optimizer must be an optimizer of the model's parameters, "
                        f"such as optim.AdamW(model.parameters()), got {_kind(optimizer)}"
                        + _instantiate_hint(optimizer))
    if not _is_iterable(loader):
        raise TypeError(f"Trainer: loader must be iterable, yielding batches (inputs..., "
                        f"target), such as a DataLoader, got {_kind(loader)}")


def check_options(*, schedule: Any, clip_norm: Any, eval_loader: Any, keep_last: Any,
                  checkpoint_dir: Any, scaler: Any, callback: Any, progress: Any) -> None:
    """The keyword arguments the constructor's own checks do not cover."""
    if schedule is not None and (isinstance(schedule, type)
                                 or not callable(getattr(schedule, "apply", None))):
        raise TypeError(f"Trainer: schedule must be a schedule of optim.lr (such as "
                        f"optim.lr.warmup_cosine(...)) or None, got {_kind(schedule)}"
                        + _instantiate_hint(schedule))
    if clip_norm is not None and (isinstance(clip_norm, bool)
                                  or not isinstance(clip_norm, (int, float))
                                  or not math.isfinite(clip_norm) or clip_norm <= 0):
        raise ValueError(f"Trainer: clip_norm must be a finite number > 0, or None not to "
                         f"clip, got {clip_norm!r}")
    if eval_loader is not None and not _is_iterable(eval_loader):
        raise TypeError(f"Trainer: eval_loader must be iterable, yielding batches (inputs..., "
                        f"target), or None, got {_kind(eval_loader)}")
    if isinstance(keep_last, bool) or not isinstance(keep_last, int) or keep_last < 1:
        raise ValueError(f"Trainer: keep_last must be an integer >= 1, got {keep_last!r}")
    if checkpoint_dir is not None and not isinstance(checkpoint_dir, (str, os.PathLike)):
        raise TypeError(f"Trainer: checkpoint_dir must be a folder path or None, got "
                        f"{_kind(checkpoint_dir)}")
    if scaler is not None and not isinstance(scaler, amp.GradScaler):
        raise TypeError(f"Trainer: scaler must be an amp.GradScaler or None, got "
                        f"{_kind(scaler)}" + _instantiate_hint(scaler))
    if callback is not None and not callable(callback):
        raise TypeError(f"Trainer: callback must be a function (info) -> None or None, got "
                        f"{_kind(callback)}")
    if progress not in (None, True, False):
        raise ValueError(f"Trainer: progress must be None, True or False, got {progress!r}")

