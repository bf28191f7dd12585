"""Differentiable tensor ops (engine.md section 2), PyTorch's names and argument conventions."""
from .elementwise import (abs, add, clamp, div, erf, exp, gelu, log, mul, neg, pow, relu,
                          sigmoid, softplus, sqrt, sub, tanh, where)
from .reduction import max, mean, sum
from .linalg import linear, matmul
from .shape import (cat, clone, flatten, gather, index, pad, permute, reshape, squeeze, stack,
                    transpose, unsqueeze)
from .nn import embedding, layer_norm, log_softmax, softmax

__all__ = [
    "abs", "add", "cat", "clamp", "clone", "div", "embedding", "erf", "exp", "flatten",
    "gather", "gelu", "index", "layer_norm", "linear", "log", "log_softmax", "matmul", "max",
    "mean", "mul", "neg", "pad", "permute", "pow", "relu", "reshape", "sigmoid", "softmax",
    "softplus", "sqrt", "squeeze", "stack", "sub", "sum", "tanh", "transpose", "unsqueeze",
    "where",
]
