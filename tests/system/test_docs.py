"""The user guide's code runs: every ```python block of docs/index.md and docs/guide/*.md, each
in a fresh process from a temporary folder. A block after a marker runs a second time, and its
last printed word (a state hash) must be the same as alone: `<!-- docs-test: mpiexec -n N -->`
under mpiexec with N processes, `<!-- docs-test: env NAME=value -->` with that variable set."""
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[2] / "docs"
BLOCK = re.compile(r"(?:<!-- docs-test: (mpiexec -n \d+|env \w+=\w+) -->\n)?```python\n(.*?)^```",
                   re.S | re.M)


def _blocks() -> list:
    found = []
    for page in [DOCS / "index.md", *sorted((DOCS / "guide").glob("*.md"))]:
        for k, match in enumerate(BLOCK.finditer(page.read_text(encoding="utf-8"))):
            found.append(pytest.param(match.group(2), match.group(1),
                                      id=f"{page.relative_to(DOCS)}:{k}"))
    return found


BLOCKS = _blocks()


def _run(command: list, folder: Path, **variables: str) -> str:
    # One kernel thread a process: the bits do not depend on it, and the cores are shared.
    env = dict(os.environ, ONEMODEL_NUM_THREADS="1", OMP_NUM_THREADS="1", **variables)
    result = subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True,
                            timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


def _mpiexec():
    local = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    return local if os.path.exists(local) else shutil.which("mpiexec")


def test_the_guide_has_code_in_every_chapter():
    pages = {str(p.id).split(":")[0] for p in BLOCKS}
    chapters = {f"guide/{p.name}" for p in (DOCS / "guide").glob("*.md")}
    assert chapters <= pages, chapters - pages


@pytest.mark.slow
@pytest.mark.parametrize("code, again", BLOCKS)
def test_guide_block_runs(code, again, tmp_path):
    script = tmp_path / "train.py"
    script.write_text(code, encoding="utf-8")
    alone = _run([sys.executable, str(script)], tmp_path)
    if again is None:
        return
    if again.startswith("env "):
        name, value = again[len("env "):].split("=")
        other = _run([sys.executable, str(script)], tmp_path, **{name: value})
    else:
        if _mpiexec() is None or sys.platform != "linux":
            pytest.skip("no mpiexec")
        workers = again.split()[-1]
        other = _run([_mpiexec(), "-n", workers, sys.executable, str(script)], tmp_path)
    assert other.split()[-1] == alone.split()[-1]
