"""Exhaustive accuracy sweep of the exact-mode transcendentals (onemodel/_kernels/csrc/vmath.h).

For each op, every one of the 2^32 float32 bit patterns goes through the selected ISA path's
kernel; the error is measured in ulp against a float64 libm reference, and every output is
compared bit for bit with the scalar reference function. Prints one row per op: max ulp, the
first input reaching it, and the count of outputs that differ from scalar (must be 0).

    python tools/ulp_sweep.py [--ops exp,log] [--isa avx2] [--threads N] [--step 2**28]
"""
from __future__ import annotations

import argparse
import os
import struct
import sys
import time

from onemodel._kernels import _vmath, available_isas, select_isa

FULL = 1 << 32


def as_float(bits: int) -> float:
    return struct.unpack("<f", struct.pack("<I", bits))[0]


def sweep(op: str, threads: int, step: int) -> tuple[float, int, int]:
    worst, worst_bits, mismatches = 0.0, 0, 0
    for start in range(0, FULL, step):
        ulp, bits, diff = _vmath.ulp_sweep(op, start, min(start + step, FULL), threads)
        mismatches += diff
        if ulp > worst:
            worst, worst_bits = ulp, bits
    return worst, worst_bits, mismatches


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", default=",".join(_vmath.OPS))
    parser.add_argument("--isa", default=available_isas()[-1], choices=available_isas())
    parser.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    parser.add_argument("--step", type=lambda s: int(eval(s, {})), default=1 << 28,
                        help="patterns per call (progress granularity)")
    args = parser.parse_args()
    select_isa(args.isa)
    print(f"path {args.isa}, {args.threads} threads, all 2^32 float32 inputs")
    print(f"{'op':<10} {'max ulp':>8}  {'worst input':<26} {'!= scalar':>9}  {'time':>6}")
    failed = False
    for op in args.ops.split(","):
        t0 = time.perf_counter()
        ulp, bits, diff = sweep(op, args.threads, args.step)
        failed |= diff != 0
        print(f"{op:<10} {ulp:8.3f}  {bits:#010x} ({as_float(bits):<12.6g}) {diff:9d}  "
              f"{time.perf_counter() - t0:5.0f}s", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
