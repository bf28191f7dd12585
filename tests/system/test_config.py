"""ISA dispatch, threads and modes (docs/spec/engine.md sections 3 and 4), in subprocesses."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import onemodel as om
from onemodel import _config, _kernels
from onemodel.examples import reference

REPORT = "import json, onemodel as om; print(json.dumps(om.config()))"


def _run(code: str, **env: str) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("ONEMODEL_")}
    environment.update(env)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=environment, timeout=120, cwd=os.path.dirname(__file__))


def test_config_reports_every_key():
    config = om.config()
    assert set(config) == {"isa", "isas_available", "bf16_dot", "kernel_choices", "mode",
                           "fast_kernels", "num_threads", "openmp", "compiler", "version",
                           "allocator"}
    assert config["isa"] in config["isas_available"]
    assert config["isas_available"][0] == "scalar"
    assert config["version"] == om.__version__
    assert isinstance(config["openmp"], bool) and config["compiler"]


def test_default_is_the_best_path_the_cpu_has():
    config = json.loads(_run(REPORT).stdout)
    assert config["isa"] == config["isas_available"][-1]
    assert config["mode"] == "exact"


@pytest.mark.parametrize("isa", _kernels.available_isas())
def test_onemodel_isa_selects_a_lower_path(isa):
    out = _run(REPORT + "; print(om._kernels.selected_isa())", ONEMODEL_ISA=isa)
    assert out.returncode == 0, out.stderr
    config, selected = out.stdout.splitlines()
    assert json.loads(config)["isa"] == selected == isa


def test_asking_for_a_missing_path_is_a_clear_error_at_import():
    missing = [isa for isa in _kernels.ISA_NAMES if isa not in _kernels.available_isas()]
    assert missing, "every known path is available: nothing to ask for"
    out = _run(REPORT, ONEMODEL_ISA=missing[0])
    assert out.returncode != 0
    assert f"ONEMODEL_ISA='{missing[0]}'" in out.stderr and "lacks that path" in out.stderr


def test_an_unknown_path_name_is_rejected():
    out = _run(REPORT, ONEMODEL_ISA="avx1024")
    assert out.returncode != 0 and "unknown path" in out.stderr


def test_thread_count_from_the_environment():
    assert json.loads(_run(REPORT, ONEMODEL_NUM_THREADS="3").stdout)["num_threads"] == 3
    for bad in ("0", "-2", "two"):
        out = _run(REPORT, ONEMODEL_NUM_THREADS=bad)
        assert out.returncode != 0 and "ONEMODEL_NUM_THREADS" in out.stderr


def test_mode_from_the_environment():
    assert json.loads(_run(REPORT, ONEMODEL_MODE="fast").stdout)["mode"] == "fast"
    out = _run(REPORT, ONEMODEL_MODE="quick")
    assert out.returncode != 0 and "ONEMODEL_MODE" in out.stderr


def test_set_num_threads_validates_and_restores():
    before = om.get_num_threads()
    try:
        om.set_num_threads(5)
        assert om.get_num_threads() == 5 and om.config()["num_threads"] == 5
        for bad in (0, -1, 1.5, True, "2"):
            with pytest.raises(ValueError, match="set_num_threads"):
                om.set_num_threads(bad)
        assert om.get_num_threads() == 5
    finally:
        om.set_num_threads(before)


def test_mode_context_manager_restores_the_previous_mode():
    assert om.get_mode() == "exact"
    with om.mode("fast"):
        assert om.get_mode() == "fast"
        with pytest.raises(ValueError, match="set_mode"):
            om.set_mode("loose")
        assert om.get_mode() == "fast"
    assert om.get_mode() == "exact"
    with pytest.raises(RuntimeError):
        with om.mode("fast"):
            raise RuntimeError("inside")
    assert om.get_mode() == "exact"


def test_fast_mode_runs_the_exact_kernels():
    """No kernel has a fast variant (config() says so), so fast mode keeps its promise, the same
    bits at every thread count, with exact mode's bits: the pinned hashes cover both."""
    assert om.config()["fast_kernels"] == []
    exact = reference.state_hash_after("convnet", 2)
    threads = om.get_num_threads()
    try:
        with om.mode("fast"):
            for n in (1, 3):
                om.set_num_threads(n)
                assert reference.state_hash_after("convnet", 2) == exact, f"{n} threads"
    finally:
        om.set_num_threads(threads)


