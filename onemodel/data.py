"""DataLoader: shuffled, sharded, prefetched batches whose order is the same on every machine.

The order of epoch e is a function of (seed, e) alone: every example gets a 64-bit key from a
SplitMix64 stream seeded by mix(mix(seed ^ C0) ^ e), and the examples are taken in the stable
order of their keys (an unbiased permutation, vectorised, with no platform-dependent RNG).

Sharding is by batch, not by example, and does not depend on the worker count: the epochs
form one stream of global batches (epoch 0's batches 0 .. B-1, then epoch 1's, ...), fixed by
(seed, epoch) alone, and rank r of W takes the stream positions p with p mod W = r. A step of M
micro-batches (W dividing M) covers M consecutive positions, so W workers together see exactly
the micro-batches one worker accumulating M sees, in the same global positions, whatever W is,
and no batch is dropped unless drop_last=True (a step may span the end of an epoch, as one
worker's does). The ranks' shares of an epoch may differ by one batch.

Batches over arrays are cut by one fancy index per array. An array is a numpy array, a Tensor or
anything numpy can read as one (a torch tensor); a dataset of arrays is one array, a tuple or a
dict of them, or a list of them as `[x, y]` (arrays with one first dimension and different
shapes: a list of arrays that all have one shape is a list of examples, as in PyTorch). Any
other dataset (with __len__ and __getitem__) is read per example and stacked field by field.
One array yields one Tensor per batch; a tuple or list of arrays, or examples that are tuples
or lists, yield tuples of Tensors, and dicts yield dicts (PyTorch's default collation). Floats
become float32, integers int64 (int32 is kept), as om.from_numpy; anything else (strings,
objects, examples that do not stack) is refused naming the example and field.

The position (epoch, global batches of it already consumed by all ranks together) is what
state_dict() holds, as integers, so it fits a checkpoint's extra, reads the same on every rank
after a step, and a resumed run sees exactly the remaining batches at any W for which the
position falls on a boundary of W workers (load_state_dict refuses the others). Batches
are prepared `prefetch` ahead by a background thread; breaking out of the loop stops it, and an
exception raised while reading the dataset is raised in the consuming thread.
"""
from __future__ import annotations

import itertools
import math
import queue
import threading
import warnings
from typing import Any, Iterator, Mapping, Optional, Sequence, Union

import numpy as np

from .random import MASK64, Generator, mix, randperm, resolve_generator, splitmix_blocks
from .tensor import Tensor, _canonical

_C0 = 0x9E3779B97F4A7C15


