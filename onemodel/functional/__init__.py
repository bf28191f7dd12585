"""Differentiable tensor ops (docs/spec/engine.md section 2) with PyTorch's names and arguments."""
from .attention import scaled_dot_product_attention
from .compare import eq, ge, gt, le, lt, ne
from .conv import (
    adaptive_avg_pool2d,
    avg_pool1d,
    avg_pool2d,
    batch_norm,
    conv1d,
    conv2d,
    max_pool2d,
)
from .ctc import ctc_loss
from .dropout import dropout, dropout1d, dropout2d
from .elementwise import (
    abs,
    add,
    clamp,
    clamp_max,
    clamp_min,
    cos,
    div,
    elu,
    erf,
    exp,
    gelu,
    leaky_relu,
    log,
    maximum,
    minimum,
    mul,
    neg,
    pow,
    relu,
    sigmoid,
    silu,
    sin,
    softplus,
    sqrt,
    sub,
    tanh,
    where,
)
from .linalg import linear, matmul, tril, triu
from .loss import (
    binary_cross_entropy,
    binary_cross_entropy_with_logits,
    cross_entropy,
    l1_loss,
    mse_loss,
    nll_loss,
)
from .nn import embedding, layer_norm, log_softmax, normalize, one_hot, softmax
from .normalization import group_norm, rms_norm
from .reduction import argmax, argmin, cumsum, max, mean, min, sum
from .sampling import interpolate
from .shape import (
    cat,
    clone,
    flatten,
    gather,
    index,
    pad,
    permute,
    reshape,
    squeeze,
    stack,
    transpose,
    unsqueeze,
)
from .sorting import sort, topk

__all__ = [
    "abs", "adaptive_avg_pool2d", "add", "argmax", "argmin", "avg_pool1d", "avg_pool2d",
    "batch_norm",
    "binary_cross_entropy", "binary_cross_entropy_with_logits", "cat", "clamp", "clamp_max",
    "clamp_min", "clone",
    "conv1d", "conv2d", "cos", "cross_entropy", "ctc_loss", "cumsum", "div", "dropout",
    "dropout1d",
    "dropout2d", "elu", "embedding", "eq", "erf", "exp", "flatten", "gather", "ge", "gelu",
    "group_norm", "gt", "index", "interpolate", "l1_loss", "layer_norm", "le", "leaky_relu",
    "linear", "log", "log_softmax", "lt", "matmul", "max", "max_pool2d", "maximum", "mean", "min",
    "minimum", "mse_loss", "mul", "ne", "neg", "nll_loss", "normalize", "one_hot", "pad",
    "permute", "pow", "relu", "reshape", "rms_norm", "scaled_dot_product_attention", "sigmoid",
    "silu", "sin", "softmax", "softplus", "sort", "sqrt", "squeeze", "stack", "sub", "sum", "tanh",
    "topk", "transpose", "tril", "triu", "unsqueeze", "where",
]
