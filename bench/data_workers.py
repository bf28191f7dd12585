"""DataLoader worker processes: one epoch over a dataset whose __getitem__ does about 1 ms of
Python work, at num_workers = 0 and 2 (and more given on the command line), batch size 16.

    python bench/data_workers.py [examples=480] [workers...]

Prints seconds per epoch and the speed-up over num_workers=0; the batches are checked equal.
"""
import sys
import time

import numpy as np

from onemodel.utils.data import DataLoader, Dataset


class Busy(Dataset):
    """Example i: a few numbers after ~1 ms of pure-Python arithmetic."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> np.ndarray:
        acc = i
        for k in range(8000):  # about 1 ms of CPU in CPython
            acc = (acc * 31 + k) % 1000003
        return np.array([i, acc], np.int64)


def epoch(n: int, workers: int) -> tuple[float, float, list]:
    """Wall-clock and main-process CPU seconds of one epoch, and its batches."""
    loader = DataLoader(Busy(n), 16, shuffle=True, num_workers=workers)
    start, cpu = time.perf_counter(), time.process_time()
    batches = [b.numpy().tolist() for b in loader]
    return time.perf_counter() - start, time.process_time() - cpu, batches


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 480
    counts = [int(a) for a in sys.argv[2:]] or [2]
    t0, cpu, reference = epoch(n, 0)
    print(f"num_workers=0: {t0:.2f} s per epoch ({cpu / n * 1e3:.2f} ms of CPU per example)")
    for w in counts:
        t, _, batches = epoch(n, w)
        assert batches == reference, "workers changed the batches"
        print(f"num_workers={w}: {t:.2f} s per epoch, speed-up {t0 / t:.2f}x")


if __name__ == "__main__":
    main()
