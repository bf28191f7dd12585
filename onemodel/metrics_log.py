"""The run folder's metrics.jsonl: one JSON object a line, appended by the Trainer (rank 0).

Append-only and self-healing. A crash can leave the last line torn (cut short, a tail of NUL
bytes after a power cut, bytes that are no UTF-8); `truncate_after`, which the Trainer calls
when fit() starts, drops every line that is not a JSON object with an integer "step" (with a
warning naming the file and the lines) and every row of a step after the one the run continues
from, so the rows it appends next are never duplicates. That rewrite is atomic: the kept lines,
byte for byte, go to a temporary in the same folder, which is fsynced and renamed over the log
(and the folder fsynced; checkpoint._write_small_file); a kill during it leaves the old log or
the new one, whole. `sync`
makes the rows written so far durable; the Trainer calls it before each checkpoint, so a
checkpoint never survives a power cut that its rows do not.
"""
from __future__ import annotations

import json
import math
import os
import warnings
from typing import IO, Any, Optional

from .checkpoint import _write_small_file

METRICS_LOG = "metrics.jsonl"


def _finite_or_none(value: Any) -> Any:
    return None if isinstance(value, float) and not math.isfinite(value) else value


def _step_of(line: bytes) -> Optional[int]:
    """The step of a well-formed row, None for a torn or undecodable line."""
    try:
        row = json.loads(line.decode("utf-8"))
    except ValueError:  # JSONDecodeError and UnicodeDecodeError alike
        return None
    step = row.get("step") if isinstance(row, dict) else None
    return step if isinstance(step, int) and not isinstance(step, bool) else None


class MetricsLog:
    """The run folder's metrics.jsonl (see the module notes): appended one row at a time."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._file: Optional[IO[str]] = None

    def write(self, row: dict) -> None:
        if self._file is None:
            self._file = open(self.path, "a", encoding="utf-8")
        self._file.write(json.dumps({k: _finite_or_none(v) for k, v in row.items()}) + "\n")
        self._file.flush()

    def sync(self) -> None:
        """The rows written so far on disk (fsync)."""
        if self._file is not None:
            os.fsync(self._file.fileno())

    def truncate_after(self, step: int) -> None:
        """Drops the rows of steps after `step` (a resumed run redoes them) and every torn or
        undecodable line, warning of those; rewrites the log only if a line goes."""
        self.close()
        try:
            with open(self.path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            return
        lines = data.splitlines(keepends=True)
        kept, torn = [], []
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            found = _step_of(line)
            if found is None:
                torn.append(number)
            elif found <= step:
                kept.append(line if line.endswith(b"\n") else line + b"\n")
        if torn:
            shown = ", ".join(map(str, torn[:5])) + (f" and {len(torn) - 5} more"
                                                     if len(torn) > 5 else "")
            warnings.warn(f"Trainer: {self.path}: dropping torn or undecodable "
                          f"line{'s' if len(torn) > 1 else ''} {shown} (of {len(lines)})",
                          RuntimeWarning, stacklevel=3)
        if b"".join(kept) != data:
            _write_small_file(self.path, b"".join(kept))

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
