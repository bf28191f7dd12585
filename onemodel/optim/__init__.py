"""Optimizers, gradient clipping and learning-rate schedules."""
from . import lr, lr_scheduler
from .adadelta import Adadelta
from .adagrad import Adagrad
from .adam import Adam, AdamW
from .adamax import Adamax
from .clip import clip_grad_norm, clip_grad_norm_, clip_grad_value, clip_grad_value_, grad_norm
from .lbfgs import LBFGS
from .nadam import NAdam
from .optimizer import Optimizer
from .radam import RAdam
from .rmsprop import RMSprop
from .sgd import SGD
from .sr4 import SR4

__all__ = ["SGD", "SR4", "Adam", "AdamW", "Adadelta", "Adagrad", "Adamax", "LBFGS", "NAdam",
           "RAdam", "RMSprop", "Optimizer", "clip_grad_norm", "clip_grad_norm_",
           "clip_grad_value", "clip_grad_value_", "grad_norm", "lr", "lr_scheduler"]
