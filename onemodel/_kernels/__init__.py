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
import warnings
from pathlib import Path
from types import ModuleType
from typing import Optional

ISA_NAMES = ("scalar", "sse2", "avx2", "avx512", "neon")
_MODULE_NAMES = ("_cpu", "_gemm", "_optim", "_reduce", "_conv", "_vmath", "_ctc", "_rnn", "_sr4",
                 "_exact", "_crc", "_dropout", "_direct")


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


def _installed_library() -> Optional[str]:
    """The compiled library of an installed onemodel elsewhere on sys.path whose kernel API (the
    .pyi stubs) is this source tree's: what `python` started in a clone's root finds after `pip
    install .`, since the clone's own onemodel/ shadows the installed one."""
    here = Path(__file__).resolve().parent
    for entry in sys.path:
        folder = Path(entry or ".").resolve() / "onemodel" / "_kernels"
        if folder == here or not folder.is_dir():
            continue
        libraries = [p for s in importlib.machinery.EXTENSION_SUFFIXES
                     for p in folder.glob(f"_lib{s}")]
        stubs = sorted(p.name for p in here.glob("*.pyi"))
        if libraries and all((folder / n).is_file() and
                             (folder / n).read_bytes() == (here / n).read_bytes() for n in stubs):
            return str(libraries[0])
    return None


def _library_path() -> str:
    spec = importlib.util.find_spec(f"{__name__}._lib")
    if spec is not None and spec.origin is not None:
        return spec.origin
    source = Path(__file__).resolve().parent.parent
    installed = _installed_library()
    if installed is None:
        raise ImportError(f"onemodel's compiled kernels are not built in {source}: install the "
                          "package with pip (then run Python from another folder, so that this "
                          "source folder does not shadow the install), or run `python setup.py "
                          "build_ext --inplace` here")
    warnings.warn(f"onemodel is imported from its source folder {source}, which is not built; "
                  f"its kernels are taken from the installed onemodel ({installed}). Run Python "
                  "from another folder to use the installed package itself", stacklevel=2)
    return installed


_library = _library_path()
_load("_cyutility", _library)  # Cython's utility code (memoryviews): the modules import it
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
