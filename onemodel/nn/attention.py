"""Multi-head attention and the transformer encoder and decoder (Vaswani et al. 2017),
PyTorch's arguments.

MultiheadAttention has four Linear children q, k, v, o (drawn in that order from one
generator) where PyTorch has one fused in_proj_weight and out_proj;
onemodel.interop converts between the two. Attention weights are softmax(q·kᵀ/√d_head + mask)
with bool masks (True = masked, as PyTorch) turned into -inf and float masks added; dropout on
the weights is the counter-based Dropout.

TransformerEncoderLayer's children are attn, ff1, ff2 (drawn in that order), norm1, norm2 and
the dropouts; TransformerEncoder deep-copies a layer into children layer0, layer1, ... so state
names read layer0.attn.q.weight (PyTorch's layers.0.self_attn.in_proj_weight). Dropout seeds:
the attention's dropout uses `seed`, the layer's three others seed+1..seed+3, and copy i of an
encoder adds 4·i to every seed of its layer, so no two dropouts share a mask stream (the
decoder likewise, with its six dropouts: 6·i). Without `seed`, each dropout takes its seed from
the default generator when it is built.
"""
from __future__ import annotations

import copy
import math
from typing import Any, Callable, Optional, Union

import numpy as np

from .. import functional as F
from ..functional.attention import attend, causal_mask
from ..random import Generator
from ..tensor import Tensor, float32, to_float32_on_cpu
from .init import resolve_generator, xavier_normal_, xavier_uniform_
from .layers import Dropout, LayerNorm, Linear, _positive
from .module import Module, Parameter, check_factory_kwargs


def _offset(seed: Optional[int], k: int) -> Optional[int]:
    """The seed of a layer's k-th dropout: None stays None (drawn from the default generator)."""
    return None if seed is None else seed + k


def _additive(mask: Any, what: str) -> Optional[np.ndarray]:
    """A mask as a float32 array to add to the scores: bool True -> -inf, floats as given."""
    if mask is None:
        return None
    arr = np.asarray(mask._data if isinstance(mask, Tensor) else mask)
    if arr.dtype == np.bool_:
        return np.where(arr, np.float32(-np.inf), np.float32(0.0))
    if arr.dtype.kind != "f":
        raise TypeError(f"MultiheadAttention: {what} must be bool or floating point, got "
                        f"{arr.dtype}")
    return arr.astype(float32, copy=False)


