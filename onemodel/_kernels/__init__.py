"""The compiled kernels and the choice of instruction-set path.

One shared object, `_lib`, holds the C kernels and every Cython module's init function; each
module is loaded from it under its own name, so the library and its selected path exist once.
The path is chosen once at import (`onemodel._config`); `selected_isa` asks the library which
one runs.
"""
from __future__ import annotations

import importlib.machinery
import importlib.util
import sys
from types import ModuleType

ISA_NAMES = ("scalar", "sse2", "avx2", "avx512", "neon")
_MODULE_NAMES = ("_cpu", "_gemm", "_optim", "_reduce", "_conv", "_vmath", "_ctc", "_rnn", "_sr4",
                 "_exact", "_crc", "_dropout")


def _load(name: str, library: str) -> ModuleType:
    """The module `name` of the package, initialised from the shared object `library`."""
    full_name = f"{__name__}.{name}"
    loader = importlib.machinery.ExtensionFileLoader(full_name, library)
    spec = importlib.util.spec_from_file_location(full_name, library, loader=loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[full_name] = module
    loader.exec_module(module)
    return module


def _library_path() -> str:
    spec = importlib.util.find_spec(f"{__name__}._lib")
    if spec is None or spec.origin is None:
        raise ImportError("onemodel's compiled kernels (onemodel._kernels._lib) are not built: "
                          "install the package with pip, or run "
                          "`python setup.py build_ext --inplace` in a source tree")
    return spec.origin


_library = _library_path()
for _name in _MODULE_NAMES:
    globals()[_name] = _load(_name, _library)
_cpu = sys.modules[f"{__name__}._cpu"]


def available_isas() -> list[str]:
    """Paths this build has and this CPU runs, lowest first."""
    return [name for i, name in enumerate(ISA_NAMES) if _cpu.isa_available(i)]


def select_isa(name: str) -> None:
    if name not in ISA_NAMES:
        raise ValueError(f"unknown instruction-set path {name!r}; known: {', '.join(ISA_NAMES)}")
    if name not in available_isas():
        raise RuntimeError(f"instruction-set path {name!r} is not available on this CPU "
                           f"(available: {', '.join(available_isas())})")
    _cpu.set_isa(ISA_NAMES.index(name))


def selected_isa() -> str:
    """The path the kernels run now, as the library reports it."""
    return ISA_NAMES[_cpu.active_isa()]
