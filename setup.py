"""Build of onemodel's compiled kernels.

The C sources under onemodel/_kernels/csrc are compiled into objects with their instruction-set
flags. A family whose kernels are one body for every path keeps it in ``<family>_paths.c``,
compiled once per path of the target architecture (scalar, then sse2, avx2 and avx512 on
x86-64, neon on aarch64) with ``-DOM_PATH=<path>`` (MSVC: ``/DOM_PATH=<path>``) and that path's
flags, each path's objects in their own build folder (``csrc/path.h`` turns the define into the
path's SIMD header and function names). Any other source is compiled once, and the suffix of
its name picks its flags: the families whose paths are written in each path's intrinsics
(``*_avx2.c`` with AVX2+FMA+F16C, ``*_avx512.c`` with AVX-512 F/BW/VL/DQ, ``*_avx512bf16.c``
with AVX512_BF16 besides, ``*_sse2.c``, ``*_neon.c``; anything else is baseline). Paths the
target architecture (or, for AVX512_BF16, the compiler) lacks are skipped; ``csrc/isa.h``
tells the code which ones were built.
The Cython modules' C and the kernels are linked into one shared object, ``onemodel._kernels._lib``,
that holds every module's init function: the package loads each module from it
(``onemodel/_kernels/__init__.py``), so the library, its selected path and its dispatch tables
exist once.

Every compilation uses contraction off and no fast-math: exact mode depends on it
(docs/spec/engine.md section 4). OpenMP is probed; a compiler without it builds a serial library.
Set ONEMODEL_DEBUG_KERNELS=1 to compile the Cython modules with bounds checks on.
ONEMODEL_OPT_LEVEL=2 builds at -O2 instead of -O3 (GCC/Clang; tools/check_exact_builds.sh
checks that every level gives the same bits).
"""
from __future__ import annotations

import hashlib
import json
import os
import platform
import shutil
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy
from Cython.Build import cythonize
from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).parent
KERNELS = Path("onemodel") / "_kernels"
CSRC = KERNELS / "csrc"
STAMP = "onemodel-kernels.json"  # the settings the library in build/ was built with
SHARED_UTILITY = "onemodel._kernels._cyutility"  # Cython's utility code, shared by the modules

MACHINE = platform.machine().lower()
IS_X86 = MACHINE in ("x86_64", "amd64", "i686", "x86")
IS_ARM64 = MACHINE in ("aarch64", "arm64")

# Per-ISA flags for GCC/Clang and for MSVC. Which ISAs exist on which architecture.
GNU_ISA_FLAGS = {
    "sse2": ["-msse2"],
    "avx2": ["-mavx2", "-mfma", "-mf16c"],
    "avx512": ["-mavx512f", "-mavx512bw", "-mavx512vl", "-mavx512dq", "-mavx2", "-mfma",
               "-mf16c"],
    "neon": [],
}
GNU_ISA_FLAGS["avx512bf16"] = GNU_ISA_FLAGS["avx512"] + ["-mavx512bf16"]
MSVC_ISA_FLAGS = {"sse2": [], "avx2": ["/arch:AVX2"], "avx512": ["/arch:AVX512"],
                  "avx512bf16": ["/arch:AVX512"], "neon": []}
# What the AVX512_BF16 kernel and its packing need of the compiler (GCC 10, Clang 9, recent MSVC).
BF16_PROBE = ("#include <immintrin.h>\n#include <string.h>\n"
              "int main(void) { __m512i w = _mm512_set1_epi32(0x3f803f80); __m512bh h;\n"
              "  memcpy(&h, &w, sizeof h);\n"
              "  __m512 r = _mm512_dpbf16_ps(_mm512_setzero_ps(), h, h);\n"
              "  __m256bh b = _mm512_cvtneps_pbh(r); memcpy(&w, &b, sizeof b);\n"
              "  return _mm512_cvtss_f32(r) == 2.0f ? 0 : 1; }\n")
# MSVC (Visual Studio 2022 or later: csrc/isa.h refuses older ones, whose /fp:precise could
# contract on x64): /fp:precise never fuses a multiply and an add. clang-cl maps /fp:precise to
# contraction *on*, so it also gets the clang option, passed through /clang: (a bare
# -ffp-contract=off is ignored by clang-cl with a warning). /std:c11 for the kernel sources
# only (restrict, _Alignas); the Cython modules keep MSVC's default C mode.
MSVC_BASE = ["/O2", "/fp:precise"]
CLANG_CL_BASE = MSVC_BASE + ["/clang:-ffp-contract=off"]
MSVC_KERNEL_ONLY = ["/std:c11"]