class MultiheadAttention(Module):
    """forward(query, key, value, key_padding_mask=None, need_weights=True, attn_mask=None,
    average_attn_weights=True, is_causal=False) -> (output, weights (B, Lq, Lk), per head
    (B, heads, Lq, Lk) when not averaged, or None), PyTorch's arguments in PyTorch's order.

    is_causal is PyTorch's hint that attn_mask is the causal mask: it needs attn_mask, and
    where PyTorch acts on it (no key_padding_mask, need_weights=False) the causal mask is used
    in place of attn_mask, as there.

    Inputs are (L, B, E) unless batch_first; unbatched 2-D inputs (L, E), with a
    key_padding_mask (Lk,), give (Lq, E) and weights without the batch axis, as PyTorch.
    key and value may have kdim and vdim features (k and v then take those inputs).
    add_bias_kv appends the parameters bias_k and bias_v (1, 1, E), drawn after o from
    N(0, 1/E) (PyTorch's xavier_normal_), to the projected keys and values; add_zero_attn then
    appends a zero key and value; each extends the masks by a column that masks nothing, so
    Lk in the weights counts them, as PyTorch.
    """

    def __init__(self, embed_dim: int, num_heads: int, dropout: float = 0.0, bias: bool = True,
                 add_bias_kv: bool = False, add_zero_attn: bool = False,
                 kdim: Optional[int] = None, vdim: Optional[int] = None,
                 batch_first: bool = False,
                 device: Any = None, dtype: Any = None, *, generator: Optional[Generator] = None,
                 seed: Optional[int] = None) -> None:
        super().__init__()
        check_factory_kwargs(device, dtype, type(self).__name__)
        self.embed_dim = _positive(embed_dim, "embed_dim", "MultiheadAttention")
        self.num_heads = _positive(num_heads, "num_heads", "MultiheadAttention")
        if self.embed_dim % self.num_heads:
            raise ValueError(f"MultiheadAttention: embed_dim {embed_dim} is not divisible by "
                             f"num_heads {num_heads}")
        self.kdim = self.embed_dim if kdim is None else _positive(kdim, "kdim",
                                                                  "MultiheadAttention")
        self.vdim = self.embed_dim if vdim is None else _positive(vdim, "vdim",
                                                                  "MultiheadAttention")
        self.head_dim = self.embed_dim // self.num_heads
        self.batch_first = bool(batch_first)
        self.add_zero_attn = bool(add_zero_attn)
        g = resolve_generator(generator, seed)
        widths = {"q": self.embed_dim, "k": self.kdim, "v": self.vdim, "o": self.embed_dim}
        for name, width in widths.items():
            setattr(self, name, Linear(width, self.embed_dim, bias, generator=g))
        self.dropout = Dropout(dropout, seed=seed)
        if add_bias_kv:
            for name in ("bias_k", "bias_v"):
                setattr(self, name, xavier_normal_(
                    Parameter(np.zeros((1, 1, self.embed_dim), float32)), generator=g))
        else:
            self.bias_k = self.bias_v = None  # plain attributes, as in PyTorch

    def _mask(self, key_padding_mask: Any, attn_mask: Any, b: int, lq: int,
              lk: int) -> Optional[np.ndarray]:
        """The sum of both masks, shaped to broadcast over scores (B, heads, Lq, Lk)."""
        total = None
        am = _additive(attn_mask, "attn_mask")
        if am is not None:
            if am.shape == (lq, lk):
                total = am
            elif am.shape == (b * self.num_heads, lq, lk):
                total = am.reshape(b, self.num_heads, lq, lk)
            else:
                raise ValueError(f"MultiheadAttention: attn_mask of shape {am.shape}; expected "
                                 f"({lq}, {lk}) or ({b * self.num_heads}, {lq}, {lk})")
        kp = _additive(key_padding_mask, "key_padding_mask")
        if kp is not None:
            if kp.shape != (b, lk):
                raise ValueError(f"MultiheadAttention: key_padding_mask of shape {kp.shape}; "
                                 f"expected ({b}, {lk})")
            kp = kp.reshape(b, 1, 1, lk)
            total = kp if total is None else total + kp
        return total

    def _heads(self, x: Tensor, b: int, length: int) -> Tensor:
        """(B, L, E) -> (B, heads, L, head_dim)."""
        return F.permute(F.reshape(x, (b, length, self.num_heads, self.head_dim)), (0, 2, 1, 3))

    def forward(self, query: Tensor, key: Tensor, value: Tensor, key_padding_mask: Any = None,
                need_weights: bool = True, attn_mask: Any = None,
                average_attn_weights: bool = True, is_causal: bool = False) -> tuple:
        unbatched = query.ndim == 2
        rank = 2 if unbatched else 3
        for name, t, width, what in (("query", query, self.embed_dim, "embed_dim"),
                                     ("key", key, self.kdim, "kdim"),
                                     ("value", value, self.vdim, "vdim")):
            if t.ndim != rank or t.shape[-1] != width:
                raise ValueError(f"MultiheadAttention: {name} of shape {t.shape} must be "
                                 f"{rank}-D (as query {query.shape}) with {what} {width} last")
        if is_causal and attn_mask is None:
            raise RuntimeError("MultiheadAttention: is_causal=True is a hint that attn_mask is "
                               "the causal mask and needs attn_mask (PyTorch's rule)")
        if unbatched:
            # One sequence, as PyTorch: a batch of 1 whatever batch_first says.
            query, key, value = (F.unsqueeze(t, 0) for t in (query, key, value))
            if key_padding_mask is not None:
                key_padding_mask = np.asarray(key_padding_mask._data if isinstance(
                    key_padding_mask, Tensor) else key_padding_mask)[None]
        elif not self.batch_first:
            query, key, value = (F.transpose(t, 0, 1) for t in (query, key, value))
        b, lq = query.shape[:2]
        lk = key.shape[1]
        if key.shape[:2] != value.shape[:2] or key.shape[0] != b:
            raise ValueError(f"MultiheadAttention: query {query.shape}, key {key.shape} and "
                             f"value {value.shape} disagree in batch or key length")
        mask = self._mask(key_padding_mask, attn_mask, b, lq, lk)
        # q, k, v in this order: the order of the graph's nodes fixes the order in which the
        # gradients of a shared input (self-attention) are summed, and so the bits.
        q, k, v = self.q(query), self.k(key), self.v(value)
        extra = [] if self.bias_k is None else [(self.bias_k, self.bias_v)]
        if self.add_zero_attn:
            zero = Tensor._wrap(np.zeros((1, 1, self.embed_dim), float32))
            extra.append((zero, zero))
        if extra:
            k = F.cat([k] + [bk.expand(b, 1, self.embed_dim) for bk, _ in extra], 1)
            v = F.cat([v] + [bv.expand(b, 1, self.embed_dim) for _, bv in extra], 1)
            if mask is not None:
                mask = np.pad(mask, [(0, 0)] * (mask.ndim - 1) + [(0, len(extra))])
            lk += len(extra)
        if is_causal and key_padding_mask is None and not need_weights:
            # Where PyTorch trusts the hint, it attends causally and ignores attn_mask itself.
            mask = causal_mask(lq, lk)
        weights: Optional[Tensor]
        out, weights = attend(self._heads(q, b, lq), self._heads(k, b, lk),
                              self._heads(v, b, lk), mask, 1.0 / math.sqrt(self.head_dim),
                              self.dropout)
        out = F.reshape(F.permute(out, (0, 2, 1, 3)), (b, lq, self.embed_dim))
        out = self.o(out)
        if not need_weights:
            weights = None
        elif average_attn_weights and weights is not None:
            weights = F.mean(weights, 1)
        if unbatched:
            return F.squeeze(out, 0), None if weights is None else F.squeeze(weights, 0)
        if not self.batch_first:
            out = F.transpose(out, 0, 1)
        return out, weights

    def extra_repr(self) -> str:
        return (f"embed_dim={self.embed_dim}, num_heads={self.num_heads}"
                + "".join(f", {name}={getattr(self, name)}" for name in ("kdim", "vdim")
                          if getattr(self, name) != self.embed_dim))


