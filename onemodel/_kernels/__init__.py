"""The compiled kernels and the choice of instruction-set path.

Each Cython module links its own copy of the C objects, so each holds its own selected path;
`select_isa` sets it in all of them and remembers it (`selected_isa`). The path is chosen once
at import (`onemodel._config`).
"""
from __future__ import annotations

import importlib
from types import ModuleType

ISA_NAMES = ("scalar", "sse2", "avx2", "avx512", "neon")
# Every kernel module; each defines set_isa(int).
_MODULE_NAMES = ("_cpu", "_gemm", "_optim", "_reduce", "_conv", "_vmath", "_ctc", "_rnn", "_sr4",
                "_exact")
_modules: list[ModuleType] = [importlib.import_module(f"{__name__}.{n}") for n in _MODULE_NAMES]
_cpu = _modules[0]
_selected = ISA_NAMES[0]  # the C default until the first select_isa


def available_isas() -> list[str]:
    """Paths this build has and this CPU runs, lowest first."""
    return [name for i, name in enumerate(ISA_NAMES) if _cpu.isa_available(i)]


def select_isa(name: str) -> None:
    if name not in ISA_NAMES:
        raise ValueError(f"unknown instruction-set path {name!r}; known: {', '.join(ISA_NAMES)}")
    if name not in available_isas():
        raise RuntimeError(f"instruction-set path {name!r} is not available on this CPU "
                           f"(available: {', '.join(available_isas())})")
    global _selected
    index = ISA_NAMES.index(name)
    for module in _modules:
        module.set_isa(index)
    _selected = name


def selected_isa() -> str:
    """The path the last select_isa chose: the one the kernels run now."""
    return _selected
