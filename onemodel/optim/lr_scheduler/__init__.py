"""PyTorch's learning-rate schedulers over an optimizer, with PyTorch's meaning.

Each scheduler counts its own `step()` calls in `last_epoch` (a scheduler stepped once per epoch
decays once per epoch), records its optimizer's rates in `param_groups[g]["initial_lr"]` and
`base_lrs` when built, sets the rate of step 0 at once, and its `state_dict()` holds everything
in its `__dict__` but the optimizer (torch's keys; functions of LambdaLR and MultiplicativeLR
left out as torch leaves them out). The optimizer's pure schedules (`onemodel.optim.lr`), read
at the optimizer's step count, remain what the Trainer uses.

The rate after n calls is a closed form of n in IEEE double from + − × ÷ and correctly rounded
square roots (cosines by `lr.cos_pi`, γⁿ by squaring, a real power by square roots), so it has
the same bits everywhere; it is held as float32 by the optimizer. PyTorch computes most rates
recursively (each from the last); the two agree to within a few double roundings, far inside
1e-6 relative. Where the meaning itself needs a choice:

- Several schedulers on one optimizer compose as torch's do: a scheduler whose rate was changed
  by other code since it set it (another scheduler, ChainedScheduler's others) scales that rate
  by its own change, as torch's chainable forms do; ChainedScheduler of multiplicative
  schedulers sets the product of their closed forms.
- CosineAnnealingLR follows torch's closed form: after T_max the cosine turns back up (the rate
  returns to the base rate at 2·T_max), as torch's recursive form also does.
- MultiplicativeLR multiplies the current rate by lr_lambda(n) at each call: its rate is the
  product of a user function's values, which has no closed form.
- OneCycleLR and CyclicLR cycle momentum (or Adam's β₁) with cycle_momentum=True, torch's
  default, only for an optimizer whose momentum can change after construction; onemodel's SGD
  and Adam hold it as a fixed setting of their state and checkpoints, so they need
  cycle_momentum=False, and say so.
- ReduceLROnPlateau multiplies the current rates (its rate depends on the metrics): k reductions
  differ from torch's by up to k float32 roundings.
"""
from __future__ import annotations

from .base import LRScheduler
from .composite import ChainedScheduler, SequentialLR
from .cyclic import CosineAnnealingWarmRestarts, CyclicLR, OneCycleLR
from .decay import (
                    ConstantLR,
                    CosineAnnealingLR,
                    ExponentialLR,
                    LambdaLR,
                    LinearLR,
                    MultiplicativeLR,
                    MultiStepLR,
                    PolynomialLR,
                    StepLR,
)
from .plateau import ReduceLROnPlateau

__all__ = ["LRScheduler", "StepLR", "MultiStepLR", "ExponentialLR", "ConstantLR", "LinearLR",
           "PolynomialLR", "CosineAnnealingLR", "LambdaLR", "MultiplicativeLR", "OneCycleLR",
           "CyclicLR", "CosineAnnealingWarmRestarts", "SequentialLR", "ChainedScheduler",
           "ReduceLROnPlateau"]
