"""Process-wide settings: instruction-set path, thread count, arithmetic mode.

Read once from the environment at import (ONEMODEL_ISA, ONEMODEL_NUM_THREADS, ONEMODEL_MODE),
then changed through set_num_threads / set_mode / mode.
"""
from __future__ import annotations

import contextlib
import os
from typing import Iterator

from . import _kernels

MODES = ("exact", "fast")
# No kernel reads the mode: fast mode runs the exact kernels, which keeps its promise (the same
# bits at every thread count). The kernels with a fast variant would be listed here, and in
# config(); the one candidate measured, numpy's BLAS for products, is at most 9% faster than the
# exact gemm (bench/gemm.py), so exact mode is within 10% of fast mode and the default
# (docs/spec/engine.md section 4, docs/spec/clarifications.md "Modes").
FAST_KERNELS: tuple[str, ...] = ()
DEFAULT_MODE = "exact"


def _default_threads() -> int:
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


def _env_threads() -> int:
    raw = os.environ.get("ONEMODEL_NUM_THREADS")
    if raw is None or raw == "":
        return _default_threads()
    try:
        n = int(raw)
    except ValueError:
        raise ValueError(f"ONEMODEL_NUM_THREADS={raw!r}: expected a positive integer") from None
    if n < 1:
        raise ValueError(f"ONEMODEL_NUM_THREADS={raw!r}: expected a positive integer")
    return n


def _env_mode() -> str:
    raw = os.environ.get("ONEMODEL_MODE") or DEFAULT_MODE
    if raw not in MODES:
        raise ValueError(f"ONEMODEL_MODE={raw!r}: expected one of {', '.join(MODES)}")
    return raw


def _env_isa() -> str:
    available = _kernels.available_isas()
    raw = os.environ.get("ONEMODEL_ISA")
    if raw is None or raw == "":
        return available[-1]
    if raw not in _kernels.ISA_NAMES:
        raise ValueError(f"ONEMODEL_ISA={raw!r}: unknown path; known: "
                         f"{', '.join(_kernels.ISA_NAMES)}")
    if raw not in available:
        raise RuntimeError(f"ONEMODEL_ISA={raw!r}: this CPU or build lacks that path "
                           f"(available: {', '.join(available)})")
    return raw


_kernels.select_isa(_env_isa())
_num_threads = _env_threads()
_mode = _env_mode()


def isa() -> str:
    """The path the kernels run now (the library's own state, not a copy of it)."""
    return _kernels.selected_isa()


def num_threads() -> int:
    """Threads a kernel may use; kernels read it at every call."""
    return _num_threads


def set_num_threads(n: int) -> None:
    """Sets the number of threads the kernels use, as `torch.set_num_threads`; results do not
    depend on it.

    Parameters
    ----------
    n : int
        A positive count (the default is `ONEMODEL_NUM_THREADS`, else the cores this
        process may use).
    """
    global _num_threads
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"set_num_threads: expected a positive integer, got {n!r}")
    _num_threads = n


def get_num_threads() -> int:
    """The number of threads the kernels use, as `torch.get_num_threads`."""
    return _num_threads


def set_mode(name: str) -> None:
    """Sets the arithmetic mode for what follows.

    Parameters
    ----------
    name : str
        "exact" (the default: the same bits on every machine, instruction set and thread
        count) or "fast" (the same bits at any thread count; may differ between instruction
        sets).
    """
    global _mode
    if name not in MODES:
        raise ValueError(f"set_mode: expected one of {', '.join(MODES)}, got {name!r}")
    _mode = name


def get_mode() -> str:
    """The current arithmetic mode: "exact" or "fast"."""
    return _mode


@contextlib.contextmanager
def mode(name: str) -> Iterator[None]:
    """Runs the block in the given arithmetic mode, then restores the previous one."""
    previous = get_mode()
    set_mode(name)
    try:
        yield
    finally:
        set_mode(previous)


def config() -> dict:
    """What this process runs with, as a dict: the instruction-set path ("isa") and those
    available, whether bfloat16 products use the CPU's dot-product instruction ("bf16_dot") and
    why ("kernel_choices": chosen by measurement, onemodel._kernel_choice), the mode and its fast
    kernels, the thread count, the OpenMP runtime, the compiler, the version, and whether the C
    allocator keeps freed memory for reuse ("allocator", onemodel._memory).
    """
    from . import __version__, _kernel_choice, _memory
    return {
        "isa": isa(),
        "isas_available": _kernels.available_isas(),
        "bf16_dot": isa() == "avx512" and _kernels._gemm.bf16_dot(),
        "kernel_choices": _kernel_choice.reasons(),
        "mode": _mode,
        "fast_kernels": list(FAST_KERNELS),
        "num_threads": _num_threads,
        "openmp": _kernels._cpu.openmp(),
        "compiler": _kernels._cpu.compiler(),
        "version": __version__,
        "allocator": _memory.state(),
    }