def _activation(activation: Any, layer: str) -> str:
    """The activation's name: "relu" or "gelu", or onemodel's F.relu / F.gelu as PyTorch code
    passes them; other callables are refused."""
    for name, fn in (("relu", F.relu), ("gelu", F.gelu)):
        if activation is fn or (isinstance(activation, str) and activation == name):
            return name
    raise ValueError(f"{layer}: activation must be 'relu', 'gelu', F.relu or F.gelu "
                     f"(onemodel.functional), got {activation!r}")


class _TransformerLayer(Module):
    """The blocks the encoder and decoder layers share; inputs are batch first."""

    def _attend(self, attn: MultiheadAttention, drop: Dropout, x: Tensor, memory: Tensor,
                mask: Any, padding: Any, is_causal: bool) -> Tensor:
        return drop(attn(x, memory, memory, key_padding_mask=padding, attn_mask=mask,
                         need_weights=False, is_causal=is_causal)[0])

    def _feed_forward(self, x: Tensor, drop: Dropout) -> Tensor:
        # One name for every stage, so that no stage's output outlives the next one (ReLU and
        # dropout keep masks, not outputs): the activation is freed once dropped.
        h = self.ff1(x)
        h = F.relu(h) if self.activation == "relu" else F.gelu(h)
        h = self.dropout(h)
        h = self.ff2(h)
        return drop(h)


