"""The activation modules, as torch.nn's: ReLU, GELU, SiLU, Tanh, Sigmoid, Softplus, PReLU, the
hard and shrinking ones, Threshold, GLU, and Softmax, LogSoftmax and Softmin; each calls the
function of functional with its arguments (inplace=True writes the result into the input).
"""
from __future__ import annotations

from typing import Any, Callable, Optional

import numpy as np

from .. import functional as F
from ..functional.nn import implicit_dim
from ..tensor import Tensor, to_float32_on_cpu
from .module import Module, Parameter, _positive


class _Activation(Module):
    """An activation without arguments: `_function` of the input."""

    _function: Callable[[Tensor], Tensor]

    def forward(self, input: Tensor) -> Tensor:
        return self._function(input)


class _TakesInplace(_Activation):
    """One that takes PyTorch's inplace=False: with True the result is written into the input,
    which is returned (functional.elementwise.in_place)."""

    _function: Callable[..., Tensor]

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = bool(inplace)

    def forward(self, input: Tensor) -> Tensor:
        return self._function(input, inplace=self.inplace)

    def extra_repr(self) -> str:
        return "inplace=True" if self.inplace else ""


class ReLU(_TakesInplace):
    """Applies max(0, x) elementwise, as `torch.nn.ReLU`.

    Parameters
    ----------
    inplace : bool, optional
        Write the result into the input and return it, as PyTorch (default False).
    """

    _function = staticmethod(F.relu)


class Hardswish(_TakesInplace):
    """Applies x * relu6(x + 3) / 6 elementwise, as `torch.nn.Hardswish`.

    Parameters
    ----------
    inplace : bool, optional
        Write the result into the input and return it, as PyTorch (default False).
    """

    _function = staticmethod(F.hardswish)


class Mish(_TakesInplace):
    """Applies x * tanh(softplus(x)) elementwise, as `torch.nn.Mish`.

    Parameters
    ----------
    inplace : bool, optional
        Write the result into the input and return it, as PyTorch (default False).
    """

    _function = staticmethod(F.mish)


class Hardsigmoid(_TakesInplace):
    """Applies relu6(x + 3) / 6 elementwise, as `torch.nn.Hardsigmoid`.

    Parameters
    ----------
    inplace : bool, optional
        Write the result into the input and return it, as PyTorch (default False).
    """

    _function = staticmethod(F.hardsigmoid)


class SELU(_TakesInplace):
    """Applies the scaled ELU with PyTorch's constants, as `torch.nn.SELU`.

    Parameters
    ----------
    inplace : bool, optional
        Write the result into the input and return it, as PyTorch (default False).
    """

    _function = staticmethod(F.selu)


class Tanhshrink(_Activation):
    """Applies x - tanh(x) elementwise, as `torch.nn.Tanhshrink`.

    Takes a tensor of any shape and returns one of the same shape.
    """

    _function = staticmethod(F.tanhshrink)


class Softsign(_Activation):
    """Applies x / (1 + |x|) elementwise, as `torch.nn.Softsign`.

    Takes a tensor of any shape and returns one of the same shape.
    """

    _function = staticmethod(F.softsign)


class LogSigmoid(_Activation):
    """Applies log(sigmoid(x)) elementwise without overflow, as `torch.nn.LogSigmoid`.

    Takes a tensor of any shape and returns one of the same shape.
    """

    _function = staticmethod(F.logsigmoid)


class Tanh(_Activation):
    """Applies tanh elementwise (onemodel's exact-mode kernel), as `torch.nn.Tanh`.

    Takes a tensor of any shape and returns one of the same shape.
    """

    _function = staticmethod(F.tanh)


class Sigmoid(_Activation):
    """Applies 1 / (1 + exp(-x)) elementwise (onemodel's exact-mode kernel), as `torch.nn.Sigmoid`.

    Takes a tensor of any shape and returns one of the same shape.
    """

    _function = staticmethod(F.sigmoid)


