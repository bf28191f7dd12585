"""Data parallelism whose bits do not depend on the worker count.

A global step is M micro-batches with global indices 0 .. M-1, M fixed by the run; worker r of
W computes indices r, r + W, r + 2W, ... (`local_indices`, the DataLoader's sharding). The mean
gradient over the step has the same bits for every W dividing M, for one process accumulating
all M, and whatever algorithm MPI picks, because it is an exact sum:

    grid       each parameter has a grid 2^G, G = P - 54, where P is a prior exponent: the
               exponent of the largest |element| of the previous step's reduced sum (0 at the
               first step). P is the same on every worker and is saved in the checkpoint.
    quantise   micro-batch i with n_i samples contributes v = n_i·g_i (exact in double) as the
               integer round(v / 2^G) (round half to even; exact for |v| >= 2^(P - 31)), held in
               two int64 limbs: hi·2^56 + lo, lo in [0, 2^56). |v| is clamped below 2^(P + 44)
               (2^44 times the last step's largest sum; counted and warned): with at most
               2^20 micro-batches the sum never overflows the 118 bits.
    sum        integers add exactly, so the sum of the micro-batches is one integer whatever the
               order and grouping: locally in the two limbs, then by MPI_Allreduce(SUM) of each
               integer packed whole into one int64 (contiguous buffers, in place, bucket by
               bucket). The packed sum of W workers is exact when no worker's integer lies
               outside 2^(63 - ceil(log2 W)), which holds unless a worker's sum grows about
               2^(8 - ceil(log2 W)) times past the last step's largest; the workers count the
               integers outside in the same message as the other counts, and a bucket with any
               also sums its hi limbs, from which the sum of the lo limbs follows (the packed
               sum less the hi sum times 2^56, modulo 2^64). Either way the same integer, the
               same bits.
    round      the integer X is divided by the sample count N in integers, the quotient kept
               to at least 26 bits with its remainder jammed into the last bit (round to odd),
               converted to float32 and scaled by 2^G (for N a power of two, X converted
               directly): the exact mean X·2^G/N (and the sum, N = 1) rounded once to nearest
               even, except in float32's subnormal range.

    single     with one micro-batch a worker (M = W), the integers are not all-reduced: each
               worker sends shard r of every bucket's float32 gradients to worker r, straight
               from the gradients' own arrays (point-to-point messages, one per parameter
               piece), and worker r quantises the W rows of its shard as above, sums and rounds
               them in cache; the rounded shards are all-gathered. The same integers, so the
               same bits.

A non-finite element anywhere makes that element NaN or ±inf, as a float sum would (a second,
rare all-reduce of a byte per element with bitwise OR). Bytes per worker: 8 per element (one
int64), 2x float32's 4, which a ring all-reduce moves 2(W-1)/W times like float32's, plus a few
integers per parameter (16 per element in a step with wide sums); a single step moves 4 per
element (W-1)/W times each way in the exchange and again in the all-gather: a float32 ring
all-reduce's bytes. Memory: two int64 limbs per element whatever M is (and a float32 result
buffer the Trainer reuses; a single step instead holds the gradients it sent until the next
step and two float32 buffers, the shards received and gathered), no scratch: quantising
(packing too, in a parameter's last add) and rounding are one pass each in C (csrc/exact.c).
A worker's only micro-batch of a step is written packed directly, without its hi limbs (8
bytes an element written instead of 16), when its integers lie inside 2^(bits - 1); should a
bucket's sum turn out wide, such a parameter adds zero high limbs, which is exact too.

Overlap: the buckets are laid out in reverse parameter order, of about 25 MB of float32
(DDP's size); `ExactSum.add_one(..., final=True)` quantises one gradient as
backward completes it (the Trainer calls it from a post-accumulate-grad hook) and starts a
bucket's all-reduce once all its parameters are in, while backward goes on.

Faults: `init()` installs an exception hook that prints the traceback once and calls MPI Abort,
so an exception on any rank ends the job; every wait polls its requests against a deadline
(`ONEMODEL_DIST_TIMEOUT` seconds, default 300), so a rank that never arrives ends the job with
a message instead of a hang. A rank killed by a signal prints nothing itself (SIGKILL cannot be
caught) and the launcher names only its process id: on Linux `init()` starts a small watcher
process per rank (onemodel/_rank_watch.py) that prints "rank R of W (pid P) was killed by
signal SIGKILL (9)" on the rank's stderr; only the first death of a job on a host is reported,
not the other ranks the launcher then kills. Without mpi4py, or outside mpiexec, there is one
worker.
"""
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
from typing import Any, Iterable, Iterator, Optional, Sequence

