"""Python started in a clone's root imports the clone's unbuilt onemodel/, which shadows the
installed package: the kernels then come from the install when their API (the .pyi stubs) is
the same, with a warning saying so, and otherwise the ImportError names the fix."""
import os
import pathlib
import shutil
import subprocess
import sys

import onemodel

INSTALLED = pathlib.Path(onemodel.__file__).parent
FIRST_LOOK = ("import onemodel as om, onemodel.functional as F\n"
              "m = om.nn.Linear(3, 1)\n"
              "loss = F.mse_loss(m(om.tensor([[1.0, -2.0, 3.0]])), om.tensor([[1.0]]))\n"
              "loss.backward(); print(om.__file__); print(m.weight.grad.shape)\n")


def _unbuilt_clone(tmp_path: pathlib.Path) -> pathlib.Path:
    """A folder holding the package's Python sources and stubs, without its compiled library."""
    shutil.copytree(INSTALLED, tmp_path / "onemodel",
                    ignore=shutil.ignore_patterns("*.so", "*.pyd", "__pycache__"))
    return tmp_path


def _run_in(folder: pathlib.Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(INSTALLED.parent))
    return subprocess.run([sys.executable, "-c", FIRST_LOOK], cwd=folder, env=env,
                          capture_output=True, text=True, timeout=120)


def test_the_install_kernels_serve_an_unbuilt_source_folder(tmp_path):
    clone = _unbuilt_clone(tmp_path)
    run = _run_in(clone)
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines() == [str(clone / "onemodel" / "__init__.py"), "(1, 3)"]
    assert "imported from its source folder" in run.stderr
    assert "Run Python from another folder" in run.stderr


def test_kernels_of_another_api_are_refused_with_the_fix(tmp_path):
    clone = _unbuilt_clone(tmp_path)
    stub = clone / "onemodel" / "_kernels" / "_gemm.pyi"
    stub.write_text(stub.read_text() + "\ndef a_kernel_the_install_lacks() -> None: ...\n")
    run = _run_in(clone)
    assert run.returncode != 0
    assert "compiled kernels are not built in" in run.stderr
    assert "run Python from another folder" in run.stderr
