"""Loss modules: torch.nn's constructors over the functional losses,
and CosineSimilarity and PairwiseDistance.

Each takes PyTorch's constructor arguments in PyTorch's order and checks them at
construction. The deprecated size_average and reduce choose the reduction as in PyTorch, with
its deprecation warning. A class or element weight is a buffer
named weight (and BCEWithLogitsLoss's pos_weight a buffer pos_weight), as in PyTorch's state.
"""
from __future__ import annotations

from typing import Any, Optional

from .. import functional as F
from ..functional.loss import (
    KL_REDUCTIONS,
    REDUCTIONS,
    _check_cut,
    _check_reduction,
    legacy_reduction,
)
from ..tensor import Tensor
from .module import Module


class _Loss(Module):
    """Holds `reduction`, or the one the deprecated size_average / reduce name, as torch's."""

    _reductions: tuple = REDUCTIONS

    def __init__(self, reduction: str, size_average: Optional[bool] = None,
                 reduce: Optional[bool] = None) -> None:
        super().__init__()
        name = type(self).__name__
        reduction = legacy_reduction(size_average, reduce, reduction)
        _check_reduction(name, reduction, self._reductions)
        self.reduction = reduction

    def extra_repr(self) -> str:
        return f"reduction={self.reduction!r}"


class _WeightedLoss(_Loss):
    """A loss with an optional class weight (C,), held as the buffer `weight`."""

    def __init__(self, weight: Optional[Tensor], size_average: Optional[bool],
                 reduce: Optional[bool], reduction: str) -> None:
        super().__init__(reduction, size_average, reduce)
        if weight is not None and not isinstance(weight, Tensor):
            weight = Tensor(weight)
        self.register_buffer("weight", weight)


class CrossEntropyLoss(_WeightedLoss):
    """cross_entropy of logits (N, C) or (C,) or (N, C, d1, ...) and class indices or
    probabilities."""

    def __init__(self, weight: Optional[Tensor] = None, size_average: Optional[bool] = None,
                 ignore_index: int = -100, reduce: Optional[bool] = None,
                 reduction: str = "mean", label_smoothing: float = 0.0) -> None:
        super().__init__(weight, size_average, reduce, reduction)
        if not 0.0 <= label_smoothing <= 1.0:
            raise ValueError(f"CrossEntropyLoss: label_smoothing must be in [0, 1], "
                             f"got {label_smoothing}")
        self.ignore_index = int(ignore_index)
        self.label_smoothing = float(label_smoothing)

    def forward(self, input: Tensor, target: Any) -> Tensor:
        return F.cross_entropy(input, target, self.weight, ignore_index=self.ignore_index,
                               reduction=self.reduction, label_smoothing=self.label_smoothing)


class NLLLoss(_WeightedLoss):
    """nll_loss of log-probabilities (N, C) or (C,) or (N, C, d1, ...) and class indices."""

    def __init__(self, weight: Optional[Tensor] = None, size_average: Optional[bool] = None,
                 ignore_index: int = -100, reduce: Optional[bool] = None,
                 reduction: str = "mean") -> None:
        super().__init__(weight, size_average, reduce, reduction)
        self.ignore_index = int(ignore_index)

    def forward(self, input: Tensor, target: Any) -> Tensor:
        return F.nll_loss(input, target, self.weight, ignore_index=self.ignore_index,
                          reduction=self.reduction)


class MSELoss(_Loss):
    """The mean squared error (x - y)^2, reduced, as `torch.nn.MSELoss`.

    Parameters
    ----------
    size_average, reduce : bool, optional
        PyTorch's deprecated spellings of `reduction`, mapped as PyTorch maps them.
    reduction : str, optional
        "mean" (default), "sum" or "none".
    """

    def __init__(self, size_average: Optional[bool] = None, reduce: Optional[bool] = None,
                 reduction: str = "mean") -> None:
        super().__init__(reduction, size_average, reduce)

    def forward(self, input: Tensor, target: Any) -> Tensor:
        return F.mse_loss(input, target, reduction=self.reduction)


class L1Loss(_Loss):
    """The mean absolute error |x - y|, reduced, as `torch.nn.L1Loss`.

    Parameters
    ----------
    size_average, reduce : bool, optional
        PyTorch's deprecated spellings of `reduction`, mapped as PyTorch maps them.
    reduction : str, optional
        "mean" (default), "sum" or "none".
    """

    def __init__(self, size_average: Optional[bool] = None, reduce: Optional[bool] = None,
                 reduction: str = "mean") -> None:
        super().__init__(reduction, size_average, reduce)

    def forward(self, input: Tensor, target: Any) -> Tensor:
        return F.l1_loss(input, target, reduction=self.reduction)


class BCELoss(_WeightedLoss):
    """binary_cross_entropy of probabilities; weight broadcasts to the input."""

    def __init__(self, weight: Optional[Tensor] = None, size_average: Optional[bool] = None,
                 reduce: Optional[bool] = None, reduction: str = "mean") -> None:
        super().__init__(weight, size_average, reduce, reduction)

    def forward(self, input: Tensor, target: Any) -> Tensor:
        return F.binary_cross_entropy(input, target, self.weight, reduction=self.reduction)


