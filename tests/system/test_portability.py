"""The C kernels stay buildable by every compiler the wheels use, not only the one here.

MSVC builds the Windows wheels: its C compiler has OpenMP 2.0 (no atomic read/write/capture,
no collapse, an omp for loop's index declared before the pragma: a declaration in the for
statement is error C3015, an unsigned index C3016), no variable-length arrays, no
__attribute__ (but where an #if on __GNUC__/__clang__ hides it) and no aligned_alloc. NEON
builds the aarch64 wheels: every family written per path (a <family>_<isa>.c) needs its
*_neon.c, or setup.py builds aarch64 without NEON at all (a *_paths.c family is compiled for
every path). The checks here read the sources (fast, no compiler
needed); tools/check_aarch64.sh runs the NEON paths under qemu.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

CSRC = Path(__file__).resolve().parents[2] / "onemodel" / "_kernels" / "csrc"
SOURCES = sorted(CSRC.rglob("*.[ch]")) if CSRC.is_dir() else []
pytestmark = pytest.mark.skipif(not SOURCES, reason="kernel sources not next to the tests")

OMP_FOR = re.compile(r"#\s*pragma\s+omp\s+(parallel\s+)?for\b|OM_PRAGMA\(omp\s+(parallel\s+)?for\b"
                     r"|_Pragma\(\"omp\s+(parallel\s+)?for\b")
# A local array whose size names a lowercase identifier (a variable, not a macro constant).
ARRAY_DECL = re.compile(r"^\s*(static\s+)?(const\s+)?(OM_ALIGNED\(\d+\)\s+)?([A-Za-z_]\w*)\s+\**"
                        r"\w+\s*\[([^\]]*)\]")
NOT_TYPES = {"return", "else", "case", "goto", "do", "sizeof"}
DECLARED_INDEX = re.compile(r"^\s*for\s*\(\s*(const\s+)?(unsigned|signed|int|long|short|size_t|"
                            r"u?int\d+_t|ptrdiff_t|ssize_t)\b")


def msvc_problems(text: str) -> list[str]:
    """What MSVC's C compiler would reject in one source file, one line per finding."""
    lines = text.split("\n")
    # Macros that expand to an omp for pragma: a line naming one is a pragma line.
    defines = (re.match(r"\s*#\s*define\s+(\w+)\s+(.*)", text_line) for text_line in lines)
    macros = {m.group(1) for m in defines if m and OMP_FOR.search(m.group(2))}
    found = []
    gnu_guard = []  # per open #if: whether it tests for GCC or Clang
    for i, line in enumerate(lines):
        at = f"line {i + 1}: "
        stripped = line.strip()
        if re.match(r"#\s*if", stripped):
            gnu_guard.append("__GNUC__" in stripped or "__clang__" in stripped)
        elif re.match(r"#\s*endif", stripped) and gnu_guard:
            gnu_guard.pop()
        elif re.match(r"#\s*el", stripped) and gnu_guard:
            gnu_guard[-1] = False
        if re.search(r"#\s*pragma\s+omp\s+atomic\s+(read|write|capture|update)\b", line):
            found.append(at + "omp atomic read/write/capture/update (OpenMP 3.1)")
        if re.search(r"#\s*pragma\s+omp\b.*\bcollapse\s*\(", line):
            found.append(at + "omp collapse (OpenMP 3.0)")
        is_for_pragma = (OMP_FOR.search(line) and not stripped.startswith("#define")) or \
            stripped in macros
        if is_for_pragma and i + 1 < len(lines) and DECLARED_INDEX.match(lines[i + 1]):
            found.append(at + "omp for index declared in the for statement (MSVC C3015)")
        if "__attribute__" in line and not any(gnu_guard):
            found.append(at + "__attribute__ outside an #if on __GNUC__/__clang__ (OM_ALIGNED "
                              "in isa.h)")
        if re.search(r"\b(aligned_alloc|posix_memalign)\s*\(", line):
            found.append(at + "aligned_alloc/posix_memalign (not in the Windows C runtime)")
        if "__builtin_" in line and not any(gnu_guard):
            found.append(at + "__builtin_ outside an #if on __GNUC__/__clang__")
        decl = ARRAY_DECL.match(line)
        size = re.sub(r"sizeof\s*\([^)]*\)|sizeof\s+\w+", "", decl.group(5)) if decl else ""
        if decl and decl.group(4) not in NOT_TYPES and re.search(r"\b[a-z_]\w*", size):
            found.append(at + "variable-length array")
        if "_Pragma(" in line and "#define OM_PRAGMA" not in line:
            found.append(at + "_Pragma (OM_PRAGMA in isa.h)")
    return found


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.relative_to(CSRC).as_posix())
def test_msvc_clean(path):
    problems = msvc_problems(path.read_text())
    assert not problems, f"{path.name}:\n  " + "\n  ".join(problems)


def test_the_checks_find_what_msvc_rejects():
    bad = "\n".join([
        "#define LOOP OM_PRAGMA(omp parallel for schedule(static))",
        "#pragma omp parallel for",
        "for (int64_t i = 0; i < n; i++) {}",
        "LOOP",
        "for (size_t i = 0; i < n; i++) {}",
        "#pragma omp atomic write",
        "float a[4] __attribute__((aligned(64)));",
        "float *p = aligned_alloc(64, 256);",
        "__builtin_prefetch(p);",
        "    float row[n * 2];",
    ])
    assert len(msvc_problems(bad)) == 7
    good = "\n".join([
        "int64_t i;",
        "#pragma omp parallel for",
        "for (i = 0; i < n; i++) {}",
        "#if defined(__GNUC__)",
        "#define PREFETCH(p) __builtin_prefetch(p)",
        "#define OM_TARGET(x) __attribute__((target(x)))",
        "#endif",
        "OM_ALIGNED(64) float a[4];",
        "    float part[BATCH], total = 0.0f;",
        "    return x[i];",
        "    uint8_t q[sizeof(uint64_t)];",
    ])
    assert msvc_problems(good) == []


X86_SUFFIXES = ("_sse2", "_avx2", "_avx512", "_avx512bf16")
FAMILIES = sorted({p.stem.rsplit("_", 1)[0] for p in CSRC.glob("*.c")
                   if p.stem.endswith(X86_SUFFIXES)})


def test_the_families_written_per_path_are_found():
    assert "gemm" in FAMILIES


@pytest.mark.parametrize("path", sorted(CSRC.glob("*.c")), ids=lambda p: p.name)
def test_no_stub_source(path):
    """A body shared by every path is one *_paths.c, compiled per path with OM_PATH defined
    (setup.py), not a stub per path that only includes it."""
    assert len(path.read_text().splitlines()) >= 20, f"{path.name} is a stub"


@pytest.mark.parametrize("family", FAMILIES)
def test_every_family_has_a_neon_file(family):
    neon = CSRC / f"{family}_neon.c"
    assert neon.exists(), f"no {neon.name}: setup.py builds aarch64 without NEON"
    text = neon.read_text()
    assert not re.search(r"_mm\d*_|__m\d+", text), f"x86 intrinsics in {neon.name}"
