"""Modules: named parameters and buffers in a fixed state order, and the layers built on them."""
import sys

from .. import functional
from . import init, parallel, utils
from .attention import (
    MultiheadAttention,
    Transformer,
    TransformerDecoder,
    TransformerDecoderLayer,
    TransformerEncoder,
    TransformerEncoderLayer,
)
from .container import ModuleDict, ModuleList, ParameterDict, ParameterList
from .conv import (
    AdaptiveAvgPool1d,
    AdaptiveAvgPool2d,
    AvgPool1d,
    AvgPool2d,
    BatchNorm1d,
    BatchNorm2d,
    ConstantPad1d,
    ConstantPad2d,
    Conv1d,
    Conv2d,
    ConvTranspose1d,
    ConvTranspose2d,
    MaxPool1d,
    MaxPool2d,
    PixelShuffle,
    PixelUnshuffle,
    Upsample,
    UpsamplingBilinear2d,
    UpsamplingNearest2d,
    ZeroPad2d,
)
from .embedding_bag import EmbeddingBag
from .layers import (
    CELU,
    ELU,
    GELU,
    GLU,
    SELU,
    Bilinear,
    Dropout,
    Dropout1d,
    Dropout2d,
    Dropout3d,
    Embedding,
    Flatten,
    Hardshrink,
    Hardsigmoid,
    Hardswish,
    Hardtanh,
    Identity,
    LayerNorm,
    LeakyReLU,
    Linear,
    LogSigmoid,
    LogSoftmax,
    Mish,
    PReLU,
    ReLU,
    ReLU6,
    Sequential,
    Sigmoid,
    SiLU,
    Softmax,
    Softmin,
    Softplus,
    Softshrink,
    Softsign,
    Tanh,
    Tanhshrink,
    Threshold,
    Unflatten,
)
from .loss import (
    BCELoss,
    BCEWithLogitsLoss,
    CosineSimilarity,
    CrossEntropyLoss,
    CTCLoss,
    HuberLoss,
    KLDivLoss,
    L1Loss,
    MSELoss,
    NLLLoss,
    PairwiseDistance,
    SmoothL1Loss,
)
from .module import Module, Parameter
from .normalization import GroupNorm, InstanceNorm1d, InstanceNorm2d, RMSNorm
from .padding import (
    CircularPad1d,
    CircularPad2d,
    ReflectionPad1d,
    ReflectionPad2d,
    ReplicationPad1d,
    ReplicationPad2d,
)
from .recurrent import GRU, LSTM, RNN, GRUCell, LSTMCell, RNNCell
from .ternary import TernaryConv2d, TernaryLinear, TernaryWeight, ternary_weights

# `import torch.nn.functional as F`, ported, imports onemodel.functional under this name too.
sys.modules[__name__ + ".functional"] = functional

__all__ = ["parallel", "Bilinear", "Dropout3d", "EmbeddingBag", "CircularPad1d",
           "CircularPad2d", "ReflectionPad1d", "ReflectionPad2d", "ReplicationPad1d",
           "ReplicationPad2d", "AdaptiveAvgPool2d", "AvgPool2d", "BatchNorm1d", "BatchNorm2d",
           "Conv2d", "Dropout",
           "Embedding", "Flatten", "GELU", "Identity", "LayerNorm", "Linear", "MaxPool2d",
           "Module", "functional", "ModuleDict", "ModuleList", "ParameterList", "Parameter",
           "ReLU", "Sequential", "Sigmoid", "Tanh", "init", "utils", "MultiheadAttention",
           "TransformerEncoderLayer", "TransformerEncoder", "LSTM", "GRU", "TernaryConv2d",
           "TernaryLinear", "TernaryWeight", "ternary_weights", "ELU", "LeakyReLU", "SiLU",
           "Softmax", "BCEWithLogitsLoss", "CTCLoss", "CrossEntropyLoss", "L1Loss", "MSELoss",
           "NLLLoss", "Conv1d", "Dropout1d", "Dropout2d", "GroupNorm", "RMSNorm", "Upsample",
           "Transformer", "TransformerDecoder", "TransformerDecoderLayer", "UpsamplingBilinear2d",
           "UpsamplingNearest2d", "AvgPool1d", "BCELoss", "AdaptiveAvgPool1d", "ConstantPad1d",
           "ConstantPad2d", "CosineSimilarity", "Hardswish", "Hardtanh", "HuberLoss", "KLDivLoss",
           "LogSigmoid", "LogSoftmax", "MaxPool1d", "Mish", "PairwiseDistance", "ParameterDict",
           "PixelShuffle", "PixelUnshuffle", "PReLU", "ReLU6", "SmoothL1Loss", "Softplus",
           "Softsign", "Unflatten", "ZeroPad2d", "CELU", "GLU", "GRUCell", "Hardshrink",
           "Hardsigmoid", "InstanceNorm1d", "InstanceNorm2d", "LSTMCell", "RNN", "RNNCell", "SELU",
           "Softmin", "Softshrink", "Tanhshrink", "Threshold", "ConvTranspose1d",
           "ConvTranspose2d"]
