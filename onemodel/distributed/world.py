"""The MPI world and its faults: joining it (init), rank and size, waits bounded by the
timeout, the buffer broadcasts and all-reduce, and the job's end on an exception, a lost rank
(abort) or a rank killed by a signal (the watcher, onemodel/_rank_watch.py). The world's
state (_comm, _MPI, _initialised, _timeout and the watcher's) lives here, rebound by init and
the watcher: read it as `world._comm`, never as a copy."""
from __future__ import annotations

import atexit
import contextlib
import faulthandler
import importlib
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import warnings
from typing import Any, Optional, Sequence

import numpy as np

_comm: Any = None
_MPI: Any = None
_initialised = False
_timeout = 300.0
_SPIN_SECONDS = 0.05  # a wait polls this long before it sleeps between polls
_yield_cpu = getattr(os, "sched_yield", lambda: time.sleep(0))


def _launcher_size() -> int:
    """The world size an MPI launcher announces in the environment (1 if none)."""
    for name in ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "PMIX_SIZE", "MPI_LOCALNRANKS"):
        value = os.environ.get(name)
        if value and value.isdigit():
            return int(value)
    return 1


def launched() -> bool:
    """Whether this process was started by mpiexec with more than one process."""
    return _launcher_size() > 1


def init(timeout: Optional[float] = None) -> tuple[int, int]:
    """Joins the MPI world if mpi4py is installed and it has more than one process; returns
    (rank, world_size). Safe to call more than once. `timeout` (seconds; default
    ONEMODEL_DIST_TIMEOUT or 300) bounds every wait for the other ranks."""
    global _comm, _MPI, _initialised, _timeout
    if timeout is not None:
        _timeout = float(timeout)
    if not _initialised:
        _initialised = True
        if timeout is None:
            _timeout = float(os.environ.get("ONEMODEL_DIST_TIMEOUT", _timeout))
        mpi: Any = None
        try:
            mpi = importlib.import_module("mpi4py.MPI")
        except ImportError:
            if launched():
                raise RuntimeError("distributed.init: started by mpiexec with "
                                   f"{_launcher_size()} processes but mpi4py is not installed "
                                   "(pip install mpi4py mpich)") from None
        if mpi is not None and mpi.COMM_WORLD.Get_size() > 1:
            _comm, _MPI = mpi.COMM_WORLD, mpi
            _install_hook()
            _start_watcher()
    return rank(), world_size()


def rank() -> int:
    """This process's rank under mpiexec after init(); 0 in one process."""
    return _comm.Get_rank() if _comm is not None else 0


def world_size() -> int:
    """The number of processes under mpiexec after init(); 1 in one process."""
    return _comm.Get_size() if _comm is not None else 1


def abort(message: str, code: int = 1) -> None:
    """Prints `message` on this rank's stderr and ends the whole job (MPI Abort); in one
    process, raises SystemExit."""
    sys.stderr.write(f"onemodel.distributed: rank {rank()} of {world_size()}: {message}\n")
    sys.stderr.flush()
    if _comm is None:
        raise SystemExit(code)
    _ending_on_purpose()
    # The launcher forwards stderr through a pipe and drops what is still in it when the job
    # is killed (seen with MPICH's hydra on a loaded machine): a moment for it to pass.
    time.sleep(0.2)
    _comm.Abort(code)


def abort_on(exc: BaseException) -> None:
    """Ends the job after printing the traceback of `exc` once (from the rank that raised)."""
    if _MPI is not None and isinstance(exc, _MPI.Exception):
        # A collective failed because another rank went down: that rank prints its traceback.
        abort(f"ending the job after an MPI error ({exc}): another rank failed")
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    abort("an exception ends the job\n" + text.rstrip())


def _install_hook() -> None:
    previous = sys.excepthook

    def hook(kind, value, tb):  # type: ignore[no-untyped-def]
        if _comm is None or issubclass(kind, KeyboardInterrupt):
            return previous(kind, value, tb)
        abort_on(value)

    sys.excepthook = hook


# -- a rank killed by a signal: its watcher names it (onemodel/_rank_watch.py) ----------------
_watch_fd = -1
_marker = ""


def _start_watcher() -> None:
    """Starts this rank's watcher, which reports the rank and the signal if it dies silently.
    Linux only (it reads /proc); elsewhere, and if it cannot start, the job runs without."""
    global _watch_fd, _marker
    if not sys.platform.startswith("linux"):
        return
    # The ranks of a job on one host share the launcher's proxy, their parent: one marker.
    _marker = os.path.join(tempfile.gettempdir(), f"onemodel-job-{os.getppid()}.ended")
    read_end, write_end = os.pipe()
    try:
        subprocess.Popen([sys.executable, "-I", "-S",
                          os.path.join(os.path.dirname(os.path.dirname(__file__)),
                                       "_rank_watch.py"),
                          str(rank()), str(world_size()), str(os.getpid()), _marker],
                         stdin=read_end, stdout=subprocess.DEVNULL, start_new_session=True)
    except OSError as e:
        os.close(write_end)
        warnings.warn(f"distributed.init: no watcher for rank {rank()} ({e}): a rank killed by "
                      "a signal will not be named", RuntimeWarning, stacklevel=3)
        return
    finally:
        os.close(read_end)
    _watch_fd = write_end
    atexit.register(_say_bye)
    os.register_at_fork(after_in_child=_forget_watcher)  # a forked child is no rank
    _tell_watcher_of_signals()


