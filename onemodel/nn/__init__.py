"""Modules: named parameters and buffers in a fixed state order, and the layers built on them."""
from . import init
from .layers import (GELU, Dropout, Embedding, Flatten, Identity, LayerNorm, Linear, ReLU,
                     Sequential, Sigmoid, Tanh)
from .module import Module, Parameter

__all__ = [
    "Dropout", "Embedding", "Flatten", "GELU", "Identity", "LayerNorm", "Linear", "Module",
    "Parameter", "ReLU", "Sequential", "Sigmoid", "Tanh", "init",
]
