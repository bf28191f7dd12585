"""onemodel's training step alone and with PyTorch and scikit-learn imported beside it (each
OpenMP user brings its runtime; a wheel vendors its own libgomp), in both orders, at 1 and 2
threads. Each configuration runs in a process of its own, all interleaved over several rounds;
prints the best step time of each and its ratio to onemodel alone (1.00: no slowdown), and the
thread counts each library reports.

Run: python bench/coexist.py [--rounds 3]
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys

STEP = """
import json, os, sys, time
for name in sys.argv[2:]:
    __import__(name)
import numpy as np
import onemodel as om
om.set_num_threads(int(sys.argv[1]))
om.manual_seed(0)
model = om.nn.Sequential(om.nn.Linear(256, 512), om.nn.GELU(), om.nn.Linear(512, 512),
                         om.nn.GELU(), om.nn.Linear(512, 10))
opt = om.optim.AdamW(model.parameters(), lr=1e-3)
x = om.tensor(np.random.default_rng(0).standard_normal((128, 256)).astype(np.float32))
y = om.tensor(np.arange(128) % 10)
best = float("inf")
for _ in range(30):
    t0 = time.perf_counter()
    opt.zero_grad()
    om.nn.functional.cross_entropy(model(x), y).backward()
    opt.step()
    best = min(best, time.perf_counter() - t0)
threads = {"onemodel": om.config()["num_threads"]}
if "torch" in sys.modules:
    threads["torch"] = sys.modules["torch"].get_num_threads()
print(json.dumps({"ms": best * 1e3, "threads": threads}))
"""

CONFIGS = {"onemodel alone": [], "torch, sklearn, then onemodel": ["torch", "sklearn"],
           "onemodel, then torch, sklearn": ["onemodel", "torch", "sklearn"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    rounds = parser.parse_args().rounds
    for threads in (1, 2):
        best: dict[str, float] = {}
        reported: dict[str, dict] = {}
        for _ in range(rounds):
            for name, modules in CONFIGS.items():
                out = subprocess.run([sys.executable, "-c", STEP, str(threads), *modules],
                                     capture_output=True, text=True, check=True)
                result = json.loads(out.stdout)
                best[name] = min(best.get(name, float("inf")), result["ms"])
                reported[name] = result["threads"]
        alone = best["onemodel alone"]
        print(f"{threads} thread(s): MLP step 256-512-512-10, batch 128, AdamW")
        for name in CONFIGS:
            print(f"  {name:<32} {best[name]:7.2f} ms  x{best[name] / alone:5.2f}  "
                  f"threads {reported[name]}")


if __name__ == "__main__":
    main()
