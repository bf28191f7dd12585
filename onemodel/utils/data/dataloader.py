"""torch.utils.data.dataloader: DataLoader with torch's signature, defaults and errors, and an
order that is the same on every machine.

Order. The batches of an epoch are those of the batch sampler (torch's BatchSampler over a
SequentialSampler, or over a RandomSampler when shuffle=True). The loader's own RandomSampler
draws from a generator set to epoch_key(seed, epoch) at the start of each epoch, so the order
is a function of (seed, epoch) alone (`generator=` gives the seed: one draw of it when the
loader is made). A dataset read per example runs each batch with the default generator at a
state fixed by (seed, epoch, batch) and puts it back afterwards, so random augmentations are
the same whichever process reads the batch, and do not move the training's draws.

Workers. num_workers > 0 fetches and collates batches in worker processes (fork where the
platform has it), round-robin, and yields them in the sampler's order: the same batches as
num_workers=0. An error in a worker is raised in the main process naming the worker;
the workers end with the pass (or with the loader, persistent_workers=True).

Sharding (onemodel's rank=, world_size=): the epochs form one stream of global batches, and
rank r of W takes the stream positions p with p mod W = r. A step of M micro-batches (W
dividing M) covers M consecutive positions, so W workers together see exactly the micro-batches
one worker accumulating M sees, whatever W is (a step may span the end of an epoch).

Resume. state_dict() holds (epoch, global batches of it consumed by all ranks together) as
integers; a resumed run sees exactly the remaining batches at any W for which the position falls
on a boundary of W workers (load_state_dict refuses the others).

Arrays. An array dataset (a numpy array, a Tensor or a torch tensor; a tuple, list `[x, y]` or
dict of them), a TensorDataset, or a Subset of one, is batched by one fancy index per array
when collate_fn is the default, giving what default_collate would.
"""
from __future__ import annotations

import collections
import itertools
import weakref
from typing import Any, Callable, Iterator, Mapping, Optional
from typing import Generator as Generator_

import numpy as np

from ...random import MASK64, Generator, default_generator, mix
from ._utils.collate import default_collate, default_convert, is_array, numbers, to_tensor
from ._utils.worker import WorkerPool, get_worker_info
from .dataset import IterableDataset, Subset, TensorDataset, check_integer
from .sampler import BatchSampler, RandomSampler, SequentialSampler, epoch_key

__all__ = ["DataLoader", "default_collate", "default_convert", "get_worker_info"]

_BATCH_SALT = 0xD1B54A32D192ED03  # the per-batch states' stream, apart from the orders'
_WORKER_SALT = 0x8CB92BA72F3D8DD7


def _as_arrays(dataset: Any) -> tuple[Optional[dict[Any, np.ndarray]], str]:
    """The arrays of an array dataset by field (index or name) and how an example holds them
    ("one", "tuple" or "dict"); or (None, "examples") for a dataset read per example."""
    if isinstance(dataset, TensorDataset):
        fields, kind = dict(enumerate(dataset.tensors)), "tuple"
    elif is_array(dataset):
        fields, kind = {0: dataset}, "one"
    elif isinstance(dataset, dict):
        if not dataset or not all(is_array(a) for a in dataset.values()):
            raise TypeError("DataLoader: a dict dataset maps names to arrays, got "
                            + ", ".join(f"{k!r}: {type(v).__name__}" for k, v in dataset.items()))
        fields, kind = dict(dataset), "dict"
    elif isinstance(dataset, (tuple, list)) and dataset and all(is_array(a) for a in dataset):
        # [x, y] is fields; a list of arrays of one shape is a list of examples (torch's).
        if isinstance(dataset, list) and len({tuple(a.shape) for a in dataset}) == 1:
            return None, "examples"
        fields, kind = dict(enumerate(dataset)), "tuple"
    else:
        if not hasattr(dataset, "__getitem__") and not isinstance(dataset, IterableDataset):
            raise TypeError(f"DataLoader: dataset must be an array, a tuple, list or dict of "
                            f"arrays, or support len() and indexing, got "
                            f"{type(dataset).__name__}")
        return None, "examples"
    arrays = {k: numbers(a, f"DataLoader: dataset field {k!r}") for k, a in fields.items()}
    if any(a.ndim == 0 for a in arrays.values()):
        raise ValueError("DataLoader: a dataset array needs at least one dimension")
    if len({len(a) for a in arrays.values()}) != 1:
        shapes = ({k: a.shape for k, a in arrays.items()} if kind == "dict"
                  else [a.shape for a in arrays.values()])
        raise ValueError(f"DataLoader: the arrays of a dataset need the same first dimension, "
                         f"got shapes {shapes}")
    return arrays, kind


