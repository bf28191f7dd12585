"""Three models as PyTorch users write them, each written once against a namespace.

`build_*(nn, F, ...)` takes the library's `nn` and functional modules (onemodel.nn and
onemodel.functional, or torch.nn and torch.nn.functional) and returns the model, so one text
builds both and tests/train/test_ported_models.py compares them step for step:

- a ResNet-style image classifier: BasicBlocks (two 3x3 convolutions with batch norm, an
  identity or a strided 1x1 downsample on the shortcut), global average pooling, a linear head;
- a nanoGPT-style decoder-only transformer: token and position embeddings, pre-norm blocks of
  causal self-attention (scaled_dot_product_attention with is_causal) and a GELU MLP, layer
  norms without bias, the output layer tied to the token embedding, nanoGPT's N(0, 0.02)
  initialisation;
- a 1-D convolutional sequence classifier: embedding, a strided and a plain Conv1d with ReLU,
  mean over time, a linear head.
"""
from __future__ import annotations

from typing import Any


def build_resnet(nn: Any, F: Any, classes: int = 10, width: int = 16) -> Any:
    class BasicBlock(nn.Module):
        def __init__(self, cin: int, cout: int, stride: int) -> None:
            super().__init__()
            self.conv1 = nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False)
            self.bn1 = nn.BatchNorm2d(cout)
            self.conv2 = nn.Conv2d(cout, cout, 3, padding=1, bias=False)
            self.bn2 = nn.BatchNorm2d(cout)
            self.downsample = (nn.Sequential(nn.Conv2d(cin, cout, 1, stride=stride, bias=False),
                                             nn.BatchNorm2d(cout))
                               if stride != 1 or cin != cout else None)

        def forward(self, x: Any) -> Any:
            out = F.relu(self.bn1(self.conv1(x)))
            out = self.bn2(self.conv2(out))
            shortcut = x if self.downsample is None else self.downsample(x)
            return F.relu(out + shortcut)

    class ResNet(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.stem = nn.Sequential(nn.Conv2d(3, width, 3, padding=1, bias=False),
                                      nn.BatchNorm2d(width), nn.ReLU())
            self.layer1 = BasicBlock(width, width, 1)
            self.layer2 = BasicBlock(width, 2 * width, 2)
            self.pool = nn.AdaptiveAvgPool2d(1)
            self.fc = nn.Linear(2 * width, classes)

        def forward(self, x: Any) -> Any:
            x = self.layer2(self.layer1(self.stem(x)))
            return self.fc(self.pool(x).flatten(1))

    return ResNet()


def build_gpt(nn: Any, F: Any, vocab: int, block: int = 32, layers: int = 2, heads: int = 4,
              width: int = 64) -> Any:
    class CausalSelfAttention(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.c_attn = nn.Linear(width, 3 * width)
            self.c_proj = nn.Linear(width, width)

        def forward(self, x: Any) -> Any:
            b, t, c = x.shape
            q, k, v = self.c_attn(x).split(width, dim=2)
            q, k, v = (z.reshape(b, t, heads, c // heads).transpose(1, 2) for z in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return self.c_proj(y.transpose(1, 2).reshape(b, t, c))

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.ln_1 = nn.LayerNorm(width, bias=False)
            self.attn = CausalSelfAttention()
            self.ln_2 = nn.LayerNorm(width, bias=False)
            self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(),
                                     nn.Linear(4 * width, width))

        def forward(self, x: Any) -> Any:
            x = x + self.attn(self.ln_1(x))
            return x + self.mlp(self.ln_2(x))

    class GPT(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.block = block
            self.wte = nn.Embedding(vocab, width)
            self.wpe = nn.Embedding(block, width)
            self.h = nn.ModuleList([Block() for _ in range(layers)])
            self.ln_f = nn.LayerNorm(width, bias=False)
            self.lm_head = nn.Linear(width, vocab, bias=False)
            self.lm_head.weight = self.wte.weight  # weight tying: one parameter
            self.apply(self._init_weights)

        @staticmethod
        def _init_weights(module: Any) -> None:
            """nanoGPT's: N(0, 0.02) weights and zero biases, so the first logits are small."""
            if isinstance(module, (nn.Linear, nn.Embedding)):
                nn.init.normal_(module.weight, mean=0.0, std=0.02)
                if getattr(module, "bias", None) is not None:
                    nn.init.zeros_(module.bias)

        def forward(self, idx: Any, positions: Any) -> Any:
            """idx (B, T) token ids and positions (T,) = 0 .. T-1 -> logits (B, T, vocab)."""
            x = self.wte(idx) + self.wpe(positions)
            for layer in self.h:
                x = layer(x)
            return self.lm_head(self.ln_f(x))

    return GPT()


def build_sequence_classifier(nn: Any, F: Any, vocab: int, classes: int = 4,
                              width: int = 32) -> Any:
    class SequenceClassifier(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = nn.Embedding(vocab, width)
            self.conv1 = nn.Conv1d(width, 2 * width, 5, stride=2, padding=2)
            self.conv2 = nn.Conv1d(2 * width, 2 * width, 3, padding=1)
            self.head = nn.Linear(2 * width, classes)

        def forward(self, tokens: Any) -> Any:
            x = self.embed(tokens).transpose(1, 2)  # (B, width, T)
            x = F.relu(self.conv1(x))
            x = F.relu(self.conv2(x))
            return self.head(x.mean(2))

    return SequenceClassifier()
