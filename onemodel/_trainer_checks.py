"""The Trainer's argument checks: each names the argument and says what to do, and all run
before the Trainer changes anything (no distributed.init, no loader.shard, no folder made)."""
from __future__ import annotations

import math
from typing import Any


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


def check_options(*, schedule: Any, clip_norm: Any) -> None:
    """The keyword arguments that are no option group (those check themselves)."""
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


def check_callbacks(callbacks: list, kind: type) -> None:
    """Each a `kind` (Callback) instance or a function f(info)."""
    for c in callbacks:
        if not isinstance(c, kind) and (isinstance(c, type) or not callable(c)):
            raise TypeError(f"Trainer: callbacks must be Callback instances or functions "
                            f"(info) -> None, got {_kind(c)}" + _instantiate_hint(c))
