"""Tensors printed as PyTorch prints them, and torch.set_printoptions.

PyTorch's rules: a float tensor whose finite nonzero values are all integers prints them with a
trailing dot (`1.`); otherwise `precision` decimals (4), switching to scientific notation when
the largest and smallest magnitudes are more than 1000 apart, the largest is over 1e8 or the
smallest under 1e-4. Every element is padded to the widest one; rows wrap at `linewidth`; over
`threshold` elements, only `edgeitems` at each end of every dimension are shown.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np


@dataclass
class _Options:
    precision: int = 4
    threshold: float = 1000
    edgeitems: int = 3
    linewidth: int = 80
    sci_mode: Optional[bool] = None


_PROFILES = {"default": _Options(), "short": _Options(precision=2, edgeitems=2),
             "full": _Options(threshold=math.inf)}
_options = _Options()


def set_printoptions(precision: Optional[int] = None, threshold: Optional[float] = None,
                     edgeitems: Optional[int] = None, linewidth: Optional[int] = None,
                     profile: Optional[str] = None, sci_mode: Optional[bool] = None) -> None:
    """torch.set_printoptions: a profile ("default", "short", "full") first, then each option
    given; sci_mode=None lets the values choose."""
    global _options
    if profile is not None:
        if profile not in _PROFILES:
            raise ValueError(f"set_printoptions: unknown profile {profile!r}; known: "
                             f"{', '.join(_PROFILES)}")
        _options = _Options(**vars(_PROFILES[profile]))
    for name, value in (("precision", precision), ("threshold", threshold),
                        ("edgeitems", edgeitems), ("linewidth", linewidth)):
        if value is not None:
            setattr(_options, name, value)
    _options.sci_mode = sci_mode


class _Formatter:
    """How every element of one tensor is written, and the width they share."""

    def __init__(self, values: np.ndarray) -> None:
        self.floating = values.dtype.kind == "f"
        self.int_mode, self.sci_mode = True, False
        p = _options.precision
        if not self.floating:
            self.width = max((len(self._plain(v)) for v in values.flat), default=1)
            return
        finite = values[np.isfinite(values) & (values != 0)].astype(np.float64)
        magnitudes = np.abs(finite)
        self.int_mode = bool(np.all(finite == np.ceil(finite)))
        if finite.size:
            big, small = magnitudes.max(), magnitudes.min()
            self.sci_mode = bool(big / small > 1000 or big > 1e8 or
                                 (not self.int_mode and small < 1e-4))
        if _options.sci_mode is not None:
            self.sci_mode = _options.sci_mode
        spec = f".{p}e" if self.sci_mode else ".0f" if self.int_mode else f".{p}f"
        extra = 1 if self.int_mode and not self.sci_mode else 0  # the trailing dot
        # Only finite nonzero values set the width (torch's rule: nan and inf may stick out).
        self.width = max((len(format(v, spec)) + extra for v in finite), default=1)

    @staticmethod
    def _plain(v: Any) -> str:
        return "True" if v is np.True_ else "False" if v is np.False_ else \
            str(v.item() if hasattr(v, "item") else v)

    def format(self, v: Any) -> str:
        if not self.floating:
            text = self._plain(v)
        elif not np.isfinite(v):
            text = "nan" if np.isnan(v) else ("inf" if v > 0 else "-inf")
        elif self.sci_mode:
            text = format(float(v), f".{_options.precision}e")
        elif self.int_mode:
            text = format(float(v), ".0f") + "."
        else:
            text = format(float(v), f".{_options.precision}f")
        return text.rjust(self.width)


def _vector(values: np.ndarray, indent: int, summarize: bool, fmt: _Formatter) -> str:
    per_line = max(1, math.floor((_options.linewidth - indent) / (fmt.width + 2)))
    edge = _options.edgeitems
    if summarize and values.size > 2 * edge:
        items = ([fmt.format(v) for v in values[:edge]] + [" ..."] +
                 [fmt.format(v) for v in values[-edge:]])
    else:
        items = [fmt.format(v) for v in values]
    lines = [", ".join(items[i:i + per_line]) for i in range(0, len(items), per_line)]
    return "[" + (",\n" + " " * (indent + 1)).join(lines) + "]"


def _nested(values: np.ndarray, indent: int, summarize: bool, fmt: _Formatter) -> str:
    if values.ndim == 0:
        return fmt.format(values[()])
    if values.ndim == 1:
        return _vector(values, indent, summarize, fmt)
    edge = _options.edgeitems
    if summarize and values.shape[0] > 2 * edge:
        rows = ([_nested(r, indent + 1, summarize, fmt) for r in values[:edge]] + ["..."] +
                [_nested(r, indent + 1, summarize, fmt) for r in values[-edge:]])
    else:
        rows = [_nested(r, indent + 1, summarize, fmt) for r in values]
    return "[" + ("," + "\n" * (values.ndim - 1) + " " * (indent + 1)).join(rows) + "]"


def _shown(values: np.ndarray, summarize: bool) -> np.ndarray:
    """The elements a summarised print shows (for the shared width), else all of them."""
    edge = _options.edgeitems
    if not summarize or values.ndim == 0:
        return values
    for axis in range(values.ndim):
        if values.shape[axis] > 2 * edge:
            idx = np.r_[0:edge, values.shape[axis] - edge:values.shape[axis]]
            values = np.take(values, idx, axis=axis)
    return values


def _camel(op: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in op.split("_"))


def tensor_repr(data: np.ndarray, grad_op: Optional[str], requires_grad: bool) -> str:
    """torch's repr of a tensor holding `data`: values, then dtype (float32, int64 and bool
    are not named), then grad_fn or requires_grad."""
    prefix = "tensor("
    summarize = data.size > _options.threshold
    if data.size == 0:
        body = "[]"
    else:
        body = _nested(data, len(prefix), summarize, _Formatter(_shown(data, summarize)))
    suffixes = []
    if data.size == 0 and data.shape != (0,):
        suffixes.append(f"size={tuple(data.shape)}")
    if data.dtype not in (np.float32, np.int64, np.bool_):
        suffixes.append(f"dtype=onemodel.{data.dtype}")
    if grad_op is not None:
        suffixes.append(f"grad_fn=<{_camel(grad_op)}Backward0>")
    elif requires_grad:
        suffixes.append("requires_grad=True")
    return prefix + body + "".join(", " + s for s in suffixes) + ")"