class BCEWithLogitsLoss(_WeightedLoss):
    """binary_cross_entropy_with_logits; weight broadcasts to the input, pos_weight (often one
    per class) to the target."""

    def __init__(self, weight: Optional[Tensor] = None, size_average: Optional[bool] = None,
                 reduce: Optional[bool] = None, reduction: str = "mean",
                 pos_weight: Optional[Tensor] = None) -> None:
        super().__init__(weight, size_average, reduce, reduction)
        if pos_weight is not None and not isinstance(pos_weight, Tensor):
            pos_weight = Tensor(pos_weight)
        self.register_buffer("pos_weight", pos_weight)

    def forward(self, input: Tensor, target: Any) -> Tensor:
        return F.binary_cross_entropy_with_logits(input, target, self.weight,
                                                  reduction=self.reduction,
                                                  pos_weight=self.pos_weight)


class SmoothL1Loss(_Loss):
    """The smooth L1 loss: 0.5 d^2 / beta where |d| < beta, |d| - 0.5 beta elsewhere (d = x - y),
    as `torch.nn.SmoothL1Loss`.

    Parameters
    ----------
    size_average, reduce : bool, optional
        PyTorch's deprecated spellings of `reduction`, mapped as PyTorch maps them.
    reduction : str, optional
        "mean" (default), "sum" or "none".
    beta : float, optional
        Where the quadratic part ends, at least 0 (default 1).
    """

    def __init__(self, size_average: Optional[bool] = None, reduce: Optional[bool] = None,
                 reduction: str = "mean", beta: float = 1.0) -> None:
        super().__init__(reduction, size_average, reduce)
        _check_cut("SmoothL1Loss", "beta", beta, False)
        self.beta = beta

    def forward(self, input: Tensor, target: Any) -> Tensor:
        return F.smooth_l1_loss(input, target, reduction=self.reduction, beta=self.beta)


class HuberLoss(_Loss):
    """The Huber loss: 0.5 d^2 where |d| < delta, delta (|d| - 0.5 delta) elsewhere
    (d = x - y), as `torch.nn.HuberLoss`.

    Parameters
    ----------
    reduction : str, optional
        "mean" (default), "sum" or "none".
    delta : float, optional
        Where the quadratic part ends, greater than 0 (default 1).
    """

    def __init__(self, reduction: str = "mean", delta: float = 1.0) -> None:
        super().__init__(reduction)
        _check_cut("HuberLoss", "delta", delta, True)
        self.delta = delta

    def forward(self, input: Tensor, target: Any) -> Tensor:
        return F.huber_loss(input, target, self.reduction, self.delta)


class KLDivLoss(_Loss):
    """kl_div of log-probabilities and probabilities (log-probabilities with log_target);
    reduction may also be "batchmean", the sum over the batch size."""

    _reductions = KL_REDUCTIONS

    def __init__(self, size_average: Optional[bool] = None, reduce: Optional[bool] = None,
                 reduction: str = "mean", log_target: bool = False) -> None:
        super().__init__(reduction, size_average, reduce)
        self.log_target = bool(log_target)

    def forward(self, input: Tensor, target: Any) -> Tensor:
        return F.kl_div(input, target, reduction=self.reduction, log_target=self.log_target)


class CosineSimilarity(Module):
    """The cosine of the angle between two inputs along `dim`, as
    `torch.nn.CosineSimilarity`.

    Parameters
    ----------
    dim : int, optional
        The dimension of the vectors (default 1).
    eps : float, optional
        The least value of each norm, against division by zero (default 1e-8).
    """

    def __init__(self, dim: int = 1, eps: float = 1e-8) -> None:
        super().__init__()
        self.dim, self.eps = dim, eps

    def forward(self, x1: Tensor, x2: Tensor) -> Tensor:
        return F.cosine_similarity(x1, x2, self.dim, self.eps)


class PairwiseDistance(Module):
    """The p-norm of x1 - x2 + eps along the last dimension, as
    `torch.nn.PairwiseDistance`.

    Parameters
    ----------
    p : float, optional
        The norm's order (default 2).
    eps : float, optional
        Added to the difference, against a zero norm's gradient (default 1e-6).
    keepdim : bool, optional
        Keep the reduced dimension of size 1 (default False).
    """

    def __init__(self, p: float = 2.0, eps: float = 1e-6, keepdim: bool = False) -> None:
        super().__init__()
        self.norm, self.eps, self.keepdim = p, eps, keepdim  # PyTorch's attribute names

    def forward(self, x1: Tensor, x2: Tensor) -> Tensor:
        return F.pairwise_distance(x1, x2, self.norm, self.eps, self.keepdim)


class CTCLoss(_Loss):
    """ctc_loss of log_probs (T, B, C); see functional.ctc_loss for the targets' layouts."""

    def __init__(self, blank: int = 0, reduction: str = "mean",
                 zero_infinity: bool = False) -> None:
        super().__init__(reduction)
        if isinstance(blank, bool) or not isinstance(blank, int) or blank < 0:
            raise ValueError(f"CTCLoss: blank must be a non-negative class index, got {blank!r}")
        self.blank = blank
        self.zero_infinity = bool(zero_infinity)

    def forward(self, log_probs: Tensor, targets: Any, input_lengths: Any,
                target_lengths: Any) -> Tensor:
        return F.ctc_loss(log_probs, targets, input_lengths, target_lengths, self.blank,
                          self.reduction, self.zero_infinity)


__all__ = ["BCELoss", "BCEWithLogitsLoss", "CTCLoss", "CosineSimilarity", "CrossEntropyLoss",
           "HuberLoss", "KLDivLoss", "L1Loss", "MSELoss", "NLLLoss", "PairwiseDistance",
           "SmoothL1Loss"]
