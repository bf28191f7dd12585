"""Optimizers, gradient clipping and learning-rate schedules (spec/training.txt 3-5)."""
from . import lr
from .adam import Adam, AdamW
from .clip import clip_grad_norm, clip_grad_value, grad_norm
from .optimizer import Optimizer
from .sgd import SGD
from .sr4 import SR4

__all__ = ["SGD", "SR4", "Adam", "AdamW", "Optimizer", "clip_grad_norm", "clip_grad_value",
           "grad_norm", "lr"]
