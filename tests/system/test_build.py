"""The built package next to numpy: import order and two threading runtimes in one process.

onemodel's kernels bring an OpenMP runtime (libgomp, or libomp vendored into a macOS wheel);
numpy brings OpenBLAS with its own threads. Two runtimes in one process are a known crash
source, and which one loads first depends on the import order. Each order runs in a fresh
process: a threaded onemodel product while another Python thread runs numpy's BLAS, and the
product must have the same bits in both orders and at one thread.
"""
import subprocess
import sys
import textwrap

import pytest

# Runs in a child process; FIRST chooses whose threading runtime is loaded first.
CHILD = textwrap.dedent("""
    import hashlib, importlib.util, os, sys, threading

    if FIRST == "onemodel":
        # Load the kernels' shared library, and with it its OpenMP runtime, before numpy
        # (importing the package itself would import numpy first).
        import ctypes
        kernels = os.path.join(os.path.dirname(importlib.util.find_spec("onemodel").origin),
                               "_kernels")
        lib = next(f for f in sorted(os.listdir(kernels))
                   if f.startswith("_lib.") and f.endswith((".so", ".pyd")))
        ctypes.CDLL(os.path.join(kernels, lib))
    import numpy as np
    a = np.random.default_rng(0).standard_normal((400, 400))
    warm = a @ a  # OpenBLAS starts its threads
    import onemodel as om
    import onemodel.functional as F

    def blas():
        for _ in range(20):
            np.dot(a, a)

    x = om.tensor(np.random.default_rng(1).standard_normal((256, 384)).astype(np.float32))
    w = om.tensor(np.random.default_rng(2).standard_normal((384, 320)).astype(np.float32))
    digests = []
    for threads in (THREADS, 1):
        om.set_num_threads(threads)
        worker = threading.Thread(target=blas)
        worker.start()
        for _ in range(10):
            y = F.matmul(x, w)
        worker.join()
        digests.append(hashlib.sha256(y.numpy().tobytes()).hexdigest())
    assert np.allclose(a @ a, warm)
    print(digests[0], digests[1])
""")


def _run(first: str, threads: int) -> list[str]:
    code = f"FIRST = {first!r}\nTHREADS = {threads}\n" + CHILD
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, (
        f"{first} loaded first, {threads} threads: exit {out.returncode}\n{out.stderr}")
    return out.stdout.split()


@pytest.mark.slow
def test_import_order_does_not_matter():
    numpy_first = _run("numpy", 3)
    onemodel_first = _run("onemodel", 3)
    assert numpy_first[0] == numpy_first[1], "3 threads differ from 1 (numpy loaded first)"
    assert onemodel_first == numpy_first, "the product depends on which runtime loaded first"