class _ArrayView:
    """An array dataset seen as torch sees a dataset: example i (a row, a tuple or a dict of
    rows) by index, and its length; `rows` maps through Subsets."""

    def __init__(self, arrays: dict[Any, np.ndarray], kind: str,
                 rows: Optional[np.ndarray]) -> None:
        self.arrays, self.kind, self.rows = arrays, kind, rows

    def __len__(self) -> int:
        return len(self.rows) if self.rows is not None else len(next(iter(self.arrays.values())))

    def batch(self, idx: np.ndarray) -> Any:
        """default_collate of the examples `idx`, cut from the arrays at once."""
        rows = self.rows[idx] if self.rows is not None else idx
        fields = {k: to_tensor(a[rows], f"DataLoader: dataset field {k!r}")
                  for k, a in self.arrays.items()}
        return (fields[0] if self.kind == "one" else fields if self.kind == "dict"
                else list(fields.values()))

    def __getitem__(self, i: int) -> Any:
        row = self.rows[i] if self.rows is not None else i
        fields = {k: a[row] for k, a in self.arrays.items()}
        return (fields[0] if self.kind == "one" else fields if self.kind == "dict"
                else tuple(fields.values()))


class _Fetcher:
    """Makes the batches, in the main process or a worker: the examples of a batch's indices
    collated, or the next batch of an iterable dataset's stream."""

    def __init__(self, dataset: Any, collate_fn: Callable[[Any], Any], batching: bool,
                 batch_size: Optional[int], drop_last: bool) -> None:
        self.dataset, self.collate_fn, self.batching = dataset, collate_fn, batching
        self.batch_size, self.drop_last = batch_size, drop_last
        self.view: Optional[_ArrayView] = None
        if not isinstance(dataset, IterableDataset):
            base, rows = dataset, None  # Subsets (of Subsets) of arrays: composed rows
            while isinstance(base, Subset):
                picked = np.asarray(base.indices, dtype=np.int64).reshape(-1)
                rows = picked if rows is None else picked[rows]
                base = base.dataset
            arrays, kind = _as_arrays(base)
            if arrays is not None:
                self.view = _ArrayView(arrays, kind, rows)
        self.fast = self.view is not None and collate_fn is default_collate
        # The examples (and their count) come from the arrays for onemodel's array forms,
        # else from the dataset.
        self.source = (self.view if self.view is not None and not isinstance(
            dataset, (TensorDataset, Subset)) else dataset)

    def fetch(self, indices: Any, key: int) -> Any:
        """The batch of `indices` (one index when batching is off), read with the default
        generator at `key` (the arrays' path draws nothing)."""
        if self.fast:
            assert self.view is not None
            return self.view.batch(np.asarray(indices, dtype=np.int64))
        saved = default_generator.state
        default_generator.state = key
        try:
            return self._collated(indices)
        finally:
            default_generator.state = saved

    def _collated(self, indices: Any) -> Any:
        if not self.batching:
            return self.collate_fn(self.source[indices])
        getitems = getattr(self.source, "__getitems__", None)
        examples = getitems(indices) if callable(getitems) else [self.source[i] for i in indices]
        return self.collate_fn(examples)

    def batches(self) -> Iterator[Any]:
        """The batches of one pass over an iterable dataset."""
        stream = iter(self.dataset)
        if not self.batching:
            yield from map(self.collate_fn, stream)
            return
        size = self.batch_size
        assert size is not None  # an iterable dataset is batched by batch_size alone
        while chunk := list(itertools.islice(stream, size)):
            if len(chunk) < size and self.drop_last:
                return
            yield self.collate_fn(chunk)