class TransformerEncoderLayer(_TransformerLayer):
    """Self-attention and a feed-forward block, each with a residual and a LayerNorm, after
    (norm_first=False) or before (norm_first=True) the block. Input (L, B, d_model) unless
    batch_first, or unbatched (L, d_model); the arguments are PyTorch's, in PyTorch's order."""

    def __init__(self, d_model: int, nhead: int, dim_feedforward: int = 2048,
                 dropout: float = 0.1, activation: Union[str, Callable] = "relu",
                 layer_norm_eps: float = 1e-5, batch_first: bool = False,
                 norm_first: bool = False, bias: bool = True,
                 device: Any = None, dtype: Any = None, *,
                 generator: Optional[Generator] = None, seed: Optional[int] = None) -> None:
        super().__init__()
        check_factory_kwargs(device, dtype, type(self).__name__)
        self.activation = _activation(activation, "TransformerEncoderLayer")
        self.norm_first = bool(norm_first)
        self.batch_first = bool(batch_first)
        g = resolve_generator(generator, seed)
        # bias=False drops every bias: the attention's, the feed-forward's and the norms'.
        self.attn = MultiheadAttention(d_model, nhead, dropout, bias, batch_first=True,
                                       generator=g, seed=seed)
        self.ff1 = Linear(d_model, dim_feedforward, bias, generator=g)
        self.ff2 = Linear(dim_feedforward, d_model, bias, generator=g)
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias)
        self.dropout = Dropout(dropout, seed=_offset(seed, 1))
        self.dropout1 = Dropout(dropout, seed=_offset(seed, 2))
        self.dropout2 = Dropout(dropout, seed=_offset(seed, 3))

    def forward(self, src: Tensor, src_mask: Any = None, src_key_padding_mask: Any = None,
                is_causal: bool = False) -> Tensor:
        """is_causal is PyTorch's hint that src_mask is the causal mask (see
        MultiheadAttention.forward)."""
        # The attention takes an unbatched (L, d_model) input as it is.
        keep = self.batch_first or src.ndim == 2
        x = src if keep else F.transpose(src, 0, 1)

        def attention(h: Tensor) -> Tensor:
            return self._attend(self.attn, self.dropout1, h, h, src_mask, src_key_padding_mask,
                                is_causal)

        if self.norm_first:
            x = x + attention(self.norm1(x))
            x = x + self._feed_forward(self.norm2(x), self.dropout2)
        else:
            x = self.norm1(x + attention(x))
            x = self.norm2(x + self._feed_forward(x, self.dropout2))
        return x if keep else F.transpose(x, 0, 1)


class TransformerDecoderLayer(_TransformerLayer):
    """Self-attention over the target, attention to the memory, and a feed-forward block, each
    with a residual and a LayerNorm (after the block, or before it with norm_first). Inputs
    (L, B, d_model) unless batch_first; the arguments are PyTorch's, in PyTorch's order.

    Children: attn, cross_attn, ff1, ff2 (drawn in that order; PyTorch's self_attn,
    multihead_attn, linear1, linear2), norm1..norm3 and the dropouts. Dropout seeds: attn's
    `seed`, cross_attn's seed+1, the layer's dropout seed+2 and dropout1..dropout3 seed+3..5.
    """

    def __init__(self, d_model: int, nhead: int, dim_feedforward: int = 2048,
                 dropout: float = 0.1, activation: Union[str, Callable] = "relu",
                 layer_norm_eps: float = 1e-5, batch_first: bool = False,
                 norm_first: bool = False, bias: bool = True,
                 device: Any = None, dtype: Any = None, *,
                 generator: Optional[Generator] = None, seed: Optional[int] = None) -> None:
        super().__init__()
        check_factory_kwargs(device, dtype, type(self).__name__)
        self.activation = _activation(activation, "TransformerDecoderLayer")
        self.norm_first = bool(norm_first)
        self.batch_first = bool(batch_first)
        g = resolve_generator(generator, seed)
        # bias=False drops every bias: both attentions', the feed-forward's and the norms'.
        self.attn = MultiheadAttention(d_model, nhead, dropout, bias, batch_first=True,
                                       generator=g, seed=seed)
        self.cross_attn = MultiheadAttention(d_model, nhead, dropout, bias, batch_first=True,
                                             generator=g, seed=_offset(seed, 1))
        self.ff1 = Linear(d_model, dim_feedforward, bias, generator=g)
        self.ff2 = Linear(dim_feedforward, d_model, bias, generator=g)
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias)
        self.norm3 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias)
        self.dropout = Dropout(dropout, seed=_offset(seed, 2))
        self.dropout1 = Dropout(dropout, seed=_offset(seed, 3))
        self.dropout2 = Dropout(dropout, seed=_offset(seed, 4))
        self.dropout3 = Dropout(dropout, seed=_offset(seed, 5))

    def forward(self, tgt: Tensor, memory: Tensor, tgt_mask: Any = None,
                memory_mask: Any = None, tgt_key_padding_mask: Any = None,
                memory_key_padding_mask: Any = None, tgt_is_causal: bool = False,
                memory_is_causal: bool = False) -> Tensor:
        """The is_causal flags are PyTorch's hints that the masks are causal (see
        MultiheadAttention.forward)."""
        # The attentions take unbatched (L, d_model) inputs as they are.
        keep = self.batch_first or tgt.ndim == 2
        x, mem = (t if keep else F.transpose(t, 0, 1) for t in (tgt, memory))

        def self_attention(h: Tensor) -> Tensor:
            return self._attend(self.attn, self.dropout1, h, h, tgt_mask, tgt_key_padding_mask,
                                tgt_is_causal)

        def cross_attention(h: Tensor) -> Tensor:
            return self._attend(self.cross_attn, self.dropout2, h, mem, memory_mask,
                                memory_key_padding_mask, memory_is_causal)

        if self.norm_first:
            x = x + self_attention(self.norm1(x))
            x = x + cross_attention(self.norm2(x))
            x = x + self._feed_forward(self.norm3(x), self.dropout3)
        else:
            x = self.norm1(x + self_attention(x))
            x = self.norm2(x + cross_attention(x))
            x = self.norm3(x + self._feed_forward(x, self.dropout3))
        return x if keep else F.transpose(x, 0, 1)