# Signals that end a process by default and can be caught: the rank tells its watcher which one
# before it dies of it (a zombie's status may be reaped before the watcher can read it).
_CATCHABLE = ("SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2", "SIGXCPU", "SIGXFSZ",
              "SIGALRM")


def _tell_watcher_of_signals() -> None:
    """Where the program has not chosen otherwise (the default action in place, faulthandler
    off): a caught signal is written to the watcher before the rank dies of it, and a crash
    (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT) dumps its traceback there (faulthandler)."""
    if threading.current_thread() is not threading.main_thread():
        return  # signal handlers are set from the main thread only
    for name in _CATCHABLE:
        number = getattr(signal, name, None)
        if number is not None and signal.getsignal(number) == signal.SIG_DFL:
            signal.signal(number, _die_telling)
    if not faulthandler.is_enabled():
        global _crash_file
        _crash_file = os.fdopen(_watch_fd, "w", closefd=False)
        faulthandler.enable(_crash_file)


_crash_file: Any = None


def _die_telling(number: int, frame: Any) -> None:
    if _watch_fd >= 0:
        with contextlib.suppress(OSError):
            os.write(_watch_fd, f"signal {number}\n".encode())
    signal.signal(number, signal.SIG_DFL)
    os.kill(os.getpid(), number)  # dies of it as it would have: the launcher reports it too


def _say_bye() -> None:
    global _watch_fd
    if _watch_fd >= 0:
        if _crash_file is not None:
            faulthandler.disable()
        with contextlib.suppress(OSError):
            os.write(_watch_fd, b"bye")
            os.close(_watch_fd)
        _watch_fd = -1


def _forget_watcher() -> None:
    global _watch_fd
    if _watch_fd >= 0:
        if _crash_file is not None:
            faulthandler.disable()
        with contextlib.suppress(OSError):
            os.close(_watch_fd)
        _watch_fd = -1


def _ending_on_purpose() -> None:
    """Before this rank ends the job (Abort): the other ranks' watchers stay silent, the
    reason printed here being the job's."""
    if _marker:
        with contextlib.suppress(OSError):
            os.close(os.open(_marker, os.O_CREAT | os.O_WRONLY, 0o600))
    _say_bye()


def wait(requests: Sequence[Any], what: str) -> None:
    """Waits for MPI requests, ending the job if they are not done within the timeout."""
    if not requests:
        return
    requests = list(requests)
    start = time.monotonic()
    delay = 0.0
    while not _MPI.Request.Testall(requests):
        waited = time.monotonic() - start
        if waited > _timeout:
            abort(f"no answer from the other ranks within {_timeout:g} s while {what}: a "
                  "rank stopped or never arrived (ONEMODEL_DIST_TIMEOUT sets the limit)")
        if waited < _SPIN_SECONDS:
            # Polling, but giving the core to a runnable process (more ranks than cores): a
            # sleep here would wake up to a millisecond after the answer came, each step.
            _yield_cpu()
        else:  # a long wait (rank 0 writing a checkpoint, say): back off
            delay = min(delay * 2 or 1e-5, 1e-3)
            time.sleep(delay)


def _allreduce(buf: np.ndarray, what: str, op: Any = None) -> np.ndarray:
    """In-place all-reduce of a contiguous numpy buffer (SUM by default) with the timeout."""
    if _comm is None or buf.size == 0:
        return buf
    wait([_comm.Iallreduce(_MPI.IN_PLACE, buf, op=op or _MPI.SUM)], what)
    return buf


def broadcast_buffer(buf: np.ndarray, what: str, root: int = 0) -> np.ndarray:
    """In-place broadcast of a contiguous numpy buffer from `root`, with the timeout."""
    if _comm is None or buf.size == 0:
        return buf
    wait([_comm.Ibcast(buf, root=root)], what)
    return buf


def broadcast_arrays(arrays: Sequence[np.ndarray], what: str, root: int = 0) -> None:
    """Broadcasts every array (in place) in one message: their bytes packed together."""
    if _comm is None:
        return
    arrays = [a for a in arrays if a.size]
    if not arrays:
        return
    packed = np.concatenate([np.ascontiguousarray(a).reshape(-1).view(np.uint8)
                             for a in arrays])
    broadcast_buffer(packed, what, root)
    at = 0
    for a in arrays:
        n = a.nbytes
        a[...] = packed[at:at + n].view(a.dtype).reshape(a.shape)
        at += n


def broadcast_int(value: int, what: str, root: int = 0) -> int:
    """The integer `value` of rank `root` (a signed 64-bit one), on every rank; `what` names
    the wait in a timeout's message."""
    buf = np.array([value], np.int64)
    return int(broadcast_buffer(buf, what, root)[0])


def broadcast_bytes(data: Optional[bytes], what: str, root: int = 0) -> bytes:
    """`data` of rank `root`, on every rank (its length first, then the bytes)."""
    n = broadcast_int(-1 if data is None else len(data), what, root) if _comm else len(data or b"")
    if n < 0:
        return None  # type: ignore[return-value]
    buf = np.frombuffer(bytearray(data or b""), np.uint8) if rank() == root \
        else np.empty(n, np.uint8)
    return broadcast_buffer(buf, what, root).tobytes()

