"""Python overhead of small-tensor ops: onemodel against PyTorch, at 1 and 2 threads.

On tensors of a few elements the arithmetic is nothing; what a call costs is the Python and
C-API work around the kernel (argument checks, dispatch, allocation, graph recording). Each op
runs in both engines in the same process, inputs not requiring gradients (the "+grad" rows
record a graph node, with inputs that do). Prints the best time per call in microseconds and
onemodel / torch (below 1: onemodel is cheaper).

The machine may be shared, so timings are the best of many repeats, and `--instructions` also
counts instructions per call under callgrind, which load does not disturb: each op runs n and
then 2n times between marker calls (os.getppid) at which callgrind dumps its counters, and
the difference divided by n is the cost of one call. (Valgrind runs one thread at a time, so
at 2 threads the count includes whatever idle OpenMP workers spin through: torch's softmax
shows that.)

Run: python bench/overhead.py [--quick] [--instructions]
"""
from __future__ import annotations

import argparse
import glob
import os
import re
import subprocess
import sys
import tempfile
import timeit

import numpy as np
import torch

import onemodel as om
from onemodel import functional as F


def cases():
    """(name, onemodel call, torch call) for each measured op."""
    rng = np.random.default_rng(0)

    def pair(*shape, grad=False):
        a = rng.standard_normal(shape, dtype=np.float32)
        return (om.tensor(a, requires_grad=grad),
                torch.tensor(a, requires_grad=grad))

    a, at = pair(4)
    b, bt = pair(4)
    yield "add (4,)+(4,)", lambda: a + b, lambda: at + bt
    ga, gat = pair(4, grad=True)
    gb, gbt = pair(4, grad=True)
    yield "add (4,)+(4,) +grad", lambda: ga + gb, lambda: gat + gbt
    yield "mul (4,)*2.0", lambda: a * 2.0, lambda: at * 2.0
    v, vt = pair(16)
    yield "relu (16,)", lambda: F.relu(v), lambda: torch.relu(vt)
    yield "exp (16,)", lambda: F.exp(v), lambda: torch.exp(vt)
    gv, gvt = pair(16, grad=True)
    yield "exp (16,) +grad", lambda: F.exp(gv), lambda: torch.exp(gvt)
    s, st = pair(4, 8)
    yield "sum (4,8) dim=1", lambda: s.sum(1), lambda: st.sum(1)
    yield "sum (4,8) all", lambda: s.sum(), lambda: st.sum()
    x, xt = pair(8, 16)
    yield "softmax (8,16) dim=-1", lambda: F.softmax(x, -1), lambda: torch.softmax(xt, -1)
    m, mt = pair(4, 4)
    n, nt = pair(4, 4)
    yield "matmul (4,4)@(4,4)", lambda: m @ n, lambda: mt @ nt
    li, lit = pair(2, 8)
    w, wt = pair(4, 8)
    bias, biast = pair(4)
    tl = torch.nn.functional.linear
    yield "linear (2,8)->(2,4)", lambda: F.linear(li, w, bias), lambda: tl(lit, wt, biast)
    gw, gwt = pair(4, 8, grad=True)
    gbias, gbiast = pair(4, grad=True)
    yield ("linear (2,8)->(2,4) +grad", lambda: F.linear(li, gw, gbias),
           lambda: tl(lit, gwt, gbiast))


def set_threads(n: int) -> None:
    om.set_num_threads(n)
    torch.set_num_threads(n)


def best_us(fn, number: int, repeat: int) -> float:
    fn()
    return min(timeit.repeat(fn, number=number, repeat=repeat)) / number * 1e6


def timing_table(quick: bool) -> None:
    number, repeat = (200, 15) if quick else (1000, 40)
    print("best time per call, us")
    print(f"{'op':<28}{'thr':>4}{'onemodel':>10}{'torch':>9}{'om/torch':>10}")
    for threads in (1, 2):
        set_threads(threads)
        for name, om_fn, torch_fn in cases():
            # Interleaved repeats, so a burst of load hits both engines alike.
            t_om, t_torch = float("inf"), float("inf")
            for _ in range(3):
                t_om = min(t_om, best_us(om_fn, number, repeat // 3))
                t_torch = min(t_torch, best_us(torch_fn, number, repeat // 3))
            print(f"{name:<28}{threads:>4}{t_om:>10.2f}{t_torch:>9.2f}{t_om / t_torch:>10.2f}")


def _marker() -> None:
    os.getppid()  # callgrind dumps its counters on entering os_getppid


def counted_child(n: int) -> None:
    """Under callgrind: for each thread count, op and engine, n calls then 2n calls, each
    between markers; an empty lambda first, whose cost is the loop's own."""
    for threads in (1, 2):
        set_threads(threads)
        for name, om_fn, torch_fn in [("empty", lambda: None, lambda: None)] + list(cases()):
            for fn in (om_fn, torch_fn):
                for _ in range(10):
                    fn()
                for reps in (n, 2 * n):
                    _marker()
                    for _ in range(reps):
                        fn()
                _marker()


def instruction_table(n: int) -> None:
    names = [c[0] for c in cases()]
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "cg.out")
        env = dict(os.environ, PYTHONHASHSEED="0")
        subprocess.run(["valgrind", "--tool=callgrind", "--dump-before=os_getppid",
                        f"--callgrind-out-file={out}", sys.executable, __file__,
                        "--child", str(n)], check=True, env=env,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        # Dumps are numbered in order; the one at exit has no number.
        paths = sorted(glob.glob(out + ".*"), key=lambda p: int(p.rsplit(".", 1)[1])) + [out]
        totals = []
        for path in paths:
            with open(path) as f:
                totals.append(int(re.search(r"^totals:\s+(\d+)", f.read(), re.M).group(1)))
    # Dump 1 ends at the first marker; then each (thread count, op, engine) gives: n calls,
    # 2n calls, and the warm-up of the next one.
    per_call = iter([(totals[2 + 3 * i] - totals[1 + 3 * i]) / n
                     for i in range((len(totals) - 1) // 3)])
    print(f"\ninstructions per call (callgrind, loop cost subtracted), n = {n}")
    print(f"{'op':<28}{'thr':>4}{'onemodel':>10}{'torch':>9}{'om/torch':>10}")
    for threads in (1, 2):
        loop_om, loop_torch = next(per_call), next(per_call)  # the empty lambdas
        for name in names:
            i_om, i_torch = next(per_call) - loop_om, next(per_call) - loop_torch
            print(f"{name:<28}{threads:>4}{i_om:>10.0f}{i_torch:>9.0f}{i_om / i_torch:>10.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats")
    parser.add_argument("--instructions", action="store_true",
                        help="also count instructions per call under callgrind (slow)")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        counted_child(args.child)
        return
    print(f"onemodel {om.config()}\ntorch {torch.__version__}\n")
    timing_table(args.quick)
    if args.instructions:
        instruction_table(50 if args.quick else 200)


if __name__ == "__main__":
    main()
