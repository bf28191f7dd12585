"""onemodel-run: torchrun's role for onemodel, `onemodel-run -n 4 train.py args...` runs
`mpiexec -n 4 <this python> train.py args...`. Each process finds its rank in the MPI world
(init_process_group sets RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR... from it)."""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from typing import Optional, Sequence


def find_mpiexec() -> Optional[str]:
    """mpiexec next to this Python (a virtual environment's mpich), else on the PATH."""
    beside = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    return beside if os.path.exists(beside) else shutil.which("mpiexec")


def command(argv: Sequence[str]) -> list[str]:
    """The mpiexec command line for onemodel-run's arguments."""
    parser = argparse.ArgumentParser(
        prog="onemodel-run", description="Runs a training script on N processes under mpiexec.")
    parser.add_argument("-n", "--nproc-per-node", "--nproc_per_node", dest="n", type=int,
                        default=1, help="the number of processes (default 1)")
    parser.add_argument("script", help="the Python script to run")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="the script's arguments")
    options = parser.parse_args(list(argv))
    if options.n < 1:
        parser.error(f"-n must be at least 1, got {options.n}")
    mpiexec = find_mpiexec()
    if mpiexec is None:
        parser.exit(2, "onemodel-run: mpiexec not found next to the Python interpreter nor on "
                       "the PATH; install MPI (pip install mpi4py mpich) and run again\n")
    return [mpiexec, "-n", str(options.n), sys.executable, options.script, *options.args]


def console(argv: Optional[Sequence[str]] = None) -> None:
    """The console script: runs the command and exits with its status."""
    argv = sys.argv[1:] if argv is None else argv
    raise SystemExit(subprocess.call(command(argv)))


if __name__ == "__main__":
    console()
