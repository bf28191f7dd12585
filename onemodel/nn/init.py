"""Initialisation: which generator a module draws from, and the draws.

A layer built with `generator=g` draws from g and advances it; with `seed=s` from a fresh
Generator(s); with neither from `onemodel.default_generator`, so two
unseeded layers of one shape start different and a program that seeds once is reproducible.
A container resolves its generator once with `resolve_generator` and passes it to its children
in construction order, so they draw one after another from one stream:

    g = resolve_generator(generator, seed)
    self.q = Linear(d, d, generator=g)
    self.k = Linear(d, d, generator=g)
"""
from __future__ import annotations

import math
import warnings
from typing import Any, Callable, Optional, Sequence

import numpy as np

from ..autograd import no_grad

# torch.nn.init's uniform_ and normal_, and the layers' generator rule, live in random (so that
# Tensor.uniform_ and Tensor.normal_ can call them); re-exported here under their torch names
from ..random import (  # noqa: F401
    Generator,
    _check_std,
    _check_tensor,
    _fill,
    _float_target,
    normal_,
    resolve_generator,
    standard_normals,
    uniform_,
)
from ..tensor import Tensor
from .module import Parameter


def fan_in_bound(fan_in: int) -> np.float32:
    """float32(1 / sqrt(double(fan_in))): the bound of Linear and Conv2d (IEEE square root)."""
    if fan_in <= 0:
        raise ValueError(f"fan_in_bound: fan_in must be positive, got {fan_in}")
    return np.float32(1.0 / math.sqrt(float(fan_in)))


EMBEDDING_BOUND = np.float32(math.sqrt(3.0))  # Uniform(-√3, √3) has unit variance


def uniform_parameter(shape: Sequence[int], bound: float | np.floating,
                      generator: Generator) -> Parameter:
    """A Parameter drawn from Uniform(-bound, +bound) in row-major order, advancing generator
    (bound rounded to float32 first)."""
    b = float(np.float32(bound))
    return Parameter(generator.uniform(-b, b, tuple(shape)))


# -- torch.nn.init: in-place initialisers ----------------------------------------------------
# Each fills an existing tensor in place under no_grad (identity, optimizer references and the
# graph stay valid), as PyTorch's do, and returns it. Random ones draw from `generator`, else
# the default generator. The fans and gains are PyTorch's formulas; the values are not
# PyTorch's, because the bits come from SplitMix64 (docs/spec/training.txt 1.1).



# Rejection needs about 1/mass draws per value; below this mass that is refused, not looped.
_MIN_TRUNCATED_MASS = 1e-4


def trunc_normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0, a: float = -2.0,
                  b: float = 2.0, generator: Optional[Generator] = None) -> Tensor:
    """Fills tensor with N(mean, std²) truncated to [a, b], by rejecting draws outside it.

    PyTorch inverts the CDF instead; the distribution is the same, the draws are not."""
    shape = _float_target(tensor, "trunc_normal_")
    _check_std(std, "trunc_normal_")
    if not a < b:
        raise ValueError(f"trunc_normal_: a must be < b, got a={a}, b={b}")
    m32, s32, lo, hi = np.float32(mean), np.float32(std), np.float32(a), np.float32(b)
    if std == 0:
        if not a <= mean <= b:
            raise ValueError(f"trunc_normal_: mean {mean} with std 0 lies outside [{a}, {b}]")
        return constant_(tensor, mean)
    phi = lambda x: 0.5 * (1.0 + math.erf((x - mean) / (std * math.sqrt(2.0))))  # noqa: E731
    mass = phi(b) - phi(a)
    if mass < _MIN_TRUNCATED_MASS:
        raise ValueError(f"trunc_normal_: [a, b] = [{a}, {b}] holds only {mass:.3g} of "
                         f"N({mean}, {std}^2); at least {_MIN_TRUNCATED_MASS:g} is required")

    def inside(z: np.ndarray) -> np.ndarray:
        x = m32 + s32 * z
        return (x >= lo) & (x <= hi)

    z = standard_normals(resolve_generator(generator), math.prod(shape), inside)
    return _fill(tensor, (m32 + s32 * z).reshape(shape))


def constant_(tensor: Tensor, val: float) -> Tensor:
    """Fills `tensor` with `val` in place, without recording it, and returns it, as
    `torch.nn.init.constant_`.

    Parameters
    ----------
    tensor : Tensor
        The tensor to fill.
    val : float
        The value.
    """
    _check_tensor(tensor, "constant_")
    with no_grad():
        tensor.fill_(val)
    return tensor


def zeros_(tensor: Tensor) -> Tensor:
    """Fills `tensor` with zeros in place and returns it, as `torch.nn.init.zeros_`.

    Parameters
    ----------
    tensor : Tensor
        The tensor to fill.
    """
    return constant_(tensor, 0)


def ones_(tensor: Tensor) -> Tensor:
    """Fills `tensor` with ones in place and returns it, as `torch.nn.init.ones_`.

    Parameters
    ----------
    tensor : Tensor
        The tensor to fill.
    """
    return constant_(tensor, 1)


