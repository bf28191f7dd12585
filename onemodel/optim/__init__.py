"""Optimizers, gradient clipping and learning-rate schedules."""
from . import lr, lr_scheduler
from .adam import Adam, AdamW
from .clip import clip_grad_norm, clip_grad_norm_, clip_grad_value, clip_grad_value_, grad_norm
from .optimizer import Optimizer
from .sgd import SGD
from .sr4 import SR4

__all__ = ["SGD", "SR4", "Adam", "AdamW", "Optimizer", "clip_grad_norm", "clip_grad_norm_",
           "clip_grad_value", "clip_grad_value_", "grad_norm", "lr", "lr_scheduler"]