class Hardtanh(Module):
    """Clamps the input to [min_val, max_val], as `torch.nn.Hardtanh`.

    Parameters
    ----------
    min_val : float, optional
        The lower bound (default -1).
    max_val : float, optional
        The upper bound (default 1); must not be below `min_val`.
    inplace : bool, optional
        Write the result into the input and return it, as PyTorch (default False).
    """

    def __init__(self, min_val: float = -1.0, max_val: float = 1.0,
                 inplace: bool = False) -> None:
        super().__init__()
        name = type(self).__name__
        self.inplace = bool(inplace)
        if not max_val > min_val:
            raise ValueError(f"{name}: max_val ({max_val}) must be greater than min_val "
                             f"({min_val})")
        self.min_val, self.max_val = min_val, max_val

    def forward(self, input: Tensor) -> Tensor:
        return F.hardtanh(input, self.min_val, self.max_val, self.inplace)

    def extra_repr(self) -> str:
        return f"min_val={self.min_val}, max_val={self.max_val}"


class ReLU6(Hardtanh):
    """Applies min(max(0, x), 6) elementwise, as `torch.nn.ReLU6`.

    Parameters
    ----------
    inplace : bool, optional
        Write the result into the input and return it, as PyTorch (default False).
    """

    def __init__(self, inplace: bool = False) -> None:
        super().__init__(0.0, 6.0, inplace)

    def extra_repr(self) -> str:
        return ""


class Softplus(Module):
    """Applies log(1 + exp(beta x)) / beta elementwise, as `torch.nn.Softplus`.

    Parameters
    ----------
    beta : float, optional
        The sharpness (default 1).
    threshold : float, optional
        Above beta x > threshold the input is returned as it is (default 20).
    """

    def __init__(self, beta: float = 1.0, threshold: float = 20.0) -> None:
        super().__init__()
        self.beta, self.threshold = beta, threshold

    def forward(self, input: Tensor) -> Tensor:
        return F.softplus(input, self.beta, self.threshold)

    def extra_repr(self) -> str:
        return f"beta={self.beta}, threshold={self.threshold}"


