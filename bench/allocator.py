"""A onemodel training step with the C allocator keeping freed memory (the default on glibc) and
left alone (ONEMODEL_KEEP_FREED_MEMORY=0), each in a fresh process without torch, as a user's
program runs: time a step, minor page faults and system time a step.

The model is the GPT-style decoder of the speed issue (4 blocks of width 128, 4 heads, context
64, batch 16, vocabulary 103; onemodel.examples.models.build_gpt) with AdamW. The other
benchmarks run torch in the same process, whose own frees raise glibc's thresholds and hide
the faults from onemodel's steps there.
Run: python bench/allocator.py [--threads N] [--steps N]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

STEP = r"""
import json, resource, sys, time
import numpy as np
import onemodel as om
import onemodel.functional as F
from onemodel import nn, optim
from onemodel.examples import models
threads, steps = int(sys.argv[1]), int(sys.argv[2])
om.set_num_threads(threads)
rng = np.random.default_rng(0)
batch, context, vocab = 16, 64, 103
tokens = rng.integers(0, vocab, (batch, context + 1))
model = models.build_gpt(nn, F, vocab, block=context, layers=4, width=128)
optimizer = optim.AdamW(model.parameters(), lr=1e-4)
ids, positions = om.from_numpy(tokens[:, :-1]), om.from_numpy(np.arange(context))
targets = tokens[:, 1:].ravel()
def step():
    optimizer.zero_grad()
    logits = model(ids, positions)
    F.cross_entropy(logits.reshape(-1, vocab), targets).backward()
    optimizer.step()
for _ in range(3):
    step()
times = []
before = resource.getrusage(resource.RUSAGE_SELF)
for _ in range(steps):
    start = time.perf_counter()
    step()
    times.append(time.perf_counter() - start)
after = resource.getrusage(resource.RUSAGE_SELF)
faults = (after.ru_minflt - before.ru_minflt) / steps
print(json.dumps([om.config()["allocator"], min(times), faults,
                  (after.ru_stime - before.ru_stime) / steps]))
"""


def run(keep: bool, threads: int, steps: int) -> list:
    env = dict(os.environ, ONEMODEL_KEEP_FREED_MEMORY="1" if keep else "0",
               OMP_NUM_THREADS=str(threads))
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [root, env.get("PYTHONPATH")]))
    out = subprocess.run([sys.executable, "-c", STEP, str(threads), str(steps)], env=env,
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args()
    print(f"GPT 4 x 128, context 64, batch 16, AdamW, {args.threads} thread(s): best step, "
          f"minor page faults and system time a step")
    for keep in (True, False, True, False):  # in turns
        allocator, best, faults, system = run(keep, args.threads, args.steps)
        print(f"{allocator:<100} {best * 1e3:7.1f} ms {faults:8.0f} faults {system * 1e3:6.2f} "
              f"ms system")


if __name__ == "__main__":
    main()