def neon_complete() -> bool:
    """NEON is built once every kernel family written per path (a ``<family>_<isa>.c``) has its
    ``<family>_neon.c``: a dispatch table's NEON entry must name a function (until then aarch64
    runs the scalar path). A ``*_paths.c`` family is compiled for every path."""
    families = {p.stem.rsplit("_", 1)[0] for p in (ROOT / CSRC).glob("*.c")
                if isa_of(p) not in (None, "neon")}
    return all((ROOT / CSRC / f"{f}_neon.c").exists() for f in families)


def isa_of(source: Path) -> str | None:
    stem = source.stem
    for isa in GNU_ISA_FLAGS:
        if stem.endswith("_" + isa):
            return isa
    return None


def is_per_path(source: Path) -> bool:
    """A family's one body for every path, compiled once per path with OM_PATH defined."""
    return source.stem.endswith("_paths")


# The paths of csrc/isa.h besides scalar (AVX512_BF16 is a gemm kernel of the avx512 path).
ISA_PATHS = ("sse2", "avx2", "avx512", "neon")
ISAS_FOR_ARCH = (["sse2", "avx2", "avx512"] if IS_X86 else
                 ["neon"] if IS_ARM64 and neon_complete() else [])
# OpenMP (compile, link) flags, tried in order. Apple's clang has no -fopenmp driver flag: it
# takes the pragmas through the preprocessor and links libomp (Homebrew's, found through
# CPATH/LIBRARY_PATH, see [tool.cibuildwheel.macos]; delocate copies it into the wheel).
OPENMP_FLAGS = {"msvc": [(["/openmp"], [])],
                "gnu": [(["-fopenmp"], ["-fopenmp"]), (["-Xpreprocessor", "-fopenmp"], ["-lomp"])]}


def opt_flag() -> str:
    level = os.environ.get("ONEMODEL_OPT_LEVEL", "3")
    if level not in ("1", "2", "3"):
        raise SystemExit(f"ONEMODEL_OPT_LEVEL must be 1, 2 or 3, not {level!r}")
    return "-O" + level