import numpy as np

from ._kernels import _exact
from .tensor import Tensor

_comm: Any = None
_MPI: Any = None
_initialised = False
_timeout = 300.0

_BELOW = 54          # the grid is 2^(P - 54)
_ABOVE = 44          # |n·g| is clamped below 2^(P + 44): 2^98 grid units
_MAX_MICRO = 1 << 20  # 2^98 · 2^20 < 2^118: the two limbs never overflow
_BUCKET_BYTES = 25 << 20
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
                          os.path.join(os.path.dirname(__file__), "_rank_watch.py"),
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


def local_indices(micro_batches: int, rank_: Optional[int] = None,
                  world_size_: Optional[int] = None) -> range:
    """The global micro-batch indices this worker computes: rank, rank + W, ..."""
    r = rank() if rank_ is None else rank_
    w = world_size() if world_size_ is None else world_size_
    if micro_batches % w:
        raise ValueError(f"local_indices: {micro_batches} micro-batches do not divide among "
                         f"{w} workers")
    return range(r, micro_batches, w)


def gradients(params: Iterable[Tensor]) -> list[Optional[np.ndarray]]:
    """The current gradients of params (the arrays, or None), to hand to all_reduce_gradients
    for one micro-batch; take them before the next backward, after zero_grad."""
    return [None if p.grad is None else p.grad._data for p in params]


def tree_sum(values: Sequence[np.ndarray]) -> np.ndarray:
    """Float32 sum in a fixed pairwise tree (neighbours added level by level, an odd last one
    moving up): the reduction of earlier versions, kept as the accuracy baseline."""
    level = list(values)
    if not level:
        raise ValueError("tree_sum: nothing to add")
    if len(level) == 1:
        return np.array(level[0], dtype=np.float32)
    while len(level) > 1:
        pairs = [level[i] + level[i + 1] for i in range(0, len(level) - 1, 2)]
        level = pairs + level[len(pairs) * 2:]
    return level[0]


# -- the exact sum ------------------------------------------------------------------------------
def max_exponent(values: np.ndarray) -> Optional[int]:
    """floor(log2(max |finite element|)), None when there is no finite nonzero element."""
    a = np.asarray(values).reshape(-1)
    if not a.size:
        return None
    top = max(float(a.max()), -float(a.min()))
    if not np.isfinite(top):
        a = np.abs(a[np.isfinite(a)])
        top = float(a.max()) if a.size else 0.0
    return None if top == 0.0 else int(np.frexp(top)[1]) - 1


def to_float32(hi: Optional[np.ndarray], lo: np.ndarray, grid: int, count: int = 1
               ) -> np.ndarray:
    """float32 of (hi·2^56 + lo)·2^grid / count (lo·2^grid / count when hi is None: packed
    integers), rounded once: the quotient keeps at least 26 bits with its remainder jammed into
    the last one (rounding to odd), so its conversion to float32 rounds as the exact value
    would; results in float32's subnormal range round a second time. count is a positive
    integer below 2^35. One pass in C (csrc/exact.c)."""
    return _round(hi, lo, grid, count)[0]


def _round(hi: Optional[np.ndarray], lo: np.ndarray, grid: int, count: int,
           out: Optional[np.ndarray] = None) -> tuple[np.ndarray, Optional[int]]:
    """to_float32 (into `out` if given) and the exponent of its largest finite magnitude
    (max_exponent's)."""
    n = int(count)
    if n != count or not 1 <= n < 1 << 35:
        raise ValueError(f"to_float32: count must be an integer in [1, 2^35), got {count}")
    lo = np.ascontiguousarray(lo, np.int64).reshape(-1)
    if hi is not None:
        hi = np.ascontiguousarray(hi, np.int64).reshape(-1)
    if out is None:
        out = np.empty(lo.shape, np.float32)
    return out, _exponent_of(_exact.round_limbs(hi, lo, int(grid), n, out))


def _exponent_of(top: int) -> Optional[int]:
    """max_exponent of a float32 magnitude given by its bits (None for 0)."""
    if not top:
        return None
    biased = top >> 23  # float32's bits: the biased exponent, or 0 for a subnormal
    return biased - 127 if biased else top.bit_length() - 150


