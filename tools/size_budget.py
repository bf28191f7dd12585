"""The code's size, file by file (in the manner of tinygrad's sz.py): lines of code, not
counting blank lines, comments and docstrings. Every Python, Cython and C file of the package
(the examples aside) has a cap of FILE_CAP lines; a file may hold more only where CONTRIBUTING.md's
table "Files over the cap" gives it a cap of its own and the reason. So the budget says where
the code grows, not only how much: a file that outgrows its cap is split by concern, or its
row is raised in review with the reason. Fails (exit 1) when a file is over its cap, and when a
row of the table names a file that no longer needs it (under the default cap) or is gone.

Run: python tools/size_budget.py   (from the clone's root; .ci/run calls it)
"""
from __future__ import annotations

import io
import pathlib
import re
import sys
import tokenize

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "onemodel"
CONTRIBUTING = ROOT / "CONTRIBUTING.md"
FILE_CAP = 450
# A row of CONTRIBUTING.md's table: | `onemodel/path` | cap | why |
ROW = re.compile(r"^\|\s*`(onemodel/[^`]+)`\s*\|\s*([0-9,]+)\s*\|")
SKIP = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT,
        tokenize.ENDMARKER, tokenize.ENCODING}


def python_lines(text: str) -> int:
    """Lines holding a token other than comments and docstrings (a statement that is only a
    string)."""
    lines: set[int] = set()
    statement: list[tokenize.TokenInfo] = []
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type in SKIP:
            if tok.type == tokenize.NEWLINE and statement:
                if not all(t.type == tokenize.STRING for t in statement):
                    for t in statement:
                        lines.update(range(t.start[0], t.end[0] + 1))
                statement = []
            continue
        statement.append(tok)
    return len(lines)


def cython_lines(text: str) -> int:
    """Non-blank lines that are not comments, nor inside a docstring (a triple-quoted string
    that opens a line): Python's tokenizer does not read Cython."""
    text = re.sub(r'^\s*("""|\'\'\').*?\1', lambda m: "\n" * m.group().count("\n"), text,
                  flags=re.S | re.M)
    return sum(1 for line in text.splitlines()
               if line.strip() and not line.lstrip().startswith("#"))


def c_lines(text: str) -> int:
    """Non-blank lines left once /* */ and // comments are removed."""
    text = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group().count("\n"), text, flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    return sum(1 for line in text.splitlines() if line.strip())


COUNTERS = {".py": python_lines, ".pyx": cython_lines, ".pxd": cython_lines, ".c": c_lines,
            ".h": c_lines}


def measured_files() -> list[pathlib.Path]:
    return sorted(p for p in PACKAGE.rglob("*") if p.suffix in COUNTERS and
                  "examples" not in p.parts and
                  (p.suffix not in (".c", ".h") or "csrc" in p.parts))  # Cython's output aside


def exceptions() -> dict[str, int]:
    """The caps CONTRIBUTING.md's table gives, by path from the clone's root."""
    rows = (ROW.match(line) for line in CONTRIBUTING.read_text(encoding="utf-8").splitlines())
    return {m.group(1): int(m.group(2).replace(",", "")) for m in rows if m}


def main() -> int:
    caps = exceptions()
    problems = []
    for path in measured_files():
        name = path.relative_to(ROOT).as_posix()
        count = COUNTERS[path.suffix](path.read_text(encoding="utf-8"))
        cap = caps.pop(name, None)
        if cap is None and count > FILE_CAP:
            problems.append(f"{name}: {count} lines of code, over the cap of {FILE_CAP}: split "
                            "it by concern, or give it a row in CONTRIBUTING.md with the reason")
        elif cap is not None and count > cap:
            problems.append(f"{name}: {count} lines of code, over its cap of {cap} "
                            "(CONTRIBUTING.md, Files over the cap)")
        elif cap is not None and count <= FILE_CAP:
            problems.append(f"{name}: {count} lines of code, under the default cap: remove its "
                            "row from CONTRIBUTING.md")
    problems += [f"{name}: named in CONTRIBUTING.md's table but not found" for name in caps]
    print("\n".join(problems) or f"every file within its cap ({FILE_CAP} lines of code, or its "
                                   "row in CONTRIBUTING.md)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