class BuildExt(build_ext):
    """Compiles the C kernels per ISA with their own flags and the Cython modules' C, and links
    them into one shared object."""

    def build_extensions(self) -> None:
        msvc = self.compiler.compiler_type == "msvc"
        omp_compile, omp_link = self._probe_openmp(msvc) or ([], [])
        self.openmp = bool(omp_compile)
        base = ((CLANG_CL_BASE if self._is_clang_cl() else MSVC_BASE) if msvc else
                [opt_flag(), "-ffp-contract=off", "-fno-fast-math", "-fno-math-errno", "-std=c11"])
        kernel_only = MSVC_KERNEL_ONLY if msvc else []
        macros = [("OM_HAVE_OPENMP", "1" if self.openmp else "0"),
                  ("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")]
        isas = ISAS_FOR_ARCH + (["avx512bf16"] if IS_X86 and self._compiles_bf16(msvc) else [])
        for isa in isas:
            macros.append(("OM_BUILD_" + isa.upper(), "1"))

        def compile_one(job: tuple[Path, str | None]) -> list[str]:
            source, path = job  # path: the one a *_paths.c source is compiled for
            flags, defines, out = [], macros, self.build_temp
            if source.parent == ROOT / CSRC:  # a kernel: C11 and its path's instructions
                isa = path if path is not None else isa_of(source)
                flags = kernel_only + ((MSVC_ISA_FLAGS if msvc else GNU_ISA_FLAGS)[isa]
                                       if isa not in (None, "scalar") else [])
            if path is not None:  # -DOM_PATH=avx2 (MSVC: /DOM_PATH=avx2), a folder per path
                defines, out = macros + [("OM_PATH", path)], os.path.join(out, "path_" + path)
            return self.compiler.compile(
                [str(source.relative_to(ROOT))], output_dir=out, macros=defines,
                include_dirs=[str(CSRC), numpy.get_include()],
                extra_postargs=base + flags + omp_compile,
                depends=[str(p) for p in (ROOT / CSRC).rglob("*.h")])

        (lib,) = self.extensions
        paths = ["scalar"] + [isa for isa in isas if isa in ISA_PATHS]
        kernels = sorted((ROOT / CSRC).glob("*.c"))
        sources = [(ROOT / s, None) for s in lib.module_sources] + [
            (s, None) for s in kernels
            if not is_per_path(s) and (isa_of(s) is None or isa_of(s) in isas)] + [
            (s, path) for s in kernels if is_per_path(s) for path in paths]
        lib.depends = lib.module_sources + [str(p.relative_to(ROOT))
                                            for p in (ROOT / CSRC).rglob("*.[ch]")]
        if self._up_to_date(lib, [self.compiler.compiler_type, getattr(self.compiler,
                                  "compiler_so", None), base, omp_compile, omp_link, macros]):
            # The README's second `pip install .` (the test extra) after its first: pip builds
            # in the clone, whose build/ already holds this library, built by the same
            # compiler with the same flags from the same sources.
            print("onemodel: the kernels in build/ are up to date, not compiling them again",
                  file=sys.stderr)
            return
        # Every object is an independent compiler process: one per core at a time (the build
        # takes half as long on two cores). The object list keeps the sources' order.
        with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
            objects = [obj for objs in pool.map(compile_one, sources) for obj in objs]
        lib.extra_objects = objects
        lib.extra_link_args = omp_link
        self.force = True  # new objects: link them, whatever the library's time
        super().build_extensions()
        Path(self.build_temp, STAMP).write_text(self._stamp)

    def _up_to_date(self, lib: Extension, settings: list) -> bool:
        """Whether the library in build/ was built from these settings and sources: a stamp
        beside it holds the settings, numpy's version, the target and a hash of every source,
        header and this file (by content: Cython rewrites its C, unchanged, whenever numpy's
        .pxd files are newer, which they are in every new build environment)."""
        target = Path(self.get_ext_fullpath(lib.name))
        inputs = sorted(lib.depends) + ["setup.py"]
        hashes = {p: hashlib.sha256((ROOT / p).read_bytes()).hexdigest() for p in inputs}
        self._stamp = json.dumps([settings, numpy.__version__, str(target), hashes],
                                 default=str)
        stamp = Path(self.build_temp, STAMP)
        return (not self.force and target.exists() and stamp.exists() and
                stamp.read_text() == self._stamp)

    def get_export_symbols(self, ext: Extension) -> list[str]:
        """The init function of every module the shared object holds (MSVC exports only these)."""
        return [f"PyInit_{Path(source).stem}" for source in ext.module_sources]

    def _is_clang_cl(self) -> bool:
        """Whether the MSVC-style compiler is clang-cl (its executable, known once initialised)."""
        if not getattr(self.compiler, "initialized", True):
            self.compiler.initialize()
        return "clang-cl" in os.path.basename(str(getattr(self.compiler, "cc", ""))).lower()

    def _compiles_bf16(self, msvc: bool) -> bool:
        """Whether the compiler builds the AVX512_BF16 intrinsics the bf16 kernel uses."""
        tmp = tempfile.mkdtemp()
        try:
            src = os.path.join(tmp, "bf16.c")
            with open(src, "w") as f:
                f.write(BF16_PROBE)
            self.compiler.compile([src], output_dir=tmp,
                                  extra_postargs=(MSVC_ISA_FLAGS if msvc else GNU_ISA_FLAGS)
                                  ["avx512bf16"])
            return True
        except Exception:  # any compiler failure: build without the bf16 kernel
            print("onemodel: the compiler lacks AVX512_BF16, building without its kernel",
                  file=sys.stderr)
            return False
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def _probe_openmp(self, msvc: bool) -> tuple[list[str], list[str]] | None:
        """The first OpenMP (compile, link) flags that build a program, or None."""
        if os.environ.get("ONEMODEL_NO_OPENMP") == "1":
            return None
        tmp = tempfile.mkdtemp()
        try:
            src = os.path.join(tmp, "probe.c")
            with open(src, "w") as f:
                f.write("#include <omp.h>\n"
                        "int main(void){return omp_get_max_threads() > 0 ? 0 : 1;}\n")
            for compile_flags, link_flags in OPENMP_FLAGS["msvc" if msvc else "gnu"]:
                try:
                    objs = self.compiler.compile([src], output_dir=tmp,
                                                 extra_postargs=compile_flags)
                    self.compiler.link_executable(objs, "probe", output_dir=tmp,
                                                  extra_postargs=link_flags)
                    return compile_flags, link_flags
                except Exception:  # any compiler or linker failure: try the next flags
                    continue
            print("onemodel: OpenMP not available, building serial kernels", file=sys.stderr)
            return None
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


def extensions() -> list[Extension]:
    """The one shared object; its sources, the Cython modules' C, BuildExt compiles itself.
    Cython's utility code (typed memoryviews above all: about 1 MB of C a module) is generated
    once, in the module ``_cyutility`` that the others import, rather than in each module: the
    C to compile is halved."""
    pyx = sorted((ROOT / KERNELS).glob("*.pyx"))
    modules = [Extension("onemodel._kernels." + p.stem, [str(p.relative_to(ROOT))]) for p in pyx]
    modules.append(Extension(SHARED_UTILITY, []))
    debug = os.environ.get("ONEMODEL_DEBUG_KERNELS") == "1"
    modules = cythonize(modules, language_level=3, shared_utility_qualified_name=SHARED_UTILITY,
                        compiler_directives={
                            "boundscheck": debug, "wraparound": debug, "initializedcheck": debug,
                            "cdivision": True, "nonecheck": False, "embedsignature": True})
    lib = Extension("onemodel._kernels._lib", sources=[])
    lib.module_sources = [source for module in modules for source in module.sources]
    return [lib]


setup(ext_modules=extensions(), cmdclass={"build_ext": BuildExt})
