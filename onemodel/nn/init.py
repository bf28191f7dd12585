"""Initialisation of training.txt 1.1: which generator a module draws from, and the draws.

A layer built with `generator=g` draws from g and advances it; with `seed=s` from a fresh
Generator(s); with neither from `onemodel.default_generator` (api.md "Randomness"), so two
unseeded layers of one shape start different and a program that seeds once is reproducible.
A container resolves its generator once with `resolve_generator` and passes it to its children
in construction order, so they draw one after another from one stream:

    g = resolve_generator(generator, seed)
    self.q = Linear(d, d, generator=g)
    self.k = Linear(d, d, generator=g)
"""
from __future__ import annotations

import math
from typing import Optional, Sequence

import numpy as np

from .. import random
from ..random import Generator
from .module import Parameter


def resolve_generator(generator: Optional[Generator], seed: Optional[int] = None) -> Generator:
    """`generator` itself when given, else Generator(seed), else the default generator."""
    if generator is None:
        return random.default_generator if seed is None else Generator(seed)
    if not isinstance(generator, Generator):
        raise TypeError(f"generator must be an onemodel.Generator, got "
                        f"{type(generator).__name__}")
    return generator


def fan_in_bound(fan_in: int) -> np.float32:
    """float32(1 / sqrt(double(fan_in))): the bound of Linear and Conv2d (IEEE square root)."""
    if fan_in <= 0:
        raise ValueError(f"fan_in_bound: fan_in must be positive, got {fan_in}")
    return np.float32(1.0 / math.sqrt(float(fan_in)))


EMBEDDING_BOUND = np.float32(math.sqrt(3.0))  # Uniform(-√3, √3) has unit variance


def uniform_parameter(shape: Sequence[int], bound: np.float32,
                      generator: Generator) -> Parameter:
    """A Parameter drawn from Uniform(-bound, +bound) in row-major order, advancing generator."""
    bound = np.float32(bound)
    return Parameter(generator.uniform(-bound, bound, tuple(shape)))
