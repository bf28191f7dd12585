"""IEEE special values without numpy's floating-point warnings.

In PyTorch, inf - inf, 0 * inf, x / 0 and overflow give NaN and ±inf silently. numpy computes
the same values but also warns (an error under np.seterr or a warnings filter). The ops run
their numpy arithmetic under `quiet`, which turns those warnings off for the call only: the
caller's own numpy settings are untouched.
"""
from __future__ import annotations

import functools
from typing import Any, Callable, TypeVar

import numpy as np

Fn = TypeVar("Fn", bound=Callable[..., Any])


def quiet_per_call(fn: Fn) -> Fn:
    """fn, with numpy's floating-point warnings off while it runs (a new errstate per call:
    before numpy 2 one errstate must not be entered twice, as nested ops would)."""
    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        with np.errstate(all="ignore"):
            return fn(*args, **kwargs)
    return call  # type: ignore[return-value]


# From numpy 2 on, one errstate is a decorator that is safe to nest and to share between
# threads, and costs half as much per call.
quiet: Callable[[Fn], Fn] = (np.errstate(all="ignore")
                             if np.lib.NumpyVersion(np.__version__) >= "2.0.0"
                             else quiet_per_call)
