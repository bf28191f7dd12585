"""Differentiable tensor ops (docs/spec/engine.md section 2) with PyTorch's names and arguments."""
from .attention import scaled_dot_product_attention
from .compare import all, allclose, any, eq, equal, ge, gt, isfinite, isinf, isnan, le, lt, ne
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
    ceil,
    clamp,
    clamp_max,
    clamp_min,
    cos,
    div,
    elu,
    erf,
    exp,
    floor,
    gelu,
    leaky_relu,
    log,
    maximum,
    minimum,
    mul,
    neg,
    pow,
    relu,
    round,
    sigmoid,
    sign,
    silu,
    sin,
    softplus,
    sqrt,
    sub,
    tanh,
    trunc,
    where,
)
from .linalg import bmm, linear, matmul, outer, tril, triu
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
from .reduction import argmax, argmin, cumsum, max, mean, min, norm, std, sum, var
from .sampling import interpolate
from .shape import (
    cat,
    chunk,
    clone,
    flatten,
    gather,
    index,
    index_select,
    pad,
    permute,
    reshape,
    split,
    squeeze,
    stack,
    transpose,
    unsqueeze,
)
from .sorting import sort, topk

__all__ = [
    "abs", "all", "any", "adaptive_avg_pool2d", "add", "allclose", "argmax", "argmin", "avg_pool1d",
    "avg_pool2d", "batch_norm", "binary_cross_entropy", "binary_cross_entropy_with_logits", "bmm",
    "cat", "ceil", "chunk", "clamp", "clamp_max", "clamp_min", "clone", "conv1d", "conv2d", "cos",
    "cross_entropy", "ctc_loss", "cumsum", "div", "dropout", "dropout1d", "dropout2d", "elu",
    "embedding", "eq", "equal", "erf", "exp", "flatten", "floor", "gather", "ge", "gelu",
    "group_norm", "gt", "index", "index_select", "interpolate", "isfinite", "isinf", "isnan",
    "l1_loss", "layer_norm", "le", "leaky_relu", "linear", "log", "log_softmax", "lt", "matmul",
    "max", "max_pool2d", "maximum", "mean", "min", "minimum", "mse_loss", "mul", "ne", "neg",
    "nll_loss", "norm", "normalize", "one_hot", "outer", "pad", "permute", "pow", "relu",
    "reshape", "rms_norm", "round", "scaled_dot_product_attention", "sigmoid", "sign", "silu",
    "sin", "softmax", "softplus", "sort", "split", "sqrt", "squeeze", "stack", "std", "sub", "sum",
    "tanh", "topk", "transpose", "tril", "triu", "trunc", "unsqueeze", "var", "where",
]
