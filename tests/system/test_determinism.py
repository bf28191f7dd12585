"""Pinned state hashes of the reference trainings (docs/spec/training.txt section 7,
docs/spec/engine.md section 4).

Each (instruction-set path, thread count) runs in its own process with ONEMODEL_ISA and
ONEMODEL_NUM_THREADS set, trains every reference model for 20 steps and reports the SHA-256 of
the whole training state. Exact mode: every path at every thread count gives the pinned hash.
Fast mode runs the exact kernels today (test_config.py checks it), so these cover it too.
ONEMODEL_WRITE_TESTDATA=1 re-pins the hashes (after a deliberate change of the arithmetic).
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from onemodel import _kernels

# Subprocesses per path and thread count, half a minute or more: `pytest -m "not slow"` leaves
# them out.
pytestmark = pytest.mark.slow

PINS = Path(__file__).resolve().parents[2] / "testdata" / "determinism" / "hashes.json"
MODELS = ("convnet", "transformer")
THREADS = (1, 2, 3, 8)
STEPS = 20


def _hashes(isa: str, threads: int) -> dict:
    env = dict(os.environ, ONEMODEL_ISA=isa, ONEMODEL_NUM_THREADS=str(threads),
               ONEMODEL_MODE="exact")
    out = subprocess.run([sys.executable, "-m", "onemodel.examples.reference", *MODELS],
                         capture_output=True, text=True, env=env, timeout=600,
                         cwd=str(PINS.parent))
    assert out.returncode == 0, f"{isa} at {threads} threads: {out.stderr}"
    return json.loads(out.stdout)


def _first_difference(name: str, isa: str, threads: int) -> str:
    """The first tensor of the state that differs from the scalar path at 1 thread."""
    script = ("import sys, json, hashlib; from onemodel.examples import reference as r; "
              f"s = r.state_after({name!r}, {STEPS}); "
              "print(json.dumps({k: hashlib.sha256(v.tobytes()).hexdigest() "
              "for k, v in s.items()}))")

    def digests(isa_: str, threads_: int) -> dict:
        env = dict(os.environ, ONEMODEL_ISA=isa_, ONEMODEL_NUM_THREADS=str(threads_))
        out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                             env=env, timeout=600, cwd=str(PINS.parent))
        return json.loads(out.stdout)

    ours, reference = digests(isa, threads), digests("scalar", 1)
    for key in reference:
        if ours.get(key) != reference[key]:
            return key
    return "(no tensor differs from the scalar path: the pinned hash itself is stale)"


@pytest.fixture(scope="module")
def pins() -> dict:
    if os.environ.get("ONEMODEL_WRITE_TESTDATA") == "1":
        PINS.parent.mkdir(parents=True, exist_ok=True)
        PINS.write_text(json.dumps(_hashes("scalar", 1), indent=2) + "\n")
    return json.loads(PINS.read_text())


@pytest.mark.parametrize("threads", THREADS)
@pytest.mark.parametrize("isa", _kernels.available_isas())
def test_exact_mode_gives_the_pinned_hashes(pins, isa, threads):
    hashes = _hashes(isa, threads)
    for name in MODELS:
        if hashes[name] != pins[name]:
            pytest.fail(f"exact mode, {name}: ONEMODEL_ISA={isa} at {threads} threads gives "
                        f"{hashes[name]}, pinned {pins[name]}; first differing tensor: "
                        f"{_first_difference(name, isa, threads)}")