class _LayerStack(Module):
    """num_layers deep copies of a layer (equal initial weights, as PyTorch) as children
    layer0, layer1, ..., then an optional final `norm`. Copy i adds n·i to the seed of each of
    its n dropouts, so no two dropouts of the stack share a mask stream."""

    def __init__(self, layer: Module, num_layers: int, norm: Optional[Module]) -> None:
        super().__init__()
        name = type(self).__name__
        for what, value in (("layer", layer), ("norm", norm)):
            if not isinstance(value, Module) and (what == "layer" or value is not None):
                raise TypeError(f"{name}: {what} must be a Module, got {type(value).__name__}")
        self.num_layers = _positive(num_layers, "num_layers", name)
        per_layer = sum(isinstance(m, Dropout) for m in layer.modules())
        for i in range(self.num_layers):
            copy_i = copy.deepcopy(layer)
            for m in copy_i.modules():
                if isinstance(m, Dropout):
                    m.seed += per_layer * i
            setattr(self, f"layer{i}", copy_i)
        self.norm = norm  # None stays a plain attribute, as in PyTorch

    def _layers(self) -> list:
        return [getattr(self, f"layer{i}") for i in range(self.num_layers)]

    def _finish(self, x: Tensor) -> Tensor:
        return x if self.norm is None else self.norm(x)


class TransformerEncoder(_LayerStack):
    """The encoder layers run in order, then `norm` if given."""

    def __init__(self, layer: TransformerEncoderLayer, num_layers: int,
                 norm: Optional[Module] = None) -> None:
        super().__init__(layer, num_layers, norm)

    def forward(self, src: Tensor, mask: Any = None, src_key_padding_mask: Any = None,
                is_causal: Optional[bool] = None) -> Tensor:
        """is_causal=None is PyTorch's "detect": its detection only picks a faster path that
        gives the same result, so None runs as False."""
        x = src
        for layer in self._layers():
            x = layer(x, mask, src_key_padding_mask, bool(is_causal))
        return self._finish(x)


class TransformerDecoder(_LayerStack):
    """The decoder layers run in order over (tgt, memory), then `norm` if given."""

    def __init__(self, decoder_layer: TransformerDecoderLayer, num_layers: int,
                 norm: Optional[Module] = None) -> None:
        super().__init__(decoder_layer, num_layers, norm)

    def forward(self, tgt: Tensor, memory: Tensor, tgt_mask: Any = None,
                memory_mask: Any = None, tgt_key_padding_mask: Any = None,
                memory_key_padding_mask: Any = None, tgt_is_causal: Optional[bool] = None,
                memory_is_causal: bool = False) -> Tensor:
        """tgt_is_causal=None is PyTorch's "detect", which only picks a faster path: None runs
        as False."""
        x = tgt
        for layer in self._layers():
            x = layer(x, memory, tgt_mask, memory_mask, tgt_key_padding_mask,
                      memory_key_padding_mask, bool(tgt_is_causal), memory_is_causal)
        return self._finish(x)


