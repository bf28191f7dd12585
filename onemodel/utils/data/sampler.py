"""torch.utils.data.sampler: the index samplers, with torch's arguments, lengths and errors.

The random ones draw from onemodel's counter-based generators (om.randperm, om.randint,
om.multinomial), so their orders are the same on every machine but not torch's. As torch's, a
RandomSampler without a generator takes a fresh seed from the default generator on every pass,
and one with a generator continues its stream. The DataLoader's own shuffling hands its sampler
a generator set per epoch, which makes its order a function of (seed, epoch): epoch_order.
"""
from __future__ import annotations

from typing import Any, Iterator, Optional, Sequence

import numpy as np

from ...random import MASK64, Generator, default_generator, mix, multinomial, randint, randperm

_EPOCH_SALT = 0x9E3779B97F4A7C15


def epoch_key(seed: int, epoch: int) -> int:
    """The generator state from which epoch `epoch` of a loader seeded `seed` is drawn."""
    return mix(mix((seed & MASK64) ^ _EPOCH_SALT) ^ (epoch & MASK64))


def epoch_order(n: int, seed: int, epoch: int) -> np.ndarray:
    """The permutation of range(n) that a DataLoader(shuffle=True, seed=seed) takes in epoch
    `epoch`: om.randperm(n) drawn from the state epoch_key(seed, epoch)."""
    return randperm(n, generator=Generator(epoch_key(seed, epoch))).numpy()


def _positive(owner: str, name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value <= 0:
        raise ValueError(f"{owner}: {name} should be a positive integer value, but got "
                         f"{name}={value!r}")
    return int(value)


def _boolean(owner: str, name: str, value: Any, error: type = ValueError) -> bool:
    if not isinstance(value, bool):
        raise error(f"{owner}: {name} should be a boolean value, but got {name}={value!r}")
    return value


class Sampler:
    """torch.utils.data.Sampler: iterates over dataset indices (or lists of them)."""

    def __init__(self, data_source: Any = None) -> None:
        pass

    def __iter__(self) -> Iterator[Any]:
        raise NotImplementedError(f"{type(self).__name__} must define __iter__")


class SequentialSampler(Sampler):
    """0, 1, ..., len(data_source) - 1."""

    def __init__(self, data_source: Any) -> None:
        self.data_source = data_source

    def __iter__(self) -> Iterator[int]:
        return iter(range(len(self.data_source)))

    def __len__(self) -> int:
        return len(self.data_source)


_REPLACEMENT_BLOCK = 1024  # indices drawn at a time with replacement


class RandomSampler(Sampler):
    """Without replacement: permutations of the indices (num_samples of them, repeating whole
    permutations when num_samples exceeds the length); with it, num_samples uniform draws."""

    def __init__(self, data_source: Any, replacement: bool = False,
                 num_samples: Optional[int] = None,
                 generator: Optional[Generator] = None) -> None:
        self.data_source = data_source
        self.replacement = _boolean("RandomSampler", "replacement", replacement, TypeError)
        if num_samples is not None:
            _positive("RandomSampler", "num_samples", num_samples)
        if generator is not None and not isinstance(generator, Generator):
            raise TypeError(f"RandomSampler: generator must be an onemodel.Generator, got "
                            f"{type(generator).__name__}")
        self._num_samples = num_samples
        self.generator = generator

    @property
    def num_samples(self) -> int:
        return len(self.data_source) if self._num_samples is None else int(self._num_samples)

    def __iter__(self) -> Iterator[int]:
        n, count = len(self.data_source), self.num_samples
        g = self.generator or Generator(default_generator.next_u64())
        if self.replacement:
            # In blocks, as torch does, so a huge num_samples is drawn as it is consumed; the
            # stream is one draw per index, so the indices are those of one draw of `count`.
            for start in range(0, count, _REPLACEMENT_BLOCK):
                yield from randint(0, n, (min(_REPLACEMENT_BLOCK, count - start),),
                                   generator=g).tolist()
            return
        for _ in range(count // n):
            yield from randperm(n, generator=g).tolist()
        if count % n:
            yield from randperm(n, generator=g).tolist()[:count % n]

    def __len__(self) -> int:
        return self.num_samples


class SubsetRandomSampler(Sampler):
    """The given indices in a random order (randperm of their positions), a new one per pass."""

    def __init__(self, indices: Sequence[int], generator: Optional[Generator] = None) -> None:
        self.indices = indices
        self.generator = generator

    def __iter__(self) -> Iterator[int]:
        for i in randperm(len(self.indices), generator=self.generator).tolist():
            yield self.indices[i]

    def __len__(self) -> int:
        return len(self.indices)


class WeightedRandomSampler(Sampler):
    """num_samples indices drawn with probabilities proportional to `weights` (om.multinomial
    over them in float64)."""

    def __init__(self, weights: Sequence[float], num_samples: int, replacement: bool = True,
                 generator: Optional[Generator] = None) -> None:
        self.num_samples = _positive("WeightedRandomSampler", "num_samples", num_samples)
        self.replacement = _boolean("WeightedRandomSampler", "replacement", replacement)
        w = np.asarray(weights.numpy() if hasattr(weights, "numpy") else weights, np.float64)
        if w.ndim != 1:
            raise ValueError(f"WeightedRandomSampler: weights should be a 1d sequence but given "
                             f"weights have shape {w.shape}")
        self.weights = w
        self.generator = generator

    def __iter__(self) -> Iterator[int]:
        drawn = multinomial(self.weights, self.num_samples, self.replacement,  # type: ignore[arg-type]
                            generator=self.generator)
        return iter(drawn.tolist())

    def __len__(self) -> int:
        return self.num_samples


class BatchSampler(Sampler):
    """Lists of batch_size indices from `sampler`, the last shorter unless drop_last."""

    def __init__(self, sampler: Any, batch_size: int, drop_last: bool) -> None:
        self.batch_size = _positive("BatchSampler", "batch_size", batch_size)
        self.drop_last = _boolean("BatchSampler", "drop_last", drop_last)
        self.sampler = sampler

    def __iter__(self) -> Iterator[list[int]]:
        batch: list[int] = []
        for index in self.sampler:
            batch.append(index)
            if len(batch) == self.batch_size:
                yield batch
                batch = []
        if batch and not self.drop_last:
            yield batch

    def __len__(self) -> int:
        full, rest = divmod(len(self.sampler), self.batch_size)
        return full + (1 if rest and not self.drop_last else 0)
