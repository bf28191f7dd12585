"""onemodel: neural-network training on CPUs with the same bits on every machine."""
import numpy

from .version import __version__  # noqa: E402
from . import _memory  # noqa: E402

_memory.keep_freed_memory()

from ._config import (config, get_mode, get_num_threads, mode, set_mode,  # noqa: E402
                      set_num_threads)
from .autograd import (enable_grad, inference_mode, is_grad_enabled,  # noqa: E402
                       is_inference_mode_enabled, no_grad)
from ._printing import set_printoptions  # noqa: E402
from ._tensor_surface import BoolTensor, FloatTensor, IntTensor, LongTensor  # noqa: E402
from .tensor import (Tensor, arange, as_tensor, bfloat16, device, empty, empty_like,  # noqa: E402
                     eye, from_numpy, full, full_like, is_tensor, linspace, numel, ones,
                     ones_like, tensor, zeros, zeros_like)
from .random import (Generator, default_generator, get_rng_state, manual_seed,  # noqa: E402
                     multinomial, rand, rand_like, randint, randn, randn_like, randperm,
                     set_rng_state)
from . import (amp, backends, checkpoint, cuda, data, distributed, functional,  # noqa: E402
               interop, nn, onnx, optim, sparse, train, utils, version)
from .backends import (accelerator, are_deterministic_algorithms_enabled,  # noqa: E402
                       compile, get_float32_matmul_precision, set_float32_matmul_precision,
                       use_deterministic_algorithms)
from .amp import autocast  # noqa: E402
from .sparse import sparse_coo_tensor  # noqa: E402
from .state_files import load, save  # noqa: E402

# The tensor functions PyTorch users call as torch.cat, torch.exp, ...: onemodel.functional's,
# under the same names (tests/nn/test_torch_signatures.py holds them to torch's arguments).
from .functional import (abs, add, all, allclose, amax, amin, any, argmax, argmin,  # noqa: E402
                         argsort, bmm, cat, ceil, chunk, clamp, clamp_max, clamp_min, clone, cos,
                         cumsum, diag, diag_embed, diagonal, div, einsum, eq, equal, erf, exp,
                         expm1, flatten, flip, floor,
                         gather, ge, gt, hstack, index_select, isfinite, isinf, isnan, le, log,
                         log1p, log_softmax, logsumexp, lt, masked_select, matmul, max, maximum,
                         mean, meshgrid, min, minimum, mm, movedim, mul, narrow, ne, neg, nonzero,
                         norm, outer, permute, pow, prod, reciprocal, relu, repeat_interleave,
                         reshape, roll, round, rsqrt, sigmoid, sign, sin, softmax, sort, split,
                         sqrt, square, squeeze, stack, std, sub, sum, tanh, topk, transpose, tril,
                         triu, trunc, unsqueeze, var, vstack, where)

spmm = mm  # torch.spmm is torch.mm under the name it had for a sparse first operand

# PyTorch's dtype names, as the numpy dtypes tensors hold (float64 and float16 are refused by the
# constructors with the reason; bfloat16, imported above as tensor.ReducedFloat since numpy has
# none, and float16 are what amp.autocast takes).
float32 = float = numpy.dtype("float32")
float64 = double = numpy.dtype("float64")
float16 = half = numpy.dtype("float16")
int32 = int = numpy.dtype("int32")
int64 = long = numpy.dtype("int64")
bool = numpy.dtype("bool")

__all__ = ["__version__", "config", "get_mode", "get_num_threads", "mode", "set_mode",
           "set_num_threads", "Generator", "default_generator", "manual_seed", "get_rng_state",
           "set_rng_state", "rand", "randn", "randint", "randperm", "multinomial", "Tensor",
           "tensor", "from_numpy", "zeros", "ones", "full", "empty", "zeros_like", "ones_like",
           "full_like", "empty_like", "arange", "device", "no_grad", "enable_grad", "save", "load",
           "float32", "float", "float64", "double", "float16", "half", "bfloat16", "int32", "int",
           "int64", "long", "bool", "autocast", "amp", "backends", "accelerator", "checkpoint",
           "cuda", "data", "distributed", "functional", "interop", "nn", "optim", "train", "utils",
           "abs", "add", "argmax", "argmin", "cat", "clamp", "clamp_max", "clamp_min", "clone",
           "cos", "cumsum", "div", "eq", "erf", "exp", "flatten", "gather", "ge", "gt", "le",
           "log", "log_softmax", "lt", "matmul", "max", "maximum", "mean", "min", "minimum", "mul",
           "ne", "neg", "permute", "pow", "relu", "reshape", "sigmoid", "sin", "softmax", "sort",
           "sqrt", "squeeze", "stack", "sub", "sum", "tanh", "topk", "transpose", "tril", "triu",
           "unsqueeze", "where", "eye", "linspace", "is_tensor", "numel", "rand_like",
           "randn_like", "allclose", "equal", "isnan", "isinf", "isfinite", "ceil", "floor",
           "round", "sign", "trunc", "bmm", "outer", "norm", "std", "var", "split", "chunk",
           "index_select", "any", "all", "einsum", "flip", "roll", "movedim", "narrow", "hstack",
           "vstack", "nonzero", "masked_select", "repeat_interleave", "meshgrid", "amax", "amin",
           "logsumexp", "argsort", "square", "reciprocal", "rsqrt", "use_deterministic_algorithms",
           "are_deterministic_algorithms_enabled", "prod", "expm1", "log1p", "inference_mode",
           "is_grad_enabled", "is_inference_mode_enabled", "set_printoptions", "as_tensor", "mm",
           "spmm", "diag", "diagonal", "diag_embed", "compile", "get_float32_matmul_precision",
           "set_float32_matmul_precision", "onnx", "sparse", "sparse_coo_tensor", "FloatTensor",
           "LongTensor", "IntTensor", "BoolTensor", "version"]