def _flag(name: str, value: Any) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"DataLoader: {name} must be True or False, got {value!r}")
    return bool(value)


class DataLoader:
    """torch.utils.data.DataLoader (see the module notes for onemodel's order, sharding and
    resume)."""

    def __init__(self, dataset: Any, batch_size: Optional[int] = 1,
                 shuffle: Optional[bool] = None, sampler: Any = None, batch_sampler: Any = None,
                 num_workers: int = 0, collate_fn: Optional[Callable[[Any], Any]] = None,
                 pin_memory: bool = False, drop_last: bool = False, timeout: float = 0,
                 worker_init_fn: Optional[Callable[[int], None]] = None,
                 multiprocessing_context: Any = None, generator: Optional[Generator] = None,
                 *, prefetch_factor: Optional[int] = None, persistent_workers: bool = False,
                 pin_memory_device: str = "", in_order: bool = True, seed: int = 0,
                 rank: int = 0, world_size: int = 1) -> None:
        owner = "DataLoader"
        self.num_workers = check_integer(owner, "num_workers", num_workers, 0)
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout >= 0:
            raise ValueError(f"{owner}: timeout must be a number >= 0 (seconds), got "
                             f"{timeout!r}")
        if prefetch_factor is not None:
            if not self.num_workers:
                raise ValueError(f"{owner}: prefetch_factor can only be given with "
                                 "num_workers > 0 (it counts batches each worker prepares "
                                 "ahead); leave it None for num_workers=0")
            check_integer(owner, "prefetch_factor", prefetch_factor, 1)
        self.prefetch_factor = (prefetch_factor if prefetch_factor is not None
                                else 2 if self.num_workers else None)
        self.persistent_workers = _flag("persistent_workers", persistent_workers)
        if self.persistent_workers and not self.num_workers:
            raise ValueError(f"{owner}: persistent_workers=True needs num_workers > 0")
        self.pin_memory = _flag("pin_memory", pin_memory)  # nothing to pin on a CPU
        self.pin_memory_device, self.in_order = pin_memory_device, _flag("in_order", in_order)
        self.drop_last = _flag("drop_last", drop_last)
        if shuffle is not None:
            _flag("shuffle", shuffle)
        self.world_size = check_integer(owner, "world_size", world_size, 1)
        self.rank = check_integer(owner, "rank", rank, 0)
        if self.rank >= self.world_size:
            raise ValueError(f"{owner}: rank {rank} is not below world_size {world_size}")
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
            raise ValueError(f"{owner}: seed must be an integer, got {seed!r}")
        if generator is not None:
            if not isinstance(generator, Generator):
                raise TypeError(f"{owner}: generator must be an onemodel.Generator, got "
                                f"{type(generator).__name__}")
            if seed:
                raise ValueError(f"{owner}: give seed or generator, not both")
        self.timeout, self.worker_init_fn = timeout, worker_init_fn
        self.multiprocessing_context = multiprocessing_context
        if worker_init_fn is not None and not callable(worker_init_fn):
            raise TypeError(f"{owner}: worker_init_fn must be callable, got "
                            f"{type(worker_init_fn).__name__}")

        iterable = isinstance(dataset, IterableDataset)
        if iterable:
            for name, value in (("shuffle", shuffle), ("sampler", sampler),
                                ("batch_sampler", batch_sampler)):
                if value not in (None, False):
                    raise ValueError(f"{owner} with IterableDataset: expected unspecified "
                                     f"{name} option, but got {name}={value!r}")
            if self.world_size > 1:
                raise ValueError(f"{owner}: rank and world_size shard a map-style dataset; an "
                                 "IterableDataset splits its stream itself")
        if sampler is not None and shuffle:
            raise ValueError(f"{owner}: sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or self.drop_last:
                raise ValueError(f"{owner}: batch_sampler option is mutually exclusive with "
                                 "batch_size, shuffle, sampler, and drop_last")
            batch_size = None
        elif batch_size is None:
            if self.drop_last:
                raise ValueError(f"{owner}: batch_size=None option disables auto-batching and "
                                 "is mutually exclusive with drop_last")
        else:
            batch_size = check_integer(owner, "batch_size", batch_size, 1)
        self.dataset = dataset
        self.batch_size = batch_size
        batching = batch_size is not None or batch_sampler is not None
        self.collate_fn = collate_fn if collate_fn is not None else (
            default_collate if batching else default_convert)
        self._fetcher = _Fetcher(dataset, self.collate_fn, batching, batch_size, self.drop_last)
        # The loader's own shuffling draws from a generator it sets per epoch.
        self._order_generator: Optional[Generator] = None
        if sampler is None and not iterable:
            if shuffle:
                self._order_generator = Generator()
                sampler = RandomSampler(self._fetcher.source, generator=self._order_generator)
            else:
                sampler = SequentialSampler(self._fetcher.source)
        if batch_size is not None and batch_sampler is None and not iterable:
            batch_sampler = BatchSampler(sampler, batch_size, self.drop_last)
        self.sampler, self.batch_sampler = sampler, batch_sampler
        if self.world_size > 1:
            self._count()  # sharding needs the epoch's length
        # The order's seed; a generator gives it by one draw (torch's loader draws from it too).
        self.seed = generator.next_u64() if generator is not None else int(seed)
        self.generator = generator
        self._pool: Optional[WorkerPool] = None
        self.epoch = 0
        self.position = 0

    @property
    def _index_sampler(self) -> Any:
        return self.batch_sampler if self.batch_sampler is not None else self.sampler

    # -- the schedule of an epoch ---------------------------------------------------------------
    def _count(self) -> Optional[int]:
        """Global batches an epoch (None for an iterable dataset or a sampler without len,
        which only one rank can read)."""
        if isinstance(self.dataset, IterableDataset):
            return None
        try:
            return len(self._index_sampler)
        except TypeError:
            if self.world_size > 1:
                raise ValueError("DataLoader: rank and world_size need a sampler with len()")
            return None

    def __len__(self) -> int:
        """Batches of the current epoch for this rank (all of them when world_size is 1); for
        an IterableDataset, torch's estimate from len(dataset)."""
        if isinstance(self.dataset, IterableDataset):
            n = len(self.dataset)  # type: ignore[arg-type]  # a TypeError without one
            if self.batch_size is None:
                return n
            full, rest = divmod(n, self.batch_size)
            return full + (1 if rest and not self.drop_last else 0)
        count = len(self._index_sampler)
        return len(range((self.rank - self.epoch * count) % self.world_size, count,
                         self.world_size))

    def shard(self, rank: int, world_size: int) -> None:
        """Makes this loader rank `rank` of `world_size` (the Trainer does it under mpiexec)."""
        world_size = check_integer("DataLoader.shard", "world_size", world_size, 1)
        rank = check_integer("DataLoader.shard", "rank", rank, 0)
        if rank >= world_size:
            raise ValueError(f"DataLoader.shard: rank {rank} is not below world_size "
                             f"{world_size}")
        self.rank, self.world_size = rank, world_size
        if world_size > 1:
            self._count()

    def set_epoch(self, epoch: int) -> None:
        """Starts epoch `epoch` from its first batch."""
        self.epoch = check_integer("DataLoader.set_epoch", "epoch", epoch, 0)
        self.position = 0

    def _batch_key(self, epoch: int, k: int) -> int:
        """The default generator's state while batch k of `epoch` is read."""
        return mix((epoch_key(self.seed ^ _BATCH_SALT, epoch) + k) & MASK64)

    # -- iteration --------------------------------------------------------------------------------
    def __iter__(self) -> Iterator[Any]:
        """The remaining batches of the current epoch; at its end the loader moves to the next
        epoch, so the next loop over it runs that one."""
        epoch, count, world = self.epoch, self._count(), self.world_size
        if self._order_generator is not None:
            self._order_generator.state = epoch_key(self.seed, epoch)
        jobs: Optional[Iterator[tuple[int, Any]]] = None
        if not isinstance(self.dataset, IterableDataset):
            share = range(0) if count is None else range(
                (self.rank - epoch * count) % world, count, world)
            jobs = ((k, idx) for k, idx in enumerate(self._index_sampler)
                    if k >= self.position and (count is None or k in share))
        skip = self.position if jobs is None else 0  # a stream is read again up to there
        stream = self._produce(epoch, jobs)
        try:
            for k, batch in stream:
                if k < skip:
                    continue
                if count is None:
                    self.position = k + 1
                else:
                    # The position counts the batches the group has consumed: those before
                    # the end of this batch's round of W, so a checkpoint taken after a step
                    # resumes at the next one.
                    self.epoch, self.position = divmod(((epoch * count + k) // world + 1)
                                                       * world, count)
                yield batch
            if self.epoch == epoch:
                self.epoch, self.position = epoch + 1, 0
        finally:
            stream.close()

    def _produce(self, epoch: int, jobs: Optional[Iterator[tuple[int, Any]]]
                 ) -> Generator_[tuple[int, Any], None, None]:
        """(k, batch k) for the `jobs` (k, indices) of a map-style dataset, in order, or for
        one pass over an iterable dataset (jobs None)."""
        if not self.num_workers:
            if jobs is None:
                yield from enumerate(self._fetcher.batches())
            else:
                for k, idx in jobs:
                    yield k, self._fetcher.fetch(idx, self._batch_key(epoch, k))
            return
        pool = self._pool
        if pool is None or pool.closed:
            pool = WorkerPool(self._fetcher, self.num_workers,
                              epoch_key(self.seed ^ _WORKER_SALT, epoch), self.worker_init_fn,
                              self.multiprocessing_context, float(self.timeout))
            if self.persistent_workers:
                self._pool = pool
                weakref.finalize(self, pool.close)
        depth = int(self.prefetch_factor or 2)
        if jobs is None:
            batches: Iterator[tuple[int, Any]] = enumerate(
                pool.run(itertools.repeat(("next",)), depth))
        else:
            sent: collections.deque = collections.deque()  # the k of each task handed out

            def payloads(jobs: Iterator[tuple[int, Any]]) -> Iterator[tuple]:
                for k, idx in jobs:
                    sent.append(k)
                    yield "map", idx, self._batch_key(epoch, k)

            batches = ((sent.popleft(), batch) for batch in pool.run(payloads(jobs), depth))
        try:
            yield from batches
        finally:
            if not self.persistent_workers:
                pool.close()

    def state_dict(self) -> dict[str, int]:
        """{"epoch", "position"}: integers; a finished epoch reads as the next one's start."""
        count = self._count()
        if count is not None and self.position >= count:
            return {"epoch": self.epoch + 1, "position": 0}
        return {"epoch": self.epoch, "position": self.position}

    def load_state_dict(self, state: Mapping[str, int]) -> None:
        epoch = check_integer("DataLoader.load_state_dict", "epoch", state.get("epoch"), 0)
        position = check_integer("DataLoader.load_state_dict", "position",
                                 state.get("position"), 0)
        count = self._count()
        if count is not None:
            if position > count:
                raise ValueError(f"DataLoader.load_state_dict: position {position} is beyond "
                                 f"the {count} batches of an epoch")
            if (epoch * count + position) % self.world_size:
                raise ValueError(f"DataLoader.load_state_dict: position {position} of epoch "
                                 f"{epoch} (global batch {epoch * count + position}) is not on "
                                 f"a boundary of {self.world_size} workers: this state cannot "
                                 "resume at this worker count without skipping or repeating "
                                 "data")
        self.epoch, self.position = epoch, position

    def __repr__(self) -> str:
        return (f"DataLoader({type(self.dataset).__name__}, batch_size={self.batch_size}, "
                f"sampler={type(self.sampler).__name__}, num_workers={self.num_workers}, "
                f"rank={self.rank}/{self.world_size}, epoch={self.epoch}, "
                f"position={self.position})")
