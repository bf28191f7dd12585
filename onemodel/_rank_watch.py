"""Watches one MPI rank and names it, and the signal, when it dies without a word.

A rank killed by a signal (SIGKILL above all) prints nothing, and the launcher's report names a
process id, not the rank. distributed.init() starts this script (standalone: it imports nothing
of onemodel) in a session of its own, so the launcher's clean-up of the job does not kill it,
with the read end of a pipe whose write end only the rank holds. The rank writes "bye" before it
exits or ends the job on purpose; an end of file without it is a death. Its cause: a caught
signal the rank wrote ("signal N") before dying of it, or faulthandler's dump of a crash (which
follows the message), else the exit status read from /proc while the rank is a zombie (until
its parent reaps it; if that is too late, SIGKILL, the one signal no process can catch). It
prints

    onemodel.distributed: rank R of W (pid P) was killed by signal SIGKILL

on the rank's stderr and exits. The launcher then kills the other ranks; so that only the first
death is reported, each watcher records its death (whether the rank left last words, and when)
in the job's folder MARKER.deaths, waits GRACE seconds for the others' records, and reports
only if it comes first (last words first, then the earliest); it stays silent if MARKER exists,
which a rank ending the job itself creates (distributed.abort). The records and the marker are
removed a few seconds later, the watcher's output closed by then. Ranks on other hosts keep
records of their own, so each host of a multi-host job may report its first death.

    python _rank_watch.py RANK WORLD PID MARKER
"""
import contextlib
import os
import signal
import sys
import time


def _status(pid: str) -> "int | None":
    """The wait status of zombie `pid`, or None if it is gone (reaped) before it can be read."""
    deadline = time.monotonic() + 0.5
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            return None
        if fields[0] == "Z" and len(fields) > 49:
            return int(fields[49])  # exit_code (Linux 3.5+), as waitpid reports it
        time.sleep(0.0002)
    return None


# faulthandler's words for the crashes it reports
_CRASHES = {b"Segmentation fault": "SIGSEGV", b"Bus error": "SIGBUS", b"Aborted": "SIGABRT",
            b"Floating-point exception": "SIGFPE", b"Illegal instruction": "SIGILL"}


def _killed_by(number: int) -> str:
    try:
        name = signal.Signals(number).name
    except ValueError:
        name = "a signal"
    return f"was killed by signal {name} ({number})"


def _cause(said: bytes, status: "int | None") -> str:
    """What ended the rank: its own last words (a caught signal, faulthandler's dump), else its
    wait status."""
    for line in said.splitlines():
        if line.startswith(b"signal ") and line[7:].isdigit():
            return _killed_by(int(line[7:]))
    for words, name in _CRASHES.items():
        if b"Fatal Python error: " + words in said:
            return _killed_by(int(getattr(signal, name)))
    if status is None:
        return "ended without a word (killed by a signal, probably SIGKILL)"
    if os.WIFSIGNALED(status):
        return _killed_by(os.WTERMSIG(status))
    return f"exited with code {os.WEXITSTATUS(status)} without finishing"


GRACE = 0.5  # seconds for the watchers of the ranks the launcher kills next to record theirs


def _first(folder: str, me: str) -> bool:
    """Whether this death comes first among those recorded in the job's folder: one with the
    rank's own last words before one without (the launcher's clean-up kills say nothing), then
    the earliest."""
    entries = []
    for name in os.listdir(folder):
        try:
            with open(os.path.join(folder, name)) as f:
                words, when = f.read().split()
            entries.append((int(words), float(when), name))
        except (OSError, ValueError):
            continue
    return bool(entries) and min(entries)[2] == me


def main() -> None:
    rank, world, pid, marker = sys.argv[1:5]
    said = b""
    while True:
        chunk = os.read(0, 1 << 16)
        if not chunk:
            break
        said += chunk
    when = time.monotonic()  # one clock for every process of the host
    if b"bye" in said:
        return
    worded = said.startswith(b"signal ") or b"Fatal Python error" in said
    deaths = marker + ".deaths"
    record = os.path.join(deaths, rank)
    try:
        # The death is recorded first, the cause read after: reading a zombie's status may
        # take up to half a second, in which the other watchers must already see this death.
        os.makedirs(deaths, exist_ok=True)
        with open(record + ".tmp", "w") as f:
            f.write(f"{0 if worded else 1} {when!r}")
        os.replace(record + ".tmp", record)
        recorded = True
    except OSError:
        recorded = False
    cause = _cause(said, _status(pid))
    try:
        if not recorded:
            raise OSError
        time.sleep(max(0.0, when + GRACE - time.monotonic()))
        # A rank that ended the job on purpose made the marker; else the first death speaks.
        speak = not os.path.exists(marker) and _first(deaths, rank)
    except OSError:
        speak = True  # nowhere to compare: report anyway
    if speak:
        dump = said[said.find(b"Fatal Python error"):] if b"Fatal Python error" in said else b""
        os.write(2, f"onemodel.distributed: rank {rank} of {world} (pid {pid}) {cause}\n"
                 .encode() + dump)
    for fd in (0, 1, 2):  # the launcher's pipes released: nobody waits for this process
        os.close(fd)
    if os.fork():  # nor for its exit: a child of its own clears the job's files later
        return
    time.sleep(5)
    for path in (record, marker):
        with contextlib.suppress(OSError):
            os.unlink(path)
    with contextlib.suppress(OSError):
        os.rmdir(deaths)


if __name__ == "__main__":
    main()
