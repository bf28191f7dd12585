"""torch.utils.data.dataset: the dataset classes and random_split, with torch's meaning.

random_split draws its permutation from onemodel's generator (om.randperm), so a split is the
same on every machine but not torch's.
"""
from __future__ import annotations

import bisect
import itertools
import math
import warnings
from typing import Any, Iterable, Iterator, Optional, Sequence, Union

import numpy as np

from ...random import Generator, randperm, resolve_generator
from ._utils.collate import is_array


def check_integer(owner: str, name: str, value: Any, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
        raise ValueError(f"{owner}: {name} must be an integer >= {low}, got {value!r}")
    return int(value)


class Dataset:
    """torch.utils.data.Dataset: the base of a map-style dataset, whose subclass defines
    __getitem__(i) (an example) and usually __len__; `a + b` concatenates two."""

    def __getitem__(self, index: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__} must define __getitem__")

    def __add__(self, other: "Dataset") -> "ConcatDataset":
        return ConcatDataset([self, other])


class IterableDataset(Dataset):
    """torch.utils.data.IterableDataset: a stream of examples from __iter__. Under
    num_workers > 0 every worker iterates its own copy; get_worker_info() splits the work."""

    def __iter__(self) -> Iterator[Any]:
        raise NotImplementedError(f"{type(self).__name__} must define __iter__")

    def __add__(self, other: Any) -> "ChainDataset":  # type: ignore[override]
        return ChainDataset([self, other])


class TensorDataset(Dataset):
    """torch.utils.data.TensorDataset: example i is (t[i] for t in tensors), all of one
    length. The DataLoader cuts its batches from the arrays at once."""

    def __init__(self, *tensors: Any) -> None:
        if not tensors or not all(is_array(t) for t in tensors):
            raise TypeError("TensorDataset: expected one or more tensors or arrays, got "
                            + ", ".join(type(t).__name__ for t in tensors))
        if len({len(t) for t in tensors}) != 1:
            raise ValueError(f"TensorDataset: the tensors need the same first dimension, got "
                             f"shapes {[tuple(t.shape) for t in tensors]}")
        self.tensors = tensors

    def __getitem__(self, index: Any) -> tuple:
        return tuple(t[index] for t in self.tensors)

    def __len__(self) -> int:
        return len(self.tensors[0])


class StackDataset(Dataset):
    """torch.utils.data.StackDataset: example i is (d[i] for d in args), or {k: d[i]} for the
    keyword datasets, all of one length."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if args and kwargs:
            raise ValueError("StackDataset: give the datasets as positional arguments (tuple "
                             "examples) or as keywords (dict examples), not both")
        datasets = args or tuple(kwargs.values())
        if not datasets:
            raise ValueError("StackDataset: at least one dataset is needed")
        lengths = [len(d) for d in datasets]
        if len(set(lengths)) != 1:
            raise ValueError(f"StackDataset: the datasets need one length, got {lengths}")
        self.datasets: Union[tuple, dict] = args if args else kwargs
        self._length = lengths[0]

    def __getitem__(self, index: Any) -> Any:
        if isinstance(self.datasets, dict):
            return {k: d[index] for k, d in self.datasets.items()}
        return tuple(d[index] for d in self.datasets)

    def __len__(self) -> int:
        return self._length


class ConcatDataset(Dataset):
    """torch.utils.data.ConcatDataset: the examples of each dataset in turn;
    `cumulative_sizes[i]` is the number of examples in datasets[:i + 1]."""

    def __init__(self, datasets: Iterable[Any]) -> None:
        self.datasets = list(datasets)
        if not self.datasets:
            raise ValueError("ConcatDataset: datasets should not be an empty iterable")
        for i, d in enumerate(self.datasets):
            if isinstance(d, IterableDataset):
                raise TypeError(f"ConcatDataset: datasets[{i}] is an IterableDataset, which it "
                                "does not support (ChainDataset chains them)")
        self.cumulative_sizes = list(itertools.accumulate(len(d) for d in self.datasets))

    def __len__(self) -> int:
        return self.cumulative_sizes[-1]

    def __getitem__(self, idx: int) -> Any:
        if idx < 0:
            if -idx > len(self):
                raise ValueError(f"ConcatDataset: index {idx} is out of range for "
                                 f"{len(self)} examples")
            idx += len(self)
        which = bisect.bisect_right(self.cumulative_sizes, idx)
        if which == len(self.datasets):
            raise IndexError(f"ConcatDataset: index {idx} is out of range for {len(self)} "
                             "examples")
        start = self.cumulative_sizes[which - 1] if which else 0
        return self.datasets[which][idx - start]


class ChainDataset(IterableDataset):
    """torch.utils.data.ChainDataset: the streams of the iterable datasets one after another."""

    def __init__(self, datasets: Iterable[Any]) -> None:
        self.datasets = list(datasets)

    def __iter__(self) -> Iterator[Any]:
        for i, d in enumerate(self.datasets):
            if not isinstance(d, IterableDataset):
                raise TypeError(f"ChainDataset: datasets[{i}] ({type(d).__name__}) is not an "
                                "IterableDataset")
            yield from d

    def __len__(self) -> int:
        return sum(len(d) for d in self.datasets)


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

    def __getitems__(self, indices: list) -> list:
        if callable(getattr(self.dataset, "__getitems__", None)):
            return self.dataset.__getitems__([self.indices[i] for i in indices])
        return [self.dataset[self.indices[i]] for i in indices]

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
        counts = [check_integer("random_split", f"lengths[{i}]", x, 0)
                  for i, x in enumerate(lengths)]
    if sum(counts) != n:
        raise ValueError(f"random_split: lengths {counts} sum to {sum(counts)}, not to "
                         f"len(dataset) = {n}")
    order = randperm(n, generator=resolve_generator(generator)).tolist()
    return [Subset(dataset, order[end - c:end])
            for end, c in zip(itertools.accumulate(counts), counts)]
