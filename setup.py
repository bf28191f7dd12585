"""Build of onemodel's compiled kernels.

Every C source under onemodel/_kernels/csrc is compiled once into an object; the suffix of its
name picks its instruction-set flags (``*_avx2.c`` with AVX2+FMA+F16C, ``*_avx512.c`` with
AVX-512 F/BW/VL/DQ, ``*_sse2.c``, ``*_neon.c``; anything else is baseline). Files of an ISA the
target architecture lacks are skipped; ``csrc/isa.h`` tells the code which ones were built.
Each Cython module links all objects, so the dispatch tables live next to the kernels.

Every compilation uses contraction off and no fast-math: exact mode depends on it
(spec/engine.md section 4). OpenMP is probed; a compiler without it builds a serial library.
Set ONEMODEL_DEBUG_KERNELS=1 to compile the Cython modules with bounds checks on.
ONEMODEL_OPT_LEVEL=2 builds at -O2 instead of -O3 (GCC/Clang; tools/check_exact_builds.sh
checks that every level gives the same bits).
"""
from __future__ import annotations

import os
import platform
import shutil
import sys
import tempfile
from pathlib import Path

import numpy
from Cython.Build import cythonize
from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).parent
KERNELS = Path("onemodel") / "_kernels"
CSRC = KERNELS / "csrc"

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
MSVC_ISA_FLAGS = {"sse2": [], "avx2": ["/arch:AVX2"], "avx512": ["/arch:AVX512"], "neon": []}
ISAS_FOR_ARCH = ["sse2", "avx2", "avx512"] if IS_X86 else (["neon"] if IS_ARM64 else [])


def isa_of(source: Path) -> str | None:
    stem = source.stem
    for isa in GNU_ISA_FLAGS:
        if stem.endswith("_" + isa):
            return isa
    return None


def opt_flag() -> str:
    level = os.environ.get("ONEMODEL_OPT_LEVEL", "3")
    if level not in ("1", "2", "3"):
        raise SystemExit(f"ONEMODEL_OPT_LEVEL must be 1, 2 or 3, not {level!r}")
    return "-O" + level


class BuildExt(build_ext):
    """Compiles the C kernels per ISA with their own flags, then the Cython modules."""

    def build_extensions(self) -> None:
        msvc = self.compiler.compiler_type == "msvc"
        self.openmp = self._probe_openmp(msvc)
        base = (["/O2", "/fp:precise"] if msvc else
                [opt_flag(), "-ffp-contract=off", "-fno-fast-math", "-fno-math-errno", "-std=c11"])
        macros = [("OM_HAVE_OPENMP", "1" if self.openmp else "0"),
                  ("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")]
        for isa in ISAS_FOR_ARCH:
            macros.append(("OM_BUILD_" + isa.upper(), "1"))
        omp_compile = (["/openmp"] if msvc else ["-fopenmp"]) if self.openmp else []
        omp_link = ([] if msvc else ["-fopenmp"]) if self.openmp else []

        objects: list[str] = []
        for source in sorted((ROOT / CSRC).glob("*.c")):
            isa = isa_of(source)
            if isa is not None and isa not in ISAS_FOR_ARCH:
                continue
            flags = (MSVC_ISA_FLAGS if msvc else GNU_ISA_FLAGS).get(isa, []) if isa else []
            objects += self.compiler.compile(
                [str(source.relative_to(ROOT))], output_dir=self.build_temp, macros=macros,
                include_dirs=[str(CSRC)], extra_postargs=base + flags + omp_compile,
                depends=[str(p) for p in (ROOT / CSRC).glob("*.h")])
        kernel_sources = [str(p.relative_to(ROOT)) for p in (ROOT / CSRC).glob("*.[ch]")]
        for ext in self.extensions:
            ext.extra_objects = objects
            ext.depends = kernel_sources  # relink every module when a kernel changes
            ext.define_macros = macros
            ext.include_dirs = [str(CSRC), numpy.get_include()]
            ext.extra_compile_args = base + omp_compile
            ext.extra_link_args = omp_link
        super().build_extensions()

    def _probe_openmp(self, msvc: bool) -> bool:
        if os.environ.get("ONEMODEL_NO_OPENMP") == "1":
            return False
        flag = "/openmp" if msvc else "-fopenmp"
        tmp = tempfile.mkdtemp()
        try:
            src = os.path.join(tmp, "probe.c")
            with open(src, "w") as f:
                f.write("#include <omp.h>\nint main(void){return omp_get_max_threads() > 0 ? 0 : 1;}\n")
            objs = self.compiler.compile([src], output_dir=tmp, extra_postargs=[flag])
            self.compiler.link_executable(objs, "probe", output_dir=tmp,
                                          extra_postargs=[] if msvc else [flag])
            return True
        except Exception:  # any compiler or linker failure means: no OpenMP here
            print("onemodel: OpenMP not available, building serial kernels", file=sys.stderr)
            return False
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


def extensions() -> list[Extension]:
    pyx = sorted((ROOT / KERNELS).glob("*.pyx"))
    exts = [Extension("onemodel._kernels." + p.stem, [str(p.relative_to(ROOT))]) for p in pyx]
    debug = os.environ.get("ONEMODEL_DEBUG_KERNELS") == "1"
    return cythonize(exts, language_level=3, compiler_directives={
        "boundscheck": debug, "wraparound": debug, "initializedcheck": debug,
        "cdivision": True, "nonecheck": False, "embedsignature": True})


setup(ext_modules=extensions(), cmdclass={"build_ext": BuildExt})
