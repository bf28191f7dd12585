"""A rank killed by a signal under mpiexec: the job's output names the rank and the signal, once
(the ranks the launcher kills afterwards are not reported), and nothing is said of a job that
ends well or is ended by an exception."""
import os
import signal
import subprocess
import sys
import textwrap

import pytest
from test_distributed import SETUP, _mpirun, needs_mpi

from onemodel import _rank_watch

KILLED = SETUP + textwrap.dedent("""
    import os, sys
    from onemodel import distributed
    from onemodel.train import DataParallel, Trainer
    victim, number = int(sys.argv[1]), int(sys.argv[2])
    model, opt, loader = setup()
    def kill(info):
        if distributed.rank() == victim and info["step"] == 2:
            os.kill(os.getpid(), number)
    Trainer(model, F.cross_entropy, opt, loader, strategy=DataParallel(3),
            callbacks=[kill]).fit(1000)
""")


@needs_mpi
@pytest.mark.slow
@pytest.mark.parametrize("victim,number", [(1, signal.SIGKILL), (0, signal.SIGKILL),
                                           (2, signal.SIGTERM), (1, signal.SIGSEGV)])
def test_a_rank_killed_by_a_signal_is_named_with_the_signal(tmp_path, victim, number):
    pytest.importorskip("mpi4py")
    named = []
    # A rank killed by SIGKILL leaves no words: which death came first is judged by when the
    # watchers woke, which a loaded machine can blur (a few tens of ms); so up to 3 runs.
    for _ in range(3 if number == signal.SIGKILL else 1):
        run = _mpirun(tmp_path, 3, KILLED, str(victim), str(int(number)), timeout=120)
        assert run.returncode != 0
        said = [line for line in run.stderr.splitlines()
                if line.startswith("onemodel.distributed")]
        assert len(said) == 1, run.stderr[-3000:]  # the first death only
        named.append(said[0])
        if said[0].startswith(f"onemodel.distributed: rank {victim} of 3 (pid "):
            break
    assert named[-1].startswith(f"onemodel.distributed: rank {victim} of 3 (pid "), named
    # The status is read from the zombie; if the launcher reaped it first, SIGKILL is named
    # as the likely cause.
    assert f"{signal.Signals(number).name} ({int(number)})" in named[-1] or (
        number == signal.SIGKILL and "probably SIGKILL" in named[-1])
    if number == signal.SIGSEGV:
        assert "Fatal Python error: Segmentation fault" in run.stderr  # the dump follows


@needs_mpi
@pytest.mark.slow
def test_a_job_that_ends_well_says_nothing_and_leaves_no_watcher(tmp_path):
    pytest.importorskip("mpi4py")
    script = SETUP + textwrap.dedent("""
        from onemodel.train import DataParallel, Trainer
        model, opt, loader = setup()
        Trainer(model, F.cross_entropy, opt, loader, strategy=DataParallel(2),
                callbacks=[]).fit(2)
    """)
    run = _mpirun(tmp_path, 2, script, timeout=120)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "onemodel.distributed" not in run.stderr


def _watch(marker, said, status, rank=1):
    """Runs the watcher on a pipe that carries `said`, its rank's status faked."""
    code = (f"import sys; sys.argv = ['w', '{rank}', '4', '999999999', {str(marker)!r}]\n"
            f"import _rank_watch as w\nw._status = lambda pid: {status!r}\nw.main()")
    return subprocess.run([sys.executable, "-c", code], input=said, capture_output=True,
                          env=dict(os.environ, PYTHONPATH=os.path.dirname(_rank_watch.__file__)),
                          timeout=60)


def test_the_watcher_is_silent_after_bye_and_names_the_signal_otherwise(tmp_path):
    assert _watch(tmp_path / "a", b"bye", 9).stderr == b""
    assert not (tmp_path / "a").exists()
    told = _watch(tmp_path / "b", b"", int(signal.SIGBUS))
    assert told.stderr == (f"onemodel.distributed: rank 1 of 4 (pid 999999999) was killed by "
                           f"signal SIGBUS ({int(signal.SIGBUS)})\n").encode()
    # A later death of the job (the launcher's clean-up) is not reported, nor one after a rank
    # ended the job itself (it made the marker).
    assert _watch(tmp_path / "b", b"", 9, rank=2).stderr == b""
    assert _watch(tmp_path / "b", b"signal 15\n", 9, rank=3).stderr != b""  # last words first
    (tmp_path / "g").touch()
    assert _watch(tmp_path / "g", b"", 9).stderr == b""
    assert b"exited with code 3 without finishing" in _watch(tmp_path / "c", b"", 3 << 8).stderr
    # The rank's own last words come first: a caught signal, faulthandler's dump of a crash.
    assert b"killed by signal SIGTERM (15)" in _watch(tmp_path / "d", b"signal 15\n",
                                                      None).stderr
    dump = b"Fatal Python error: Segmentation fault\n\nCurrent thread 0x1:\n  File \"x.py\"\n"
    told = _watch(tmp_path / "e", dump, None).stderr
    assert told.startswith(b"onemodel.distributed: rank 1 of 4 (pid 999999999) was killed by "
                           b"signal SIGSEGV (11)\n") and told.endswith(dump)
    assert b"ended without a word" in _watch(tmp_path / "f", b"", None).stderr