class Transformer(Module):
    """torch.nn.Transformer: `encoder` (num_encoder_layers TransformerEncoderLayers and a final
    LayerNorm) and `decoder` (num_decoder_layers TransformerDecoderLayers and a final LayerNorm),
    so state names and interop are the stacks'; forward(src, tgt, ...) returns the decoder's
    output over the encoded src. As PyTorch, every parameter of two or more dimensions is then
    drawn again from Xavier-uniform (in state order, from `generator`, else Generator(seed),
    else the default generator). Dropout seeds: the encoder's layers from `seed`, the decoder's
    from seed + 4·num_encoder_layers, so no two dropouts share a mask stream."""

    def __init__(self, d_model: int = 512, nhead: int = 8, num_encoder_layers: int = 6,
                 num_decoder_layers: int = 6, dim_feedforward: int = 2048, dropout: float = 0.1,
                 activation: Union[str, Callable] = "relu", custom_encoder: Optional[Any] = None,
                 custom_decoder: Optional[Any] = None, layer_norm_eps: float = 1e-5,
                 batch_first: bool = False, norm_first: bool = False, bias: bool = True,
                 device: Any = None, dtype: Any = None, *,
                 generator: Optional[Generator] = None, seed: Optional[int] = None) -> None:
        super().__init__()
        check_factory_kwargs(device, dtype, type(self).__name__)
        if custom_encoder is not None or custom_decoder is not None:
            raise ValueError("Transformer: custom_encoder and custom_decoder are not supported; "
                             "compose TransformerEncoder and TransformerDecoder instead")
        g = resolve_generator(generator, seed)
        options: dict[str, Any] = dict(
            dim_feedforward=dim_feedforward, dropout=dropout, activation=activation,
            layer_norm_eps=layer_norm_eps, batch_first=batch_first, norm_first=norm_first,
            bias=bias, generator=g)
        encoder_layers = _positive(num_encoder_layers, "num_encoder_layers", "Transformer")
        self.encoder = TransformerEncoder(
            TransformerEncoderLayer(d_model, nhead, seed=seed, **options), encoder_layers,
            LayerNorm(d_model, eps=layer_norm_eps, bias=bias))
        self.decoder = TransformerDecoder(
            TransformerDecoderLayer(d_model, nhead, seed=_offset(seed, 4 * encoder_layers),
                                    **options),
            _positive(num_decoder_layers, "num_decoder_layers", "Transformer"),
            LayerNorm(d_model, eps=layer_norm_eps, bias=bias))
        self.d_model, self.nhead, self.batch_first = d_model, nhead, bool(batch_first)
        for p in self.parameters():
            if p.ndim > 1:
                xavier_uniform_(p, generator=g)

    def forward(self, src: Tensor, tgt: Tensor, src_mask: Any = None, tgt_mask: Any = None,
                memory_mask: Any = None, src_key_padding_mask: Any = None,
                tgt_key_padding_mask: Any = None, memory_key_padding_mask: Any = None,
                src_is_causal: Optional[bool] = None, tgt_is_causal: Optional[bool] = None,
                memory_is_causal: bool = False) -> Tensor:
        batch = 0 if self.batch_first else 1
        if src.ndim == 3 and tgt.ndim == 3 and src.shape[batch] != tgt.shape[batch]:
            raise ValueError(f"Transformer: src {src.shape} and tgt {tgt.shape} differ in batch "
                             f"size (dimension {batch}, batch_first={self.batch_first})")
        if src.shape[-1] != self.d_model or tgt.shape[-1] != self.d_model:
            raise ValueError(f"Transformer: src {src.shape} and tgt {tgt.shape} must have "
                             f"d_model = {self.d_model} features last")
        memory = self.encoder(src, src_mask, src_key_padding_mask, src_is_causal)
        return self.decoder(tgt, memory, tgt_mask, memory_mask, tgt_key_padding_mask,
                            memory_key_padding_mask, tgt_is_causal, memory_is_causal)

    @staticmethod
    def generate_square_subsequent_mask(sz: int, device: Any = None, dtype: Any = None) -> Tensor:
        """The (sz, sz) causal mask: 0.0 where query i may see key j <= i, -inf above the
        diagonal, as torch's (device and dtype: the CPU and float32 only)."""
        to_float32_on_cpu((device, dtype), {}, "Transformer.generate_square_subsequent_mask")
        return Tensor._wrap(causal_mask(_positive(sz, "sz", "generate_square_subsequent_mask"),
                                        sz))
