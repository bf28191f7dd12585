"""The C allocator's return of freed memory to the system, held back for training's reuse.

A training step allocates and frees tens of megabytes of arrays (activations, gradients, the
products' outputs). glibc gives a block above its mapping threshold (128 KiB, raised as such
blocks are freed, to 32 MiB at most) a mapping of its own and unmaps it when freed, and gives
the free top of its heap back to the system beyond a trimming threshold: the next step then
takes the same memory from the kernel again, a page fault every 4 KiB (a GPT-style decoder's
step: 10,657 faults, 31 ms of system time). On glibc, onemodel's import sets the mapping
threshold to its 32 MiB maximum and the trimming one to 256 MiB, so blocks up to 32 MiB are
reused from the heap, warm; the process keeps up to 256 MiB it freed for its next allocations
(larger blocks are mapped and unmapped as before). Every allocation in the process gains it,
numpy's and other libraries' alike. ONEMODEL_KEEP_FREED_MEMORY=0 in the environment leaves the
allocator as it was; `onemodel.config()["allocator"]` says which.
"""
from __future__ import annotations

import ctypes
import os
import platform

_M_TRIM_THRESHOLD = -1  # glibc's mallopt parameters (malloc.h)
_M_MMAP_THRESHOLD = -3
MAPPING_THRESHOLD = 32 << 20  # glibc's largest (HEAP_MAX_SIZE / 2 on 64-bit systems)
TRIM_THRESHOLD = 256 << 20

_state = "not changed: not glibc"


def keep_freed_memory() -> str:
    """Sets the thresholds (once, at import) unless the environment says not to; returns what
    config() reports."""
    global _state
    if os.environ.get("ONEMODEL_KEEP_FREED_MEMORY", "1") == "0":
        _state = "not changed: ONEMODEL_KEEP_FREED_MEMORY=0"
    elif platform.system() == "Linux" and platform.libc_ver()[0] == "glibc":
        mallopt = ctypes.CDLL(None).mallopt
        mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
        if mallopt(_M_MMAP_THRESHOLD, MAPPING_THRESHOLD) and mallopt(_M_TRIM_THRESHOLD,
                                                                    TRIM_THRESHOLD):
            _state = (f"glibc: freed memory kept for reuse (blocks up to "
                      f"{MAPPING_THRESHOLD >> 20} MiB from the heap, up to "
                      f"{TRIM_THRESHOLD >> 20} MiB of it kept free)")
        else:
            _state = "not changed: glibc refused the thresholds"
    return _state


def state() -> str:
    return _state
