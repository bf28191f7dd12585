"""Checkpoint save and load: onemodel's version 2 (CRC-32C) against its version 1, torch.save/
torch.load and numpy's raw tofile/fromfile of the same bytes, at 1 and 2 threads.

The state: a ~100 MB model (six 2048x2048 Linear layers) and its AdamW state (two moments), so
about 300 MB per file. Every save ends with an fsync of the file (onemodel's also renames and
fsyncs the folder), so all three pay for the disk alike; loads read files the page cache holds.
Version 1 is written by the same atomic path as save (only the version differs), so v2 / v1 is
the checksum's cost (taken piece by piece as the file is written and as it is read). The
CRC-32C alone over the state's arrays is timed too, on the path this CPU runs. Loads go into
place for onemodel (into the model's and optimizer's own arrays, after reading the whole file
and checking it); torch.load
and np.fromfile allocate new tensors. Peak extra memory during a load is measured with
tracemalloc (numpy's allocations are traced) and, for onemodel, as ru_maxrss growth in a fresh
process; it is one copy of the file (a load reads it whole before any check).

Run: python bench/checkpoint.py [--quick] [--folder DIR]
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import tracemalloc

import numpy as np
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from _timing import best_seconds  # noqa: E402

import onemodel as om  # noqa: E402
from onemodel import checkpoint, nn  # noqa: E402
from onemodel._kernels import _crc  # noqa: E402
from onemodel.optim import AdamW  # noqa: E402


def make_state(width: int, layers: int) -> tuple[nn.Module, AdamW]:
    g = om.Generator(0)
    model = nn.Sequential(*[nn.Linear(width, width, generator=g) for _ in range(layers)])
    opt = AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
    rng = np.random.default_rng(0)
    for arr in opt.state_tensors().values():  # moments as after training, not zeros
        arr[...] = rng.standard_normal(arr.shape, dtype=np.float32)
    opt.step_count = 1000
    return model, opt


def arrays_of(model: nn.Module, opt: AdamW) -> list[np.ndarray]:
    return [t._data for _, t in model._named_state()] + list(opt.state_tensors().values())


def fsynced(path: str, write) -> None:
    with open(path, "wb") as f:
        write(f)
        f.flush()
        os.fsync(f.fileno())


def load_peak(load) -> int:
    """Peak bytes traced during `load` (numpy's and Python's allocations)."""
    tracemalloc.start()
    tracemalloc.reset_peak()
    load()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak


RSS_CHILD = """
import resource, sys
sys.path.insert(0, sys.argv[1]); sys.path.insert(0, sys.argv[1] + "/bench")
from checkpoint import make_state
from onemodel import checkpoint
model, opt = make_state(int(sys.argv[3]), int(sys.argv[4]))
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
checkpoint.load(sys.argv[2], model, opt)
print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) * 1024)
"""


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="a 12 MB model, one run each")
    parser.add_argument("--folder", default=None, help="where the files go (default: a "
                        "temporary folder on the same disk as /tmp)")
    args = parser.parse_args()
    width, layers, runs = (512, 3, 1) if args.quick else (2048, 6, 3)
    folder = args.folder or tempfile.mkdtemp(prefix="ckpt-bench-")
    model, opt = make_state(width, layers)
    arrays = arrays_of(model, opt)
    named = {f"t{i}": torch.from_numpy(a) for i, a in enumerate(arrays)}
    total = sum(a.nbytes for a in arrays)
    largest = max(a.nbytes for a in arrays)
    ours_path, v1_path, torch_path, raw_path = (os.path.join(folder, n) for n in
                                                ("a.ckpt", "a1.ckpt", "a.pt", "a.raw"))
    views = [memoryview(a.reshape(-1)).cast("B") for a in arrays]

    def save_v1():
        checkpoint._atomic_write(v1_path, checkpoint._chunks(model, opt, None, 1))

    def raw_save():
        fsynced(raw_path, lambda f: [a.tofile(f) for a in arrays])

    def raw_load():
        with open(raw_path, "rb") as f:
            return [np.fromfile(f, a.dtype, a.size) for a in arrays]

    jobs = {
        "save": [lambda: checkpoint.save(ours_path, model, opt),
                 save_v1,
                 lambda: fsynced(torch_path, lambda f: torch.save(named, f)), raw_save],
        "load": [lambda: checkpoint.load(ours_path, model, opt),
                 lambda: checkpoint.load(v1_path, model, opt),
                 lambda: torch.load(torch_path, weights_only=True), raw_load],
    }
    print(f"state: {total / 1e6:.1f} MB in {len(arrays)} tensors (model "
          f"{sum(t._data.nbytes for _, t in model._named_state()) / 1e6:.1f} MB + AdamW), "
          f"largest tensor {largest / 1e6:.1f} MB; files in {folder}; "
          f"load average {os.getloadavg()[0]:.2f}")
    crc = best_seconds([lambda: checkpoint._checksum(views)], min_runs=5)[0]
    print(f"CRC-32C alone over the state ({_crc.available_paths()[-1]} path): {crc:.3f} s, "
          f"{total / crc / 1e9:.2f} GB/s")
    print(f"{'threads':>7} {'op':>5} {'v2 s':>7} {'v1 s':>7} {'torch s':>8} {'raw s':>7} "
          f"{'v2/v1':>6} {'vs torch':>9} {'vs raw':>7} {'v2 GB/s':>8}")
    for threads in (1, 2):
        torch.set_num_threads(threads)
        om.set_num_threads(threads)
        for op, fns in jobs.items():
            ours, v1, theirs, raw = best_seconds(fns, min_runs=runs)
            print(f"{threads:>7} {op:>5} {ours:>7.3f} {v1:>7.3f} {theirs:>8.3f} {raw:>7.3f} "
                  f"{ours / v1:>6.3f} {theirs / ours:>8.2f}x {ours / raw:>6.2f}x "
                  f"{total / ours / 1e9:>8.2f}")
    print("(v2/v1: the checksum's cost, the target is <= 1.10; vs torch: torch time / onemodel "
          "time, > 1 is faster; vs raw: onemodel time / raw time)")

    peaks = {"onemodel load": load_peak(lambda: checkpoint.load(ours_path, model, opt)),
             "numpy fromfile": load_peak(raw_load)}
    child = subprocess.run([sys.executable, "-c", RSS_CHILD, ROOT, ours_path, str(width),
                            str(layers)], capture_output=True, text=True, check=True)
    peaks["onemodel load, ru_maxrss growth (fresh process)"] = int(child.stdout.split()[-1])
    for name, peak in peaks.items():
        print(f"peak extra memory, {name}: {peak / 1e6:.2f} MB "
              f"({peak / largest:.3f} x the largest tensor)")
    for path in (ours_path, v1_path, torch_path, raw_path):
        os.unlink(path)
    if args.folder is None:
        os.rmdir(folder)


if __name__ == "__main__":
    main()
