"""torch.utils.data._utils.worker: get_worker_info, and the worker processes of a DataLoader
with num_workers > 0.

Each worker owns a task queue; all answer on one result queue with (task, status, value):
status True for a batch, False for an error (re-raised in the main process naming the worker,
as torch's message does), None when a worker's iterable stream has ended. Tasks are handed out
round-robin and the results put back in task order, so the batches come in the sampler's order.
"""
from __future__ import annotations

import collections
import multiprocessing
import queue
import sys
import time
import traceback
from typing import Any, Callable, Iterator, Optional

from ...._config import set_num_threads
from ....random import MASK64, default_generator

_POLL_SECONDS = 0.1  # how often a wait looks at the workers' health


class WorkerInfo:
    """What get_worker_info() returns inside a worker: id, num_workers, seed, dataset."""

    def __init__(self, id: int, num_workers: int, seed: int, dataset: Any) -> None:
        self.id, self.num_workers, self.seed, self.dataset = id, num_workers, seed, dataset

    def __repr__(self) -> str:
        return (f"WorkerInfo(id={self.id}, num_workers={self.num_workers}, seed={self.seed}, "
                f"dataset={type(self.dataset).__name__})")


_worker_info: Optional[WorkerInfo] = None


def get_worker_info() -> Optional[WorkerInfo]:
    """The calling worker's WorkerInfo; None in the main process."""
    return _worker_info


class _KeyErrorMessage(str):
    """A KeyError shows repr() of its argument: this one's repr is the text itself."""

    def __repr__(self) -> str:
        return str(self)


class WorkerError:
    """An exception raised in a worker, carried to the main process as its type and text."""

    def __init__(self, worker_id: int) -> None:
        exc_type, exc, tb = sys.exc_info()
        self.exc_type = exc_type
        self.text = "".join(traceback.format_exception(exc_type, exc, tb))
        self.worker_id = worker_id

    def reraise(self) -> None:
        assert self.exc_type is not None
        message = (f"Caught {self.exc_type.__name__} in DataLoader worker process "
                   f"{self.worker_id}.\nOriginal {self.text}")
        if self.exc_type is KeyError:
            message = _KeyErrorMessage(message)
        try:
            error = self.exc_type(message)
        except Exception:
            raise RuntimeError(message) from None
        raise error


def _worker_loop(fetcher: Any, tasks: Any, results: Any, worker_id: int, num_workers: int,
                 seed: int, init_fn: Optional[Callable[[int], None]]) -> None:
    global _worker_info
    set_num_threads(1)  # the workers share the cores; one kernel thread each (as torch's)
    default_generator.manual_seed(seed)
    _worker_info = WorkerInfo(worker_id, num_workers, seed, fetcher.dataset)
    failure = None
    try:
        if init_fn is not None:
            init_fn(worker_id)
    except Exception:
        failure = WorkerError(worker_id)
    stream: Optional[Iterator[Any]] = None
    stream_pass = None
    while (task := tasks.get()) is not None:
        task_id, payload = task
        if failure is not None:
            results.put((task_id, False, failure))
            continue
        try:
            if payload[0] == "map":
                value = fetcher.fetch(payload[1], payload[2])
            else:  # the next batch of this worker's pass over an iterable dataset
                if payload[1] != stream_pass:
                    stream, stream_pass = fetcher.batches(), payload[1]
                assert stream is not None
                try:
                    value = next(stream)
                except StopIteration:
                    results.put((task_id, None, None))
                    continue
            results.put((task_id, True, value))
        except Exception:
            results.put((task_id, False, WorkerError(worker_id)))
    results.cancel_join_thread()  # unread results must not hold the exit


def _context(context: Any) -> Any:
    if context is None:
        methods = multiprocessing.get_all_start_methods()
        return multiprocessing.get_context("fork" if "fork" in methods else "spawn")
    return multiprocessing.get_context(context) if isinstance(context, str) else context


class WorkerPool:
    """num_workers processes running _worker_loop over one fetcher."""

    def __init__(self, fetcher: Any, num_workers: int, base_seed: int,
                 init_fn: Optional[Callable[[int], None]], context: Any,
                 timeout: float) -> None:
        ctx = _context(context)
        self.timeout = timeout
        self.results = ctx.Queue()
        self.tasks = [ctx.Queue() for _ in range(num_workers)]
        self.workers = [
            ctx.Process(target=_worker_loop, daemon=True, name=f"onemodel-data-{i}",
                        args=(fetcher, self.tasks[i], self.results, i, num_workers,
                              (base_seed + i) & MASK64, init_fn))
            for i in range(num_workers)]
        self._passes = 0
        self._done: dict[tuple, tuple] = {}
        self.closed = False
        try:
            for w in self.workers:
                w.start()
        except BaseException:
            self.close()
            raise

    def run(self, payloads: Iterator[tuple], depth: int) -> Iterator[Any]:
        """The values of `payloads` in their order, at most `depth` tasks a worker ahead. A
        worker whose stream has ended gets no further tasks; its answers are skipped."""
        self._passes += 1
        self._done.clear()  # answers of an abandoned pass are never read
        pass_id = self._passes
        active = list(range(len(self.workers)))
        outstanding: collections.deque = collections.deque()
        sent = 0

        def submit() -> None:
            nonlocal sent
            payload = next(payloads, None) if active else None
            if payload is not None:
                if payload[0] == "next":  # a stream's task names the pass it belongs to
                    payload = ("next", pass_id)
                worker = active[sent % len(active)]
                self.tasks[worker].put(((pass_id, sent), payload))
                outstanding.append(((pass_id, sent), worker))
                sent += 1

        for _ in range(depth * len(self.workers)):
            submit()
        while outstanding:
            task, worker = outstanding.popleft()
            status, value = self._wait(task)
            if status is None:
                if worker in active:
                    active.remove(worker)
            elif status is False:
                value.reraise()
            submit()
            if status:
                yield value

    def _wait(self, task: tuple) -> tuple:
        start = time.monotonic()
        while task not in self._done:
            if self.timeout and time.monotonic() - start > self.timeout:
                raise RuntimeError(f"DataLoader timed out after {self.timeout} seconds")
            try:
                got, status, value = self.results.get(timeout=_POLL_SECONDS)
            except queue.Empty:
                dead = [w.pid for w in self.workers if not w.is_alive()]
                if dead:
                    raise RuntimeError(f"DataLoader worker (pid(s) {dead}) exited "
                                       "unexpectedly") from None
                continue
            if got[0] == self._passes:
                self._done[got] = (status, value)
        return self._done.pop(task)

    def close(self) -> None:
        """Stops the workers: asks each to end, then terminates any still running."""
        if self.closed:
            return
        self.closed = True
        for w, q in zip(self.workers, self.tasks):
            if w.is_alive():
                q.put(None)
        for w in self.workers:
            if w.pid is not None:
                w.join(timeout=2.0)
                if w.is_alive():
                    w.terminate()
                    w.join()
        for q in [*self.tasks, self.results]:
            q.cancel_join_thread()
            q.close()
