"""Ctrl-C in an example: one line naming the last checkpoint and the exact --resume command,
no traceback, exit code 130; and that command continues the run."""
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from onemodel.examples._runs import interrupted_line

ROOT = Path(__file__).resolve().parents[2]
# Windows has no SIGINT to send to a child process (Ctrl-C reaches a console group instead)
pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")

# Small runs that write a checkpoint early and have far to go after it.
JOBS = {
    "digits": ["--epochs", "6", "--batch-size", "32"],
    "chargpt": ["--steps", "400", "--eval-every", "2", "--width", "32", "--layers", "1",
                "--block", "16", "--batch-size", "4"],
    "crnn": ["--steps", "400", "--eval-every", "2", "--batch-size", "2", "--val-lines", "2"],
}


def _env():
    return {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}


def _interrupt_after_first_checkpoint(job, out):
    command = [sys.executable, "-m", f"onemodel.examples.{job}", "--out", str(out),
               "--threads", "1", *JOBS[job]]
    if job == "digits":
        pytest.importorskip("sklearn")
    # Ctrl-C's default meaning in the child, also where this suite runs as a background job
    # (whose children inherit SIGINT ignored)
    run = subprocess.Popen(command, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True,
                           preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    folder = out / "1"
    deadline = time.monotonic() + 300
    while not (folder.is_dir() and any(f.startswith("step-") for f in os.listdir(folder))):
        assert run.poll() is None, run.communicate()
        assert time.monotonic() < deadline, "no checkpoint within 300 s"
        time.sleep(0.05)
    run.send_signal(signal.SIGINT)
    _, err = run.communicate(timeout=120)
    return run.returncode, err, folder


@pytest.mark.parametrize("job", sorted(JOBS))
def test_ctrl_c_names_the_checkpoint_and_the_resume_command(tmp_path, job):
    code, err, folder = _interrupt_after_first_checkpoint(job, tmp_path)
    assert code == 130, err
    assert "Traceback" not in err, err
    last = err.strip().splitlines()[-1]
    checkpoints = sorted(f for f in os.listdir(folder) if f.startswith("step-"))
    tool = f"onemodel-{job}"
    assert last.startswith(f"{tool}: stopped at step "), last
    assert f"the last checkpoint is {folder / checkpoints[-1]};" in last
    assert last.endswith(f"continue with: {tool} --resume {shlex.quote(str(folder))}")


@pytest.mark.slow
def test_the_printed_command_continues_the_run(tmp_path):
    code, err, folder = _interrupt_after_first_checkpoint("digits", tmp_path)
    assert code == 130
    command = shlex.split(err.strip().split("continue with: ")[-1])
    assert command[0] == "onemodel-digits"
    done = subprocess.run([sys.executable, "-m", "onemodel.examples.digits", *command[1:]],
                          env=_env(), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert f"continuing the run in {folder} from step " in done.stderr
    assert (folder / "result.json").is_file()


def test_an_interrupt_before_any_checkpoint_says_there_is_nothing_to_resume():
    line = interrupted_line("onemodel-crnn", "runs/crnn/2", 7, None)
    assert line == ("onemodel-crnn: stopped at step 7, before the first checkpoint; nothing to "
                    "resume (run onemodel-crnn again to start over)")
    assert interrupted_line("onemodel-crnn", "my runs/2", 9, "my runs/2/step-00000008.ckpt") \
        .endswith("continue with: onemodel-crnn --resume 'my runs/2'")