def test_selected_isa_is_the_path_last_chosen():
    previous = _kernels.selected_isa()
    assert previous == om.config()["isa"]  # nothing changed it since the import
    try:
        for isa in _kernels.available_isas():
            _kernels.select_isa(isa)
            assert _kernels.selected_isa() == isa
        with pytest.raises(ValueError):
            _kernels.select_isa("mmx")
        assert _kernels.selected_isa() == _kernels.available_isas()[-1]
    finally:
        _kernels.select_isa(previous)


# Families without an SSE2 translation run their scalar code on the SSE2 path (csrc/isa.h).
SCALAR_ON_SSE2 = {"exact", "sr4"}


def test_every_family_runs_the_selected_path():
    """One library, one selected path: after select_isa every kernel family's dispatch reaches
    the code compiled for that path, and config() reports it (it reads the library's state)."""
    previous = _kernels.selected_isa()
    try:
        for isa in _kernels.available_isas():
            _kernels.select_isa(isa)
            index = _kernels.ISA_NAMES.index(isa)
            ran = _kernels._cpu.kernel_paths()
            assert sorted(ran) == ["conv", "ctc", "exact", "gemm", "optim", "reduce", "rnn",
                                   "sr4", "vmath"]
            expected = {family: 0 if isa == "sse2" and family in SCALAR_ON_SSE2 else index
                        for family in ran}
            assert ran == expected, isa
            assert _kernels._cpu.active_isa() == index
            assert om.config()["isa"] == isa and _config.isa() == isa
    finally:
        _kernels.select_isa(previous)
    assert _kernels._cpu.kernel_paths()["gemm"] == _kernels.ISA_NAMES.index(previous)


def test_every_kernel_module_shares_one_library():
    """Every compiled module is loaded from the one shared object, so there is one copy of the
    kernels and of their selected path."""
    files = {getattr(_kernels, name).__file__ for name in _kernels._MODULE_NAMES}
    assert len(files) == 1 and Path(files.pop()).name.startswith("_lib.")
    assert [n for n in _kernels._MODULE_NAMES if hasattr(getattr(_kernels, n), "set_isa")] == [
        "_cpu"]


def test_select_isa_refuses_unknown_and_missing_paths():
    with pytest.raises(ValueError, match="unknown instruction-set path"):
        _kernels.select_isa("mmx")
    missing = [isa for isa in _kernels.ISA_NAMES if isa not in _kernels.available_isas()]
    with pytest.raises(RuntimeError, match="not available"):
        _kernels.select_isa(missing[0])


# Eight 4 MiB arrays made and freed, five times over: the minor page faults of the last four
# rounds. glibc trims the 32 MiB they leave free at the top of its heap unless told to keep it.
FAULTS = """
import json, resource, sys
import numpy as np
import onemodel as om
def round_():
    arrays = [np.ones(1 << 20, np.float32) for _ in range(8)]
    del arrays
round_()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(4):
    round_()
print(json.dumps([om.config()["allocator"],
                  resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before]))
"""


@pytest.mark.skipif(sys.platform != "linux", reason="the thresholds are glibc's (mallopt)")
def test_freed_memory_is_reused_without_page_faults_unless_told_not_to():
    """On glibc, importing onemodel keeps freed memory for reuse: arrays made again take no page
    faults (32 MiB made and freed four times: none), where the allocator left alone gives the
    pages back and takes them again (thousands); config() says which."""
    kept, kept_faults = json.loads(_run(FAULTS).stdout)
    left, left_faults = json.loads(_run(FAULTS, ONEMODEL_KEEP_FREED_MEMORY="0").stdout)
    if not kept.startswith("glibc:"):
        pytest.skip(f"not glibc: {kept}")
    assert kept.startswith("glibc: freed memory kept for reuse")
    assert left == "not changed: ONEMODEL_KEEP_FREED_MEMORY=0"
    assert kept_faults < 200 and left_faults > 4000, (kept_faults, left_faults)