_LINEAR_GAINS = ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d",
                 "conv_transpose2d", "conv_transpose3d", "sigmoid")


def calculate_gain(nonlinearity: str, param: Optional[float] = None) -> float:
    """PyTorch's recommended gain for a nonlinearity (torch.nn.init.calculate_gain)."""
    if nonlinearity in _LINEAR_GAINS:
        return 1.0
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            slope = 0.01
        elif isinstance(param, bool) or not isinstance(param, (int, float)):
            raise ValueError(f"calculate_gain: negative_slope {param!r} is not a valid number")
        else:
            slope = float(param)
        return math.sqrt(2.0 / (1 + slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"calculate_gain: unsupported nonlinearity {nonlinearity!r}")


def _calculate_fan_in_and_fan_out(tensor: Tensor) -> tuple[int, int]:
    """(size(1)·receptive field, size(0)·receptive field), as PyTorch."""
    shape = tuple(tensor.shape)
    if len(shape) < 2:
        raise ValueError(f"fan in and fan out can not be computed for a tensor with fewer than "
                         f"2 dimensions (shape {shape})")
    receptive = math.prod(shape[2:])
    return shape[1] * receptive, shape[0] * receptive


def _fan(tensor: Tensor, mode: str, op: str) -> int:
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"{op}: mode must be 'fan_in' or 'fan_out', got {mode!r}")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


def xavier_uniform_(tensor: Tensor, gain: float = 1.0,
                    generator: Optional[Generator] = None) -> Tensor:
    """Uniform(±gain·√(6 / (fan_in + fan_out))) (Glorot and Bengio 2010)."""
    _float_target(tensor, "xavier_uniform_")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    bound = math.sqrt(3.0) * gain * math.sqrt(2.0 / float(fan_in + fan_out))
    return uniform_(tensor, -bound, bound, generator)


def xavier_normal_(tensor: Tensor, gain: float = 1.0,
                   generator: Optional[Generator] = None) -> Tensor:
    """N(0, gain² · 2 / (fan_in + fan_out)) (Glorot and Bengio 2010)."""
    _float_target(tensor, "xavier_normal_")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return normal_(tensor, 0.0, gain * math.sqrt(2.0 / float(fan_in + fan_out)), generator)


def _kaiming_std(tensor: Tensor, a: float, mode: str, nonlinearity: str,
                 op: str) -> Optional[float]:
    """gain / √fan, or None for a tensor without elements: a no-op, as in PyTorch."""
    _float_target(tensor, op)
    if tensor.numel() == 0:
        return None
    return calculate_gain(nonlinearity, a) / math.sqrt(_fan(tensor, mode, op))


def kaiming_uniform_(tensor: Tensor, a: float = 0, mode: str = "fan_in",
                     nonlinearity: str = "leaky_relu",
                     generator: Optional[Generator] = None) -> Tensor:
    """Uniform(±√3 · gain / √fan) (He et al. 2015); a is the leaky_relu negative slope."""
    std = _kaiming_std(tensor, a, mode, nonlinearity, "kaiming_uniform_")
    if std is None:
        return tensor
    bound = math.sqrt(3.0) * std
    return uniform_(tensor, -bound, bound, generator)


def kaiming_normal_(tensor: Tensor, a: float = 0, mode: str = "fan_in",
                    nonlinearity: str = "leaky_relu",
                    generator: Optional[Generator] = None) -> Tensor:
    """N(0, gain² / fan) (He et al. 2015); a is the leaky_relu negative slope."""
    std = _kaiming_std(tensor, a, mode, nonlinearity, "kaiming_normal_")
    if std is None:
        return tensor
    return normal_(tensor, 0.0, std, generator)


from .init_structured import dirac_, eye_, orthogonal_, sparse_  # noqa: E402, F401


def _old_spelling(fill: Callable[..., Tensor]) -> Callable[..., Tensor]:
    """torch's pre-0.4 name of an init (without the trailing underscore): the same fill, with
    torch's FutureWarning pointing at the new name."""
    new = fill.__name__
    old = new[:-1]

    def deprecated(*args: Any, **kwargs: Any) -> Tensor:
        warnings.warn(f"`nn.init.{old}` is now deprecated in favor of `nn.init.{new}`.",
                      FutureWarning, stacklevel=2)
        return fill(*args, **kwargs)
    deprecated.__name__ = deprecated.__qualname__ = old
    deprecated.__doc__ = f"Deprecated spelling of `{new}` (warns, then calls it)."
    return deprecated


uniform = _old_spelling(uniform_)
normal = _old_spelling(normal_)
constant = _old_spelling(constant_)
eye = _old_spelling(eye_)
dirac = _old_spelling(dirac_)
xavier_uniform = _old_spelling(xavier_uniform_)
xavier_normal = _old_spelling(xavier_normal_)
kaiming_uniform = _old_spelling(kaiming_uniform_)
kaiming_normal = _old_spelling(kaiming_normal_)
orthogonal = _old_spelling(orthogonal_)
sparse = _old_spelling(sparse_)