class PReLU(Module):
    """weight (num_parameters,) filled with init: one slope, or one per channel (dim 1)."""

    def __init__(self, num_parameters: int = 1, init: float = 0.25, device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__()
        to_float32_on_cpu((device, dtype), {}, "PReLU")
        self.num_parameters = _positive(num_parameters, "num_parameters", "PReLU")
        self.weight = Parameter(np.full(self.num_parameters, init, np.float32))

    def forward(self, input: Tensor) -> Tensor:
        return F.prelu(input, self.weight)

    def extra_repr(self) -> str:
        return f"num_parameters={self.num_parameters}"


class GELU(Module):
    """Applies the Gaussian error linear unit, as `torch.nn.GELU`.

    Parameters
    ----------
    approximate : str, optional
        "none" (default) for x * Phi(x) with the exact-mode erf, "tanh" for the tanh
        approximation.
    """

    def __init__(self, approximate: str = "none") -> None:
        super().__init__()
        if approximate not in ("none", "tanh"):
            raise ValueError(f"GELU: approximate must be 'none' or 'tanh', got {approximate!r}")
        self.approximate = approximate

    def forward(self, input: Tensor) -> Tensor:
        return F.gelu(input, approximate=self.approximate)

    def extra_repr(self) -> str:
        return f"approximate={self.approximate!r}"


class SiLU(_TakesInplace):
    """Applies x * sigmoid(x) elementwise, as `torch.nn.SiLU`.

    Parameters
    ----------
    inplace : bool, optional
        Write the result into the input and return it, as PyTorch (default False).
    """

    _function = staticmethod(F.silu)


class LeakyReLU(Module):
    """Applies max(0, x) + negative_slope * min(0, x), as `torch.nn.LeakyReLU`.

    Parameters
    ----------
    negative_slope : float, optional
        The slope for negative inputs (default 0.01).
    inplace : bool, optional
        Write the result into the input and return it, as PyTorch (default False).
    """

    def __init__(self, negative_slope: float = 0.01, inplace: bool = False) -> None:
        super().__init__()
        self.negative_slope, self.inplace = float(negative_slope), bool(inplace)

    def forward(self, input: Tensor) -> Tensor:
        return F.leaky_relu(input, self.negative_slope, self.inplace)

    def extra_repr(self) -> str:
        return f"negative_slope={self.negative_slope}" + (", inplace=True" if self.inplace else "")


class _WithAlpha(Module):
    """ELU and CELU: `_function`(input, alpha, inplace)."""

    _function: Callable[[Tensor, float, bool], Tensor]

    def __init__(self, alpha: float = 1.0, inplace: bool = False) -> None:
        super().__init__()
        self.alpha, self.inplace = float(alpha), bool(inplace)

    def forward(self, input: Tensor) -> Tensor:
        return self._function(input, self.alpha, self.inplace)

    def extra_repr(self) -> str:
        return f"alpha={self.alpha}"


class ELU(_WithAlpha):
    """Applies x for x > 0 and alpha (exp(x) - 1) otherwise, as `torch.nn.ELU`.

    Parameters
    ----------
    alpha : float, optional
        The scale of the negative part (default 1).
    inplace : bool, optional
        Write the result into the input and return it, as PyTorch (default False).
    """

    _function = staticmethod(F.elu)


class CELU(_WithAlpha):
    """Applies max(0, x) + min(0, alpha (exp(x / alpha) - 1)), as `torch.nn.CELU`.

    Parameters
    ----------
    alpha : float, optional
        The scale of the negative part (default 1).
    inplace : bool, optional
        Write the result into the input and return it, as PyTorch (default False).
    """

    _function = staticmethod(F.celu)


class GLU(Module):
    """The gated linear unit: splits the input in two halves a, b along `dim` and returns a *
    sigmoid(b), as `torch.nn.GLU`.

    Parameters
    ----------
    dim : int, optional
        The dimension to split, whose size must be even (default -1).
    """

    def __init__(self, dim: int = -1) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, input: Tensor) -> Tensor:
        return F.glu(input, self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class Threshold(Module):
    """Replaces every element not above `threshold` with `value`, as `torch.nn.Threshold`.

    Parameters
    ----------
    threshold : float
        Elements greater than this are kept.
    value : float
        What the others become.
    inplace : bool, optional
        Write the result into the input and return it, as PyTorch (default False).
    """

    def __init__(self, threshold: float, value: float, inplace: bool = False) -> None:
        super().__init__()
        self.threshold, self.value, self.inplace = threshold, value, bool(inplace)

    def forward(self, input: Tensor) -> Tensor:
        return F.threshold(input, self.threshold, self.value, self.inplace)

    def extra_repr(self) -> str:
        return f"threshold={self.threshold}, value={self.value}"


class _Shrink(Module):
    """Softshrink and Hardshrink: `_function`(input, lambd)."""

    _function: Callable[[Tensor, float], Tensor]

    def __init__(self, lambd: float = 0.5) -> None:
        super().__init__()
        self.lambd = lambd

    def forward(self, input: Tensor) -> Tensor:
        return self._function(input, self.lambd)

    def extra_repr(self) -> str:
        return str(self.lambd)


class Softshrink(_Shrink):
    """Shrinks the input towards 0 by `lambd` (0 inside [-lambd, lambd]), as `torch.nn.Softshrink`.

    Parameters
    ----------
    lambd : float, optional
        The half-width of the zero band, at least 0 (default 0.5).
    """

    _function = staticmethod(F.softshrink)


class Hardshrink(_Shrink):
    """Sets elements inside [-lambd, lambd] to 0 and keeps the others, as `torch.nn.Hardshrink`.

    Parameters
    ----------
    lambd : float, optional
        The half-width of the zero band (default 0.5).
    """

    _function = staticmethod(F.hardshrink)


class Softmax(Module):
    """softmax along dim. Without dim, PyTorch's deprecated implicit choice (0 for inputs of
    rank 0, 1 or 3, else 1), with PyTorch's warning."""

    _function = staticmethod(F.softmax)

    def __init__(self, dim: Optional[int] = None) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, input: Tensor) -> Tensor:
        dim = self.dim
        if dim is None:
            dim = implicit_dim(type(self).__name__, input.ndim, 3)
        return self._function(input, dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class LogSoftmax(Softmax):
    """log_softmax along dim (without dim, as Softmax)."""

    _function = staticmethod(F.log_softmax)


class Softmin(Softmax):
    """softmin along dim (without dim, as Softmax)."""

    _function = staticmethod(F.softmin)
