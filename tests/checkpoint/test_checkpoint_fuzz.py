"""The libFuzzer run of tools/fuzz_checkpoint.py in miniature: 30 seconds of coverage-guided
inputs through the atheris harness (the long runs are not part of the suite). Atheris has
wheels for Linux x86-64 only; elsewhere the plain-Python smoke in test_checkpoint_hostile.py
runs the same harness."""
from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

TOOL = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir,
                    "tools",
                    "fuzz_checkpoint.py")


@pytest.mark.slow
def test_atheris_run_finds_nothing(tmp_path):
    pytest.importorskip("atheris", reason="atheris ships for Linux x86-64 only")
    corpus = tmp_path / "corpus"
    out = subprocess.run([sys.executable, TOOL, str(corpus), "-max_total_time=30", "-timeout=1",
                          "-rss_limit_mb=1024", f"-artifact_prefix={tmp_path}/"],
                         capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stderr[-3000:]
    done = re.search(r"Done (\d+) runs in \d+ second", out.stderr)
    assert done and int(done.group(1)) >= 3000, out.stderr[-3000:]
    # Seeded with the valid checkpoints of the four targets and the hostile files.
    assert len(os.listdir(corpus)) > 40
    assert not [p for p in os.listdir(tmp_path) if p.startswith(("crash-", "timeout-", "oom-"))]