class ExactSum:
    """The exact, order-free sum of weighted float32 arrays of one layout (see the module
    notes): `add` quantises one micro-batch into the int64 limbs (or `add_one` one parameter's
    array, as its gradient becomes final during backward), `reduce` all-reduces them, `result`
    rounds the integers to float32. `sizes` are the element counts of the parameters in their
    order; the limbs lay them out in reverse order, in buckets of about `bucket_bytes` float32
    bytes (default 25 MB; DDP's order and size: the last layers, whose gradients are final
    first, start their reduction early)."""

    def __init__(self, sizes: Sequence[int], bucket_bytes: Optional[int] = None) -> None:
        bucket_bytes = _BUCKET_BYTES if bucket_bytes is None else bucket_bytes
        self.sizes = [int(s) for s in sizes]
        n = len(self.sizes)
        self.offsets = [0] * n
        self.bucket_of = [0] * n
        at = 0
        self.buckets: list[tuple[int, int]] = []
        start = 0
        for k in reversed(range(n)):
            self.offsets[k] = at
            self.bucket_of[k] = len(self.buckets)
            at += self.sizes[k]
            if (at - start) * 4 >= bucket_bytes:
                self.buckets.append((start, at))
                start = at
        if at > start or not self.buckets:
            self.buckets.append((start, at))
        self.members: list[list[int]] = [[] for _ in self.buckets]  # parameters per bucket
        for k, j in enumerate(self.bucket_of):
            self.members[j].append(k)
        self.total = at
        self.exponents: list[int] = [0] * n  # the priors P
        self.lo = np.zeros(at, np.int64)
        self.hi = np.zeros(at, np.int64)
        # Per parameter: micro-batches with a gradient, clamped elements, non-finite elements;
        # per bucket: integers too wide to pack.
        self.counts = np.zeros(3 * n + len(self.buckets), np.int64)
        self.codes: Optional[np.ndarray] = None
        self._waiting = [len(m) for m in self.members]  # per bucket: parameters not final
        self._started = 0  # buckets 0 .. _started - 1 have started their all-reduce
        self._final = [False] * n
        self._fresh = [True] * n  # no integers yet this step: the limbs hold old ones
        self._wide = [-1] * n  # packed parameters: their integers too wide to pack
        self._hi_skipped = [False] * n  # packed directly: hi limbs not written (lo >> 56)
        self._requests: list[Any] = []
        self._packed = [False] * len(self.buckets)  # lo holds the whole (summed) integers
        self._out: Optional[np.ndarray] = None  # results(reuse=True) write here
        # The float32 exchange of a single step: per parameter, the gradient sent from where
        # it lies; per bucket, every other worker's rows of this worker's shard (W rows of
        # `_shard[j]`, its own row unused) and the rounded results (W shards).
        self._single = False
        self._held: list[Optional[np.ndarray]] = [None] * n
        self._shard: list[int] = []
        self._recv: list[np.ndarray] = []
        self._gathered: list[np.ndarray] = []
        self._weights = np.zeros(n)  # this worker's weight per parameter, 0 if not added
        self._all_weights = np.zeros((1, n))  # every worker's
        self._rounded = 0  # the count the gathered results are divided by (0: none yet)
        self._tops = np.zeros(n, np.int64)  # their largest finite bits, per parameter

    def grid(self, k: int) -> int:
        return self.exponents[k] - _BELOW

    def reset(self, single: bool = False) -> None:
        """Empties the sum for a new step (the first add of each parameter overwrites its
        limbs, and a parameter never added is zeroed before an all-reduce). `single`: every
        worker adds each parameter at most once in this step, final (one micro-batch a worker),
        so the float32 gradients are exchanged instead of integers (the notes above
        `_allocate_exchange`), sent from the arrays add_one was given: they must not change
        until results() returns. Every worker must pass the same."""
        self._single = single and _comm is not None and world_size() > 1
        if self._single and not self._recv:
            self._allocate_exchange()
        self._held = [None] * len(self.sizes)
        self._weights[:] = 0
        self._rounded = 0
        self.counts[:] = 0
        self.codes = None
        self._waiting = [len(m) for m in self.members]
        self._started = 0
        self._final = [False] * len(self.sizes)
        self._fresh = [True] * len(self.sizes)
        self._wide = [-1] * len(self.sizes)
        self._hi_skipped = [False] * len(self.sizes)
        self._requests = []
        self._packed = [False] * len(self.buckets)

    def add(self, arrays: Sequence[Optional[np.ndarray]], weight: float = 1.0) -> None:
        """Adds weight·array for every array of one micro-batch (None: no gradient there)."""
        if len(arrays) != len(self.sizes):
            raise ValueError(f"ExactSum.add: {len(arrays)} arrays for {len(self.sizes)} "
                             "parameters")
        for k, a in enumerate(arrays):
            if a is not None:
                self.add_one(k, a, weight)

    def add_one(self, k: int, a: np.ndarray, weight: float = 1.0, final: bool = False
                ) -> None:
        """Adds weight·a into parameter k's integers. `final`: this worker adds nothing more
        to parameter k in this step, so once every parameter of its bucket is final, the
        bucket's all-reduce starts (while the caller goes on, e.g. with backward)."""
        if self._final[k]:
            raise RuntimeError(f"ExactSum.add: parameter {k} was final already in this step")
        weight = float(weight)
        if not (weight >= 0 and weight < 2 ** 29 and weight == int(weight)):
            raise ValueError(f"ExactSum.add: the weight must be an integer in [0, 2^29), got "
                             f"{weight}")
        a = np.ascontiguousarray(a, np.float32).reshape(-1)
        if a.size != self.sizes[k]:
            raise ValueError(f"ExactSum.add: array {k} has {a.size} elements, expected "
                             f"{self.sizes[k]}")
        if self._single and not final:
            raise RuntimeError("ExactSum.add: a single step adds each parameter once, final")
        n = len(self.sizes)
        self.counts[k] += 1
        if self._single:  # the gradient itself, to be sent from where it lies
            self._held[k] = a
            self._weights[k] = weight
            self._fresh[k] = False
        else:
            # The last add of a parameter packs its integers for the all-reduce in one pass.
            bits = self._pack_bits() if final and _comm is not None else 0
            clamped, bad, wide = self._quantise(k, a, weight, bits)
            self.counts[n + k] += clamped
            self.counts[2 * n + k] += bad
            if bits:
                self._wide[k] = wide
        if final:
            self._final[k] = True
            self._waiting[self.bucket_of[k]] -= 1
            # Every worker starts the buckets in their order (MPI pairs collectives by their
            # order): a complete bucket waits for those before it.
            started = self._started
            while self._started < len(self.buckets) and self._waiting[self._started] == 0:
                self._start(self._started)
            if self._started == started and self._requests:
                _MPI.Request.Testall(self._requests)  # MPI moves a message only when called

    def _quantise(self, k: int, a: np.ndarray, weight: float, pack_bits: int = 0
                  ) -> tuple[int, int, int]:
        """One pass in C (csrc/exact.c): v = weight·a / 2^G in double (exact), non-finite
        elements recorded (+inf 1, -inf 2, NaN 4) and left out, |v| clamped below 2^98,
        round(v) (half to even) added into the limbs, the carry moved into hi; with pack_bits
        the integers then packed (see _start). Returns (clamped, non-finite, too wide)."""
        scale = weight * 2.0 ** -self.grid(k)  # exact: a power of two times a small integer
        limit = 2.0 ** (_BELOW + _ABOVE) - 2.0 ** 45
        base = self.offsets[k]
        hi = self.hi[base:base + a.size]
        lo = self.lo[base:base + a.size]
        codes = None if self.codes is None else self.codes[base:base + a.size]
        fresh = self._fresh[k]
        self._fresh[k] = False
        done, clamped, bad, wide, self._hi_skipped[k] = _exact.add(a, scale, limit, hi, lo,
                                                                   codes, fresh, pack_bits)
        if done < a.size:  # a first non-finite element: the codes exist from here on
            self.codes = np.zeros(self.total, np.uint8)
            rest = slice(base + done, base + a.size)
            _, more, bad, wider, _ = _exact.add(a[done:], scale, limit, self.hi[rest],
                                                self.lo[rest], self.codes[rest], fresh, pack_bits)
            clamped += more
            wide += wider
        return clamped, bad, wide

    def normalise(self) -> None:
        """Carries the lo limbs into the hi limbs: lo back in [0, 2^56)."""
        _exact.normalise(self.hi, self.lo)

    def _start(self, j: int) -> None:
        """Starts bucket j's all-reduce: each integer packed whole into one int64 (8 bytes an
        element; its sum over W workers is exact when no worker's lies outside 2^(63 -
        ceil(log2 W)), counted per bucket and checked in reduce)."""
        self._waiting[j] = -1  # started
        self._started = j + 1
        if _comm is None:
            return
        if self._single:
            self._exchange(j)
            return
        wide = 0
        for k in self.members[j]:
            at, end = self.offsets[k], self.offsets[k] + self.sizes[k]
            if self._fresh[k]:  # no gradient here this step: zero (packed), for the others
                self.hi[at:end] = 0
                self.lo[at:end] = 0
            elif self._wide[k] < 0:  # not packed by its last add
                self._wide[k] = _exact.pack(self.hi[at:end], self.lo[at:end],
                                            self._pack_bits())
            wide += max(self._wide[k], 0)
        a, b = self.buckets[j]
        self.counts[3 * len(self.sizes) + j] = wide
        self._packed[j] = True
        self._requests.append(_comm.Iallreduce(_MPI.IN_PLACE, self.lo[a:b], op=_MPI.SUM))

    def _pack_bits(self) -> int:
        """Packed integers inside 2^bits, bits = 63 - ceil(log2 W): their sum fits."""
        world = world_size()
        if world > 127:  # the sum of the lo limbs must stay below 2^63
            raise RuntimeError(f"distributed: the exact sum supports up to 127 workers, the "
                               f"run has {world}")
        return 63 - (world - 1).bit_length()

    def reduce(self, slots: Optional[np.ndarray] = None, what: str = "reducing gradients"
               ) -> Optional[np.ndarray]:
        """All-reduces the integers and counts over the workers (in place, bucket by bucket,
        the buckets not started yet now); `slots` (int64, summed in the same message as the
        counts) carries the caller's per-micro-batch integers. Returns the reduced slots."""
        if _comm is None:
            return slots
        for j in range(self._started, len(self.buckets)):
            self._start(j)
        if self._single:
            self._receive(what)
        meta = self.counts if slots is None else np.concatenate([self.counts,
                                                                 slots.reshape(-1)])
        self._requests.append(_comm.Iallreduce(_MPI.IN_PLACE, meta, op=_MPI.SUM))
        wait(self._requests, what)
        self._requests = []
        n = len(self.sizes)
        if self._single:
            return self._finish(meta, slots)
        # A bucket with integers too wide for one int64: its hi limbs too; the sum of the lo
        # limbs is then the packed sum less the hi sum times 2^56, modulo 2^64 (below 2^63).
        wide = [j for j in range(len(self.buckets)) if meta[3 * n + j]]
        # A parameter packed directly (its hi limbs not written, every integer inside
        # 2^(bits - 1)) adds zero high limbs: each worker's part of the sum of the lo limbs is
        # then its integer (inside 2^(bits - 1) <= 2^62 / W) or a low limb (in [0, 2^56), and
        # W <= 127), both below 2^63 / W, so that sum stays inside int64, which is all the
        # rounding needs.
        for k in (k for j in wide for k in self.members[j] if self._hi_skipped[k]):
            self.hi[self.offsets[k]:self.offsets[k] + self.sizes[k]] = 0
        wait([_comm.Iallreduce(_MPI.IN_PLACE, self.hi[a:b], op=_MPI.SUM)
              for a, b in (self.buckets[j] for j in wide)], what + " (wide sums)")
        for j in wide:
            a, b = self.buckets[j]
            self.lo[a:b] -= self.hi[a:b] << 56  # wraps modulo 2^64, as intended
            self._packed[j] = False
        if meta[2 * n:3 * n].any():
            if self.codes is None:
                self.codes = np.zeros(self.total, np.uint8)
            _allreduce(self.codes, what + " (non-finite elements)", _MPI.BOR)
        return self._finish(meta, slots)

    def _finish(self, meta: np.ndarray, slots: Optional[np.ndarray]) -> Optional[np.ndarray]:
        self.counts[:] = meta[:len(self.counts)]
        return None if slots is None else meta[len(self.counts):].reshape(slots.shape)

    # -- the float32 exchange of a single step ---------------------------------------------------
    # With one micro-batch a worker, each worker sends shard r of every bucket's float32
    # gradients to worker r, which sums the W rows of its shard on the grid (quantising each as
    # add does, into integers that stay in cache) and rounds them; the rounded shards are then
    # all-gathered. The integers are the ones the all-reduce would sum, so the bits are the
    # same; the bytes are a float32 ring all-reduce's (half the integers'), and no
    # gradient-sized integer array is written. The gradients go out from their own arrays, one
    # point-to-point message per piece of a parameter in another worker's shard (MPI matches
    # the messages of one sender and tag in their order, which every worker takes from the
    # layout), so nothing is copied into a send buffer and a worker's own rows are not moved.

    def _allocate_exchange(self) -> None:
        world = world_size()
        for a, b in self.buckets:
            shard = -(-(b - a) // world)
            self._shard.append(shard)
            self._recv.append(np.empty((world, shard), np.float32))  # untouched: row `rank`
            self._gathered.append(np.empty(shard * world, np.float32))

    def _pieces(self, j: int, w: int) -> Iterator[tuple[int, int, int]]:
        """(parameter, start, end) of every member of bucket j inside shard w of the bucket,
        start and end relative to the bucket, in the members' order."""
        a, b = self.buckets[j]
        begin, end = w * self._shard[j], min((w + 1) * self._shard[j], b - a)
        for k in self.members[j]:
            at = self.offsets[k] - a
            lo, hi = max(at, begin), min(at + self.sizes[k], end)
            if lo < hi:
                yield k, lo, hi

    def _exchange(self, j: int) -> None:
        """Starts bucket j's exchange: this worker's shard from every other worker, received
        in its row, and every other worker's shard sent from the gradients (zeros of weight 0
        for a parameter without one here)."""
        a, me, world = self.buckets[j][0], rank(), world_size()
        for k in self.members[j]:
            if self._held[k] is None:
                self._held[k] = np.zeros(self.sizes[k], np.float32)
        begin = me * self._shard[j]
        for w in range(world):
            if w != me:
                row = self._recv[j][w]
                self._requests.extend(_comm.Irecv(row[lo - begin:hi - begin], source=w, tag=j)
                                      for _, lo, hi in self._pieces(j, me))
        for w in range(world):
            if w != me:
                for k, lo, hi in self._pieces(j, w):
                    at = self.offsets[k] - a
                    held = self._held[k]
                    assert held is not None
                    self._requests.append(_comm.Isend(held[lo - at:hi - at], dest=w, tag=j))

    def _receive(self, what: str) -> None:
        """Waits for the gradients' exchange and every worker's weights."""
        self._all_weights = np.empty((world_size(), len(self.sizes)))
        self._requests.append(_comm.Iallgather(self._weights, self._all_weights))
        wait(self._requests, what)
        self._requests = []
        self._rounded = 0

    def _round_shards(self, count: int, what: str = "gathering the gradients") -> None:
        """Sums and rounds (divided by count) this worker's shards, all-gathers them, the
        largest magnitudes (MAX) and the clamped counts (SUM). Every worker calls it."""
        if self._rounded == count:
            return
        n, me = len(self.sizes), rank()
        limit = 2.0 ** (_BELOW + _ABOVE) - 2.0 ** 45
        tops = np.zeros(n, np.int64)
        clamped = np.zeros(n, np.int64)
        requests = []
        for j, (a, _) in enumerate(self.buckets):
            begin = me * self._shard[j]
            for k, lo, hi in self._pieces(j, me):
                at = self.offsets[k] - a
                held = self._held[k]
                assert held is not None
                rows = [held[lo - at:hi - at] if w == me else self._recv[j][w, lo - begin:
                                                                             hi - begin]
                        for w in range(world_size())]
                scale = self._all_weights[:, k] * 2.0 ** -self.grid(k)  # as _quantise's
                tops[k], clamped[k] = _exact.sum_rows(rows, scale, limit, self.grid(k), count,
                                                      self._gathered[j][lo:hi])
            requests.append(_comm.Iallgather(_MPI.IN_PLACE, self._gathered[j]))
        requests.append(_comm.Iallreduce(_MPI.IN_PLACE, tops, op=_MPI.MAX))
        requests.append(_comm.Iallreduce(_MPI.IN_PLACE, clamped, op=_MPI.SUM))
        wait(requests, what)
        self._tops = tops
        self.counts[n:2 * n] = clamped
        self._rounded = count

    def _result(self, k: int, count: int, reuse: bool = False
                ) -> tuple[Optional[np.ndarray], Optional[int]]:
        if not self.counts[k]:
            return None, None
        if self._single:
            self._round_shards(count)
            j = self.bucket_of[k]
            at = self.offsets[k] - self.buckets[j][0]
            out = self._gathered[j][at:at + self.sizes[k]]
            return (out if reuse else out.copy()), _exponent_of(int(self._tops[k]))
        a = self.offsets[k]
        b = a + self.sizes[k]
        hi = None if self._packed[self.bucket_of[k]] else self.hi[a:b]
        into = None
        if reuse:
            if self._out is None:
                self._out = np.empty(self.total, np.float32)
            into = self._out[a:b]
        out, top = _round(hi, self.lo[a:b], self.grid(k), count, into)
        if self.codes is not None:
            code = self.codes[a:b]
            if code.any():
                out[code == 1] = np.inf
                out[code == 2] = -np.inf
                out[(code & 4 != 0) | (code == 3)] = np.nan
                top = max_exponent(out)
        return out, top

    def result(self, k: int, count: int = 1) -> Optional[np.ndarray]:
        """Parameter k's sum divided by count, as float32 (None if no micro-batch had one)."""
        return self._result(k, count)[0]

    def results(self, count: int = 1, update_priors: bool = True, reuse: bool = False
                ) -> list[Optional[np.ndarray]]:
        """Every parameter's result; then the priors move to these results' exponents (a
        parameter with no finite nonzero element keeps its prior). With `reuse` the results
        are views of one buffer that the next results(reuse=True) overwrites (no fresh
        memory, whose first touch costs as much as the rounding)."""
        n = len(self.sizes)
        done = [self._result(k, count, reuse) for k in range(n)]
        clamped = int(self.counts[n:2 * n].sum())  # known after a single step's rounding
        if clamped and rank() == 0:
            warnings.warn(f"distributed: {clamped} gradient elements were 2^44 times larger "
                          "than the previous step's largest and were clamped", RuntimeWarning,
                          stacklevel=3)
        if update_priors:
            for k, (_, e) in enumerate(done):
                if e is not None:  # the sum's exponent, within one
                    self.exponents[k] = e + int(count).bit_length() - 1
        return [r for r, _ in done]


def all_reduce_gradients(params: Iterable[Tensor],
                         micro_batches: Sequence[tuple],
                         average: bool = True) -> None:
    """Sets every parameter's .grad to the exact sum over all workers' micro-batches (the mean
    when `average`: over the samples when counts are given, else over the micro-batches).

    `micro_batches` lists this worker's (global index, gradients) or (global index, gradients,
    sample count) tuples, the gradients as from `gradients(params)`; together the workers must
    hold 0 .. M-1 once each. A parameter without a gradient in some micro-batch counts as zero
    there, and keeps None only if it has none anywhere. The grid of each parameter comes from
    the largest element over all micro-batches (an integer MAX all-reduce), so the result is
    the same for any split of the micro-batches among workers."""
    params = list(params)
    local = []
    for m in micro_batches:
        i, grads = int(m[0]), list(m[1])
        n = int(m[2]) if len(m) > 2 else 1
        if len(grads) != len(params):
            raise ValueError(f"all_reduce_gradients: micro-batch {i} has {len(grads)} "
                             f"gradients for {len(params)} parameters")
        local.append((i, grads, n))
    top = np.array([max([i + 1 for i, _, _ in local], default=0)], np.int64)
    _allreduce(top, "counting micro-batches", _MPI.MAX if _comm else None)
    m_total = int(top[0])
    seen = np.zeros((max(m_total, 1), 2), np.int64)
    for i, _, n in local:
        if 0 <= i < m_total:
            seen[i] += (1, n)
    lowest = min([i for i, _, _ in local], default=0)
    if lowest < 0:
        seen[0, 0] += 2  # a negative index: reported below on every worker
    # The grids: each parameter's largest exponent over every micro-batch (order-free MAX).
    exps = np.full(len(params), -(1 << 40), np.int64)
    for _, grads, n in local:
        for k, g in enumerate(grads):
            e = None if g is None else max_exponent(np.asarray(g, np.float32))
            if e is not None:
                exps[k] = max(exps[k], e + (int(n) - 1).bit_length())
    _allreduce(exps, "agreeing on the grids", _MPI.MAX if _comm else None)
    _allreduce(seen, "counting micro-batches")
    if m_total == 0 or not (seen[:, 0] == 1).all():
        raise ValueError(f"all_reduce_gradients: the micro-batch indices must be 0 .. M-1 "
                         f"once each over all workers, got counts {seen[:, 0].tolist()}")
    acc = ExactSum([int(np.prod(p.shape, dtype=np.int64)) for p in params])
    acc.exponents = [int(e) + m_total.bit_length() if e > -(1 << 40) else 0 for e in exps]
    for _, grads, n in sorted(local, key=lambda m: m[0]):
        acc.add([None if g is None else np.asarray(g, np.float32) for g in grads], n)
    acc.reduce()
    total = int(seen[:, 1].sum()) if average else 1
    for p, r in zip(params, acc.results(total, update_priors=False)):
        p.grad = None if r is None else Tensor._wrap(r.reshape(p.shape))


# -- ZeRO stage 1 -------------------------------------------------------------------------------
class OptimizerShards:
    """ZeRO stage 1: each worker updates, and keeps current, the
    optimizer state of its share of the parameters; then the parameters are all-gathered.

    The shares are whole parameters, each given in order to the worker with the fewest
    elements so far (torch's ZeroRedundancyOptimizer partitions the same way). The optimizer
    updates each element by the same operations whichever worker does it, so the parameters
    have the bits of the unsharded step; the clip norm is computed before, over every
    parameter's reduced gradient, which every worker holds. The state of other workers'
    parameters stays as it was loaded; `gather_state` brings every worker's state current
    (before a checkpoint, so rank 0 writes the unsharded format, which loads at any W).

    Memory: a worker holds the state of its own parameters only; the others' state arrays are
    read-only zero placeholders (zero-strided: no memory) until `materialise` (which
    gather_state and loading a checkpoint need) and again after `release` (the Trainer calls
    it once a checkpoint is written or loaded). An optimizer whose state is not swappable
    (Optimizer._state_lists) keeps its whole state on every worker."""

    def __init__(self, optimizer: Any) -> None:
        self.optimizer = optimizer
        params = optimizer.params
        world = world_size()
        loads = [0] * world
        self.owner: list[int] = []
        for p in params:
            r = loads.index(min(loads))
            self.owner.append(r)
            loads[r] += int(np.prod(p.shape, dtype=np.int64))
        self.counts = loads
        self.displs = [sum(loads[:r]) for r in range(world)]
        self.mine = [i for i, r in enumerate(self.owner) if r == rank()]
        self.flat = np.empty(sum(loads), np.float32)
        self._state_of()  # refuses an optimizer with state of no parameter
        self.release()

    def _others(self) -> Iterator[tuple[list, int]]:
        """(state list, index) of every state array of another worker's parameter."""
        for states in self.optimizer._state_lists().values():
            for i, owner in enumerate(self.owner):
                if owner != rank() and states[i] is not None:
                    yield states, i

    def release(self) -> None:
        """Drops the state of other workers' parameters (placeholders of their shape)."""
        for states, i in self._others():
            a = states[i]
            states[i] = np.broadcast_to(np.zeros((), a.dtype), a.shape)

    def materialise(self) -> None:
        """Real (zero) arrays in place of the placeholders, to be written."""
        for states, i in self._others():
            a = states[i]
            if not a.flags.writeable:
                states[i] = np.zeros(a.shape, a.dtype)

    def _state_of(self) -> list[list[np.ndarray]]:
        """Per parameter, its optimizer state arrays (named `<kind>.<parameter index>`)."""
        state_of: list[list[np.ndarray]] = [[] for _ in self.owner]
        for name, array in self.optimizer.state_tensors().items():
            index = name.rsplit(".", 1)[-1]
            if not index.isdigit() or int(index) >= len(self.owner):
                raise ValueError(f"shard_optimizer: the optimizer's state {name!r} belongs "
                                 "to no parameter: it cannot be sharded")
            state_of[int(index)].append(array)
        return state_of

    def release_others(self) -> None:
        """Drops the gradients of other workers' parameters: the optimizer skips them."""
        for i, p in enumerate(self.optimizer.params):
            if self.owner[i] != rank():
                p.grad = None

    def gather(self, what: str = "gathering the parameters") -> None:
        """Every parameter from its owner, on every worker (one Allgatherv of float32)."""
        if _comm is None:
            return
        params = self.optimizer.params
        at = self.displs[rank()]
        for i in self.mine:
            a = params[i]._data.reshape(-1)
            self.flat[at:at + a.size] = a
            at += a.size
        wait([_comm.Iallgatherv(_MPI.IN_PLACE, [self.flat, self.counts, self.displs,
                                                _MPI.FLOAT])], what)
        next_of = [*self.displs]  # per rank: where its next parameter starts in flat
        for i, p in enumerate(params):
            r = self.owner[i]
            if r != rank():
                n = p._data.size
                p._data.reshape(-1)[...] = self.flat[next_of[r]:next_of[r] + n]
                p._version += 1
            next_of[r] += p._data.size

    def gather_state(self, what: str = "gathering the optimizer state") -> None:
        """Every parameter's optimizer state from its owner, on every worker (materialised:
        `release` drops it again)."""
        self.materialise()
        state_of = self._state_of()
        for r in range(world_size()):
            broadcast_arrays([a for i, owner in enumerate(self.owner) if owner == r
                              for a in state_of[i]], what, root=r)


# torch.distributed's process-group calls (onemodel/process_group.py, which reads this module)
from .process_group import (  # noqa: E402, F401
    ReduceOp,
    all_gather,
    all_reduce,
    barrier,
    broadcast,
    destroy_process_group,
    get_rank,
    get_world_size,
    init_process_group,
    is_available,
    is_initialized,
)