def _integer(owner: str, name: str, value: Any, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
        raise ValueError(f"{owner}: {name} must be an integer >= {low}, got {value!r}")
    return int(value)


def epoch_order(n: int, seed: int, epoch: int) -> np.ndarray:
    """The permutation of range(n) used for epoch `epoch` of a loader seeded with `seed`."""
    key = mix(mix((seed & MASK64) ^ _C0) ^ (epoch & MASK64))
    keys = np.empty(n, np.uint64)
    for start, bits in splitmix_blocks(key, n):
        keys[start:start + len(bits)] = bits
    return np.argsort(keys, kind="stable")


def _to_tensor(arr: np.ndarray, what: str) -> Tensor:
    return Tensor._wrap(_canonical(arr, f"DataLoader: {what}"))


_KINDS = {"U": "strings", "S": "bytes", "O": "Python objects", "c": "complex numbers",
          "M": "dates", "m": "time spans", "V": "records"}


def _is_array(value: Any) -> bool:
    """An array of a dataset: numpy's, a Tensor, or one that numpy reads (a torch tensor)."""
    return isinstance(value, (np.ndarray, Tensor)) or (
        hasattr(value, "__array__") and hasattr(value, "shape") and len(value.shape) > 0)


def _array(value: Any, what: str) -> np.ndarray:
    """The numbers of an array, example or field, or a TypeError that names it."""
    if isinstance(value, Tensor):
        return value._data
    if hasattr(value, "detach") and hasattr(value, "numpy"):  # a torch tensor
        value = value.detach().cpu().numpy()
    try:
        arr = np.asarray(value)
    except (TypeError, ValueError) as e:
        raise TypeError(f"DataLoader: {what} ({type(value).__name__}) is not an array of "
                        f"numbers: {e}") from None
    if arr.dtype.kind not in "biuf":
        held = _KINDS.get(arr.dtype.kind, "values")
        raise TypeError(f"DataLoader: {what} holds {held} (a {type(value).__name__} of dtype "
                        f"{arr.dtype}); a batch holds float, integer or bool numbers")
    return arr


def _stack(values: list, what: str) -> np.ndarray:
    arrays = [_array(v, f"{what} of example {i}") for i, v in enumerate(values)]
    shapes = {a.shape for a in arrays}
    if len(shapes) > 1:
        first = arrays[0].shape
        other = next(i for i, a in enumerate(arrays) if a.shape != first)
        raise ValueError(f"DataLoader: {what} has shape {first} in one example of the batch and "
                         f"{arrays[other].shape} in another: examples must stack (pad them, or "
                         "use batch_size=1)")
    return np.stack(arrays)


class Dataset:
    """torch.utils.data.Dataset: the base of a map-style dataset, whose subclass defines
    __getitem__(i) (an example) and __len__; the DataLoader reads it per example."""

    def __getitem__(self, index: int) -> Any:
        raise NotImplementedError(f"{type(self).__name__} must define __getitem__")


class TensorDataset(Dataset):
    """torch.utils.data.TensorDataset: example i is (t[i] for t in tensors), all of one
    length. The DataLoader cuts its batches from the arrays at once, as from a tuple of them."""

    def __init__(self, *tensors: Any) -> None:
        if not tensors or not all(_is_array(t) for t in tensors):
            raise TypeError("TensorDataset: expected one or more tensors or arrays, got "
                            + ", ".join(type(t).__name__ for t in tensors))
        if len({len(t) for t in tensors}) != 1:
            raise ValueError(f"TensorDataset: the tensors need the same first dimension, got "
                             f"shapes {[tuple(t.shape) for t in tensors]}")
        self.tensors = tensors

    def __getitem__(self, index: int) -> tuple:
        return tuple(t[index] for t in self.tensors)

    def __len__(self) -> int:
        return len(self.tensors[0])


class Subset(Dataset):
    """torch.utils.data.Subset: example i is dataset[indices[i]]. The DataLoader batches a
    Subset of an array dataset from its arrays, any other per example."""

    def __init__(self, dataset: Any, indices: Sequence[int]) -> None:
        self.dataset = dataset
        self.indices = indices

    def __getitem__(self, idx: Any) -> Any:
        if isinstance(idx, list):
            return self.dataset[[self.indices[i] for i in idx]]
        return self.dataset[self.indices[idx]]

    def __len__(self) -> int:
        return len(self.indices)


def random_split(dataset: Any, lengths: Sequence[Union[int, float]],
                 generator: Optional[Generator] = None) -> list[Subset]:
    """torch.utils.data.random_split: disjoint Subsets of the given lengths covering `dataset`,
    in the order of randperm(len(dataset), generator) (the default generator when None), so the
    split is the same on every machine (not torch's). Lengths are integers summing to
    len(dataset), or fractions summing to 1: each gets floor(n·fraction), and the remainder goes
    one at a time to the splits in order, round-robin (torch's rule)."""
    try:
        lengths = list(lengths)
    except TypeError:
        raise ValueError(f"random_split: lengths must be a list of lengths or fractions, got "
                         f"{lengths!r}") from None
    for i, x in enumerate(lengths):
        if isinstance(x, bool) or not isinstance(x, (int, float, np.integer, np.floating)):
            raise ValueError(f"random_split: lengths[{i}] must be a number, got {x!r}")
    n = len(dataset)
    if math.isclose(sum(lengths), 1) and sum(lengths) <= 1:  # fractions: torch's test, exactly
        for i, f in enumerate(lengths):
            if not 0 <= f <= 1:
                raise ValueError(f"random_split: lengths[{i}] = {f!r} is not a fraction "
                                 "between 0 and 1")
        counts = [math.floor(n * f) for f in lengths]
        for i in range(n - sum(counts)):  # the remainder: one each, round-robin
            counts[i % len(counts)] += 1
        for i, c in enumerate(counts):
            if c == 0:
                warnings.warn(f"random_split: split {i} is empty", stacklevel=2)
    else:
        counts = [_integer("random_split", f"lengths[{i}]", x, 0) for i, x in enumerate(lengths)]
    if sum(counts) != n:
        raise ValueError(f"random_split: lengths {counts} sum to {sum(counts)}, not to "
                         f"len(dataset) = {n}")
    order = randperm(n, generator=resolve_generator(generator)).tolist()
    return [Subset(dataset, order[end - c:end])
            for end, c in zip(itertools.accumulate(counts), counts)]


class DataLoader:
    """Iterates over `dataset` in batches of `batch_size` (see the module notes)."""

    def __init__(self, dataset: Any, batch_size: int, shuffle: bool = True, seed: int = 0,
                 drop_last: bool = False, rank: int = 0, world_size: int = 1,
                 prefetch: int = 2) -> None:
        owner = "DataLoader"
        self.batch_size = _integer(owner, "batch_size", batch_size, 1)
        self.world_size = _integer(owner, "world_size", world_size, 1)
        self.rank = _integer(owner, "rank", rank, 0)
        if self.rank >= self.world_size:
            raise ValueError(f"{owner}: rank {rank} is not below world_size {world_size}")
        self.prefetch = _integer(owner, "prefetch", prefetch, 0)
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
            raise ValueError(f"{owner}: seed must be an integer, got {seed!r}")
        self.seed = int(seed)
        self.shuffle = bool(shuffle)
        self.drop_last = bool(drop_last)
        self.dataset = dataset
        # A Subset (of a Subset ...) of an array dataset is batched from the arrays too, its
        # examples' rows looked up through the composed indices.
        base, self._rows = dataset, None
        while isinstance(base, Subset):
            rows = np.asarray(base.indices, dtype=np.int64).reshape(-1)
            self._rows = rows if self._rows is None else rows[self._rows]
            base = base.dataset
        self._arrays, self._kind = self._as_arrays(base)
        if self._arrays is None:
            self._rows = None  # read per example, through the Subset itself
        self._n = (len(self._rows) if self._rows is not None else
                   len(next(iter(self._arrays.values()))) if self._arrays is not None
                   else len(dataset))
        self.epoch = 0
        self.position = 0

    @staticmethod
    def _as_arrays(dataset: Any) -> tuple[Optional[dict[Any, np.ndarray]], str]:
        """The arrays of an array dataset by field (index or name) and how a batch holds them
        ("one", "tuple" or "dict"); or (None, "examples") for a dataset read per example."""
        if isinstance(dataset, TensorDataset):
            fields, kind = dict(enumerate(dataset.tensors)), "tuple"
        elif _is_array(dataset):
            fields, kind = {0: dataset}, "one"
        elif isinstance(dataset, dict):
            if not dataset or not all(_is_array(a) for a in dataset.values()):
                raise TypeError("DataLoader: a dict dataset maps names to arrays, got "
                                + ", ".join(f"{k!r}: {type(v).__name__}"
                                            for k, v in dataset.items()))
            fields, kind = dict(dataset), "dict"
        elif isinstance(dataset, (tuple, list)) and dataset and all(_is_array(a)
                                                                    for a in dataset):
            # [x, y] is fields; a list of arrays of one shape is a list of examples (PyTorch).
            if isinstance(dataset, list) and len({tuple(a.shape) for a in dataset}) == 1:
                return None, "examples"
            fields, kind = dict(enumerate(dataset)), "tuple"
        else:
            if not hasattr(dataset, "__len__") or not hasattr(dataset, "__getitem__"):
                raise TypeError(f"DataLoader: dataset must be an array, a tuple, list or dict of "
                                f"arrays, or support len() and indexing, got "
                                f"{type(dataset).__name__}")
            return None, "examples"
        arrays = {k: _array(a, f"dataset field {k!r}") for k, a in fields.items()}
        if any(a.ndim == 0 for a in arrays.values()):
            raise ValueError("DataLoader: a dataset array needs at least one dimension")
        lengths = {len(a) for a in arrays.values()}
        if len(lengths) != 1:
            shapes = ({k: a.shape for k, a in arrays.items()} if kind == "dict"
                      else [a.shape for a in arrays.values()])
            raise ValueError(f"DataLoader: the arrays of a dataset need the same first "
                             f"dimension, got shapes {shapes}")
        return arrays, kind

    # -- the schedule of an epoch ---------------------------------------------------------------
    def _global_batches(self) -> int:
        full, rest = divmod(self._n, self.batch_size)
        return full + (1 if rest and not self.drop_last else 0)

    def __len__(self) -> int:
        """Batches of the current epoch for this rank (all of them when world_size is 1)."""
        return len(self._share(self.epoch))

    def _share(self, epoch: int) -> range:
        """The global batches of `epoch` that are this rank's: stream position mod W = rank."""
        count = self._global_batches()
        return range((self.rank - epoch * count) % self.world_size, count, self.world_size)

    def shard(self, rank: int, world_size: int) -> None:
        """Makes this loader rank `rank` of `world_size` (the Trainer does it under mpiexec)."""
        world_size = _integer("DataLoader.shard", "world_size", world_size, 1)
        rank = _integer("DataLoader.shard", "rank", rank, 0)
        if rank >= world_size:
            raise ValueError(f"DataLoader.shard: rank {rank} is not below world_size "
                             f"{world_size}")
        self.rank, self.world_size = rank, world_size

    def set_epoch(self, epoch: int) -> None:
        """Starts epoch `epoch` from its first batch."""
        self.epoch = _integer("DataLoader.set_epoch", "epoch", epoch, 0)
        self.position = 0

    def _indices(self, order: Optional[np.ndarray], k: int) -> np.ndarray:
        start = k * self.batch_size
        stop = min(start + self.batch_size, self._n)
        return order[start:stop] if order is not None else np.arange(start, stop)

    def _batch(self, idx: np.ndarray) -> Any:
        if self._arrays is not None:
            if self._rows is not None:
                idx = self._rows[idx]
            fields = {k: _to_tensor(a[idx], f"dataset field {k!r}")
                      for k, a in self._arrays.items()}
            return (fields[0] if self._kind == "one" else fields if self._kind == "dict"
                    else tuple(fields.values()))
        samples = [self.dataset[int(i)] for i in idx]
        first = samples[0]
        if isinstance(first, (tuple, list, dict)):
            keys = list(first) if isinstance(first, dict) else list(range(len(first)))
            for i, s in enumerate(samples):
                if type(s) is not type(first) or (list(s) if isinstance(s, dict)
                                                  else list(range(len(s)))) != keys:
                    raise ValueError(f"DataLoader: example {int(idx[i])} has fields "
                                     f"{_describe(s)}, the first of its batch {_describe(first)}")
            fields = {k: _to_tensor(_stack([s[k] for s in samples], f"field {k!r}"),
                                    f"field {k!r}") for k in keys}
            return fields if isinstance(first, dict) else tuple(fields.values())
        return _to_tensor(_stack(samples, "the example"), "the example")

    # -- iteration --------------------------------------------------------------------------------
    def __iter__(self) -> Iterator[Any]:
        """The remaining batches of the current epoch; at its end the loader moves to the next
        epoch, so the next loop over it runs that one."""
        epoch, count, world = self.epoch, self._global_batches(), self.world_size
        share = [k for k in self._share(epoch) if k >= self.position]
        order = epoch_order(self._n, self.seed, epoch) if self.shuffle else None
        batches = (self._batch(self._indices(order, k)) for k in share)
        source = _Prefetcher(batches, self.prefetch) if self.prefetch else None
        try:
            for k in share:
                batch = source.get() if source else next(batches)
                # The position counts the batches the group has consumed: those before the
                # end of this batch's round of W, so a checkpoint taken after a step resumes at
                # the next one.
                self.epoch, self.position = divmod(((epoch * count + k) // world + 1) * world,
                                                   count)
                yield batch
            if self.epoch == epoch:
                self.epoch, self.position = epoch + 1, 0
        finally:
            if source:
                source.close()

    def state_dict(self) -> dict[str, int]:
        """{"epoch", "position"}: integers; a finished epoch reads as the next one's start."""
        if self.position >= self._global_batches():
            return {"epoch": self.epoch + 1, "position": 0}
        return {"epoch": self.epoch, "position": self.position}

    def load_state_dict(self, state: Mapping[str, int]) -> None:
        epoch = _integer("DataLoader.load_state_dict", "epoch", state.get("epoch"), 0)
        position = _integer("DataLoader.load_state_dict", "position", state.get("position"), 0)
        count = self._global_batches()
        if position > count:
            raise ValueError(f"DataLoader.load_state_dict: position {position} is beyond the "
                             f"{count} batches of an epoch")
        if (epoch * count + position) % self.world_size:
            raise ValueError(f"DataLoader.load_state_dict: position {position} of epoch {epoch} "
                             f"(global batch {epoch * count + position}) is not on a boundary "
                             f"of {self.world_size} workers: this state cannot resume at this "
                             "worker count without skipping or repeating data")
        self.epoch, self.position = epoch, position

    def __repr__(self) -> str:
        return (f"DataLoader({self._n} examples, batch_size={self.batch_size}, "
                f"shuffle={self.shuffle}, rank={self.rank}/{self.world_size}, "
                f"epoch={self.epoch}, position={self.position})")


def _describe(example: Any) -> str:
    if isinstance(example, dict):
        return f"dict with keys {list(example)}"
    if isinstance(example, (tuple, list)):
        return f"{type(example).__name__} of {len(example)}"
    return type(example).__name__


class _Prefetcher:
    """Runs an iterator in a daemon thread, at most `depth` items ahead of the consumer."""

    def __init__(self, items: Iterator[Any], depth: int) -> None:
        self._queue: queue.Queue = queue.Queue(maxsize=depth)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(items,), daemon=True,
                                        name="onemodel-prefetch")
        self._thread.start()

    def _run(self, items: Iterator[Any]) -> None:
        try:
            for item in items:
                if not self._put((True, item)):
                    return
        except BaseException as exc:  # handed to the consumer, which raises it
            self._put((False, exc))

    def _put(self, entry: tuple) -> bool:
        """Puts unless the consumer has gone; False if it has."""
        while not self._stop.is_set():
            try:
                self._queue.put(entry, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    def get(self) -> Any:
        ok, item = self._queue.get()
        if not ok:
            raise item
        return item

    def close(self) -> None:
        self._stop.set()
        self._thread.join()

