"""Port of karpathy/llm.c train_gpt2.py (the PyTorch reference) at a tiny size: GPT-2 with
NewGELU written out (tanh, pow), attention through a registered tril buffer, init drawn from a
seeded torch.Generator (normal_(generator=)), tied weights, the float32 model file and the debug
state (header as an int32 tensor, vocab padded with F.pad, gradients), a shard loader over
headered uint16 .bin files, gradient accumulation, clip_grad_norm_, cosine rate on the
param_groups and greedy-free top-k sampling. Tokens are the bytes of localdata.TEXT; the bfloat16
model file is left out (onemodel has no bfloat16 tensors)."""
import argparse
import glob
import inspect
import math
import os
from contextlib import nullcontext
from dataclasses import dataclass

import localdata
import numpy as np
import torch
import torch.nn as nn
from torch.nn import functional as F

FLASH = 0


class NewGELU(nn.Module):
    def forward(self, input):
        return 0.5 * input * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) *
                                               (input + 0.044715 * torch.pow(input, 3.0))))


class CausalSelfAttention(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd)
        self.c_proj = nn.Linear(config.n_embd, config.n_embd)
        self.c_proj.LLMC_RESIDUAL_SCALE_FLAG = 1
        self.n_head, self.n_embd = config.n_head, config.n_embd
        self.register_buffer("bias", torch.tril(torch.ones(config.block_size, config.block_size))
                             .view(1, 1, config.block_size, config.block_size))

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        if FLASH:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float('-inf'))
            y = F.softmax(att, dim=-1) @ v
        return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))


class MLP(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.c_fc = nn.Linear(config.n_embd, 4 * config.n_embd)
        self.gelu = NewGELU()
        self.c_proj = nn.Linear(4 * config.n_embd, config.n_embd)
        self.c_proj.LLMC_RESIDUAL_SCALE_FLAG = 1

    def forward(self, x):
        return self.c_proj(self.gelu(self.c_fc(x)))


class Block(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.ln_1 = nn.LayerNorm(config.n_embd)
        self.attn = CausalSelfAttention(config)
        self.ln_2 = nn.LayerNorm(config.n_embd)
        self.mlp = MLP(config)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


@dataclass
class GPTConfig:
    block_size: int = 16
    vocab_size: int = 256
    n_layer: int = 2
    n_head: int = 2
    n_embd: int = 32


class GPT(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(config.vocab_size, config.n_embd),
            wpe=nn.Embedding(config.block_size, config.n_embd),
            h=nn.ModuleList([Block(config) for _ in range(config.n_layer)]),
            ln_f=nn.LayerNorm(config.n_embd),
        ))
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        self.lm_head.LLMC_SKIP_INIT = 1
        self.transformer.wte.weight = self.lm_head.weight
        self.init_rng = torch.Generator()
        self.init_rng.manual_seed(42)
        self.apply(self._init_weights)

    def _init_weights(self, module):
        if isinstance(module, nn.Linear):
            std = 0.02 if not hasattr(module, 'LLMC_RESIDUAL_SCALE_FLAG') else \
                0.02 / math.sqrt(2 * self.config.n_layer)
            if not hasattr(module, 'LLMC_SKIP_INIT'):
                torch.nn.init.normal_(module.weight, mean=0.0, std=std, generator=self.init_rng)
            if module.bias is not None:
                torch.nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02, generator=self.init_rng)

    def forward(self, idx, targets=None, return_logits=True):
        b, t = idx.size()
        pos = torch.arange(0, t, dtype=torch.long, device=idx.device)
        x = self.transformer.wte(idx) + self.transformer.wpe(pos)
        for block in self.transformer.h:
            x = block(x)
        x = self.transformer.ln_f(x)
        if targets is not None:
            logits = self.lm_head(x)
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1),
                                   ignore_index=-1)
        else:
            logits = self.lm_head(x[:, [-1], :])
            loss = None
        if not return_logits:
            logits = None
        return logits, loss

    def configure_optimizers(self, weight_decay, learning_rate, betas, device_type):
        param_dict = {pn: p for pn, p in self.named_parameters() if p.requires_grad}
        decay_params = [p for n, p in param_dict.items() if p.dim() >= 2]
        nodecay_params = [p for n, p in param_dict.items() if p.dim() < 2]
        optim_groups = [{'params': decay_params, 'weight_decay': weight_decay},
                        {'params': nodecay_params, 'weight_decay': 0.0}]
        fused_available = 'fused' in inspect.signature(torch.optim.AdamW).parameters
        use_fused = fused_available and device_type == 'cuda'
        print(f"using fused AdamW: {use_fused}")
        return torch.optim.AdamW(optim_groups, lr=learning_rate, betas=betas, fused=use_fused)

    @torch.no_grad()
    def generate(self, idx, max_new_tokens, temperature=1.0, top_k=None):
        for _ in range(max_new_tokens):
            idx_cond = idx if idx.size(1) <= self.config.block_size else \
                idx[:, -self.config.block_size:]
            logits, _ = self(idx_cond)
            logits = logits[:, -1, :] / temperature
            if top_k is not None:
                v, _ = torch.topk(logits, min(top_k, logits.size(-1)))
                logits[logits < v[:, [-1]]] = -float('Inf')
            probs = F.softmax(logits, dim=-1)
            idx = torch.cat((idx, torch.multinomial(probs, num_samples=1)), dim=1)
        return idx


def write_datafile(filename, toks):
    header = np.zeros(256, dtype=np.int32)
    header[0], header[1], header[2] = 20240520, 1, len(toks)
    with open(filename, "wb") as f:
        f.write(header.tobytes())
        f.write(np.array(toks, dtype=np.uint16).tobytes())


def _load_data_shard(filename):
    with open(filename, "rb") as f:
        header = np.frombuffer(f.read(256 * 4), dtype=np.int32)
        assert header[0] == 20240520, "magic number mismatch in the data .bin file"
        tokens = np.frombuffer(f.read(), dtype=np.uint16)
    assert len(tokens) == header[2], "number of tokens read does not match header"
    return tokens


class DistributedDataLoader:
    def __init__(self, filename_pattern, B, T, process_rank, num_processes):
        self.process_rank, self.num_processes, self.B, self.T = process_rank, num_processes, B, T
        self.files = sorted(glob.glob(filename_pattern))
        ntok_total = sum(len(_load_data_shard(f)) for f in self.files)
        print(f"DataLoader: total number of tokens: {ntok_total:,} across {len(self.files)} files")
        self.reset()

    def reset(self):
        self.current_shard = 0
        self.current_position = self.process_rank * self.B * self.T
        self.tokens = _load_data_shard(self.files[self.current_shard])

    def advance(self):
        self.current_shard = (self.current_shard + 1) % len(self.files)
        self.current_position = self.process_rank * self.B * self.T
        self.tokens = _load_data_shard(self.files[self.current_shard])

    def next_batch(self):
        B, T = self.B, self.T
        buf = self.tokens[self.current_position: self.current_position + B * T + 1]
        buf = torch.tensor(buf.astype(np.int32), dtype=torch.long)
        x, y = buf[:-1].view(B, T), buf[1:].view(B, T)
        self.current_position += B * T * self.num_processes
        if self.current_position + (B * T * self.num_processes + 1) > len(self.tokens):
            self.advance()
        return x, y


def write_fp32(tensor, file):
    file.write(tensor.detach().cpu().to(torch.float32).numpy().tobytes())


def write_tensors(model_tensors, L, file):
    write_fp32(model_tensors["transformer.wte.weight"], file)
    write_fp32(model_tensors["transformer.wpe.weight"], file)
    for part in ("ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias",
                 "attn.c_proj.weight", "attn.c_proj.bias", "ln_2.weight", "ln_2.bias",
                 "mlp.c_fc.weight", "mlp.c_fc.bias", "mlp.c_proj.weight", "mlp.c_proj.bias"):
        for i in range(L):
            write_fp32(model_tensors[f"transformer.h.{i}.{part}"], file)
    write_fp32(model_tensors["transformer.ln_f.weight"], file)
    write_fp32(model_tensors["transformer.ln_f.bias"], file)


@torch.no_grad()
def pad_vocab(tensor, multiple=128, value=0):
    V = tensor.size(0)
    Vp = ((V + multiple - 1) // multiple) * multiple
    pad_rows = Vp - V
    return tensor if pad_rows == 0 else F.pad(tensor, (0, 0, 0, pad_rows), value=value)


def model_header(model, version):
    header = torch.zeros(256, dtype=torch.int32)
    header[0], header[1] = 20240326, version
    header[2], header[3] = model.config.block_size, model.config.vocab_size
    header[4], header[5], header[6] = model.config.n_layer, model.config.n_head, model.config.n_embd
    return header


def write_model(model, filename):
    header = model_header(model, 3)
    params = {name: param.cpu() for name, param in model.named_parameters()}
    wte_padded = pad_vocab(params["transformer.wte.weight"])
    params["transformer.wte.weight"] = wte_padded
    header[7] = wte_padded.size(0)
    with open(filename, "wb") as file:
        file.write(header.numpy().tobytes())
        write_tensors(params, model.config.n_layer, file)
    print(f"wrote {filename}")


def write_state(model, x, y, logits, loss, filename):
    header = torch.zeros(256, dtype=torch.int32)
    header[0], header[1], header[2], header[3] = 20240327, 2, x.size(0), x.size(1)
    grads = {name: param.grad.cpu() for name, param in model.named_parameters()}
    grads["transformer.wte.weight"] = pad_vocab(grads["transformer.wte.weight"])
    with open(filename, "wb") as file:
        file.write(header.numpy().tobytes())
        file.write(x.cpu().numpy().astype("int32").tobytes())
        file.write(y.cpu().numpy().astype("int32").tobytes())
        write_fp32(logits.cpu(), file)
        write_fp32(loss.cpu(), file)
        write_tensors(grads, model.config.n_layer, file)
    print(f"wrote {filename}")


if __name__ == "__main__":
    print(f"Running pytorch {torch.version.__version__}")
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch_size", type=int, default=2)
    parser.add_argument("--sequence_length", type=int, default=16)
    parser.add_argument("--total_batch_size", type=int, default=64)
    parser.add_argument("--num_iterations", type=int, default=4)
    parser.add_argument("--learning_rate", type=float, default=1e-3)
    parser.add_argument("--warmup_iters", type=int, default=1)
    parser.add_argument("--learning_rate_decay_frac", type=float, default=0.1)
    parser.add_argument("--weight_decay", type=float, default=0.1)
    parser.add_argument("--grad_clip", type=float, default=1.0)
    parser.add_argument("--val_loss_every", type=int, default=2)
    parser.add_argument("--val_max_steps", type=int, default=2)
    parser.add_argument("--sample_every", type=int, default=0)
    parser.add_argument("--write_tensors", type=int, default=1)
    args = parser.parse_args()
    B, T = args.batch_size, args.sequence_length
    device = "cuda" if torch.cuda.is_available() else "cpu"
    device_type = 'cuda' if 'cuda' in device else 'cpu'
    grad_accum_steps = args.total_batch_size // (B * T)
    print(f"=> calculated gradient accumulation steps: {grad_accum_steps}")
    ctx = torch.amp.autocast(device_type=device_type, dtype=torch.bfloat16) \
        if device_type == "cuda" else nullcontext()
    torch.manual_seed(42)

    tokens = list(localdata.TEXT.encode())
    cut = len(tokens) * 9 // 10
    os.makedirs("data", exist_ok=True)
    write_datafile("data/tiny_val.bin", tokens[cut:])
    write_datafile("data/tiny_train_000.bin", tokens[:cut // 2])
    write_datafile("data/tiny_train_001.bin", tokens[cut // 2:cut])
    model = GPT(GPTConfig())
    model.train()
    model.to(device)
    train_loader = DistributedDataLoader("data/tiny_train_*.bin", B, T, 0, 1)
    val_loader = DistributedDataLoader("data/tiny_val.bin", B, T, 0, 1)
    if args.write_tensors:
        x, y = train_loader.next_batch()
        logits, loss = model(x, y)
        loss.backward()
        print(f"debug state loss {loss.item():.7f}")
        write_model(model, "gpt2_tiny.bin")
        write_state(model, x, y, logits, loss, "gpt2_tiny_debug_state.bin")
        train_loader.reset()
    raw_model = model
    optimizer = raw_model.configure_optimizers(weight_decay=args.weight_decay,
                                               learning_rate=args.learning_rate,
                                               betas=(0.9, 0.95), device_type=device)

    def get_lr(it):
        min_lr = args.learning_rate * args.learning_rate_decay_frac
        if it < args.warmup_iters:
            return args.learning_rate * (it + 1) / args.warmup_iters
        if it > args.num_iterations:
            return min_lr
        decay_ratio = (it - args.warmup_iters) / (args.num_iterations - args.warmup_iters)
        coeff = 0.5 * (1.0 + math.cos(math.pi * decay_ratio))
        return min_lr + coeff * (args.learning_rate - min_lr)

    for step in range(args.num_iterations + 1):
        last_step = (step == args.num_iterations)
        if args.val_loss_every > 0 and (step % args.val_loss_every == 0 or last_step):
            model.eval()
            val_loader.reset()
            with torch.no_grad():
                val_loss = 0.0
                for _ in range(args.val_max_steps):
                    x, y = val_loader.next_batch()
                    _, loss = model(x, y, return_logits=False)
                    val_loss += loss.item()
                val_loss /= args.val_max_steps
            print(f"val loss {val_loss}")
        if last_step:
            yg = raw_model.generate(torch.tensor([10], dtype=torch.long)[None, ...], 8, top_k=40)
            print('sample', bytes(yg[0].tolist()))
            break
        model.train()
        optimizer.zero_grad(set_to_none=True)
        lossf = 0.0
        for micro_step in range(grad_accum_steps):
            x, y = train_loader.next_batch()
            with ctx:
                _, loss = model(x, y, return_logits=False)
                loss = loss / grad_accum_steps
                lossf += loss.detach()
            loss.backward()
        lossf = lossf.item()
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), args.grad_clip)
        lr = get_lr(step)
        for param_group in optimizer.param_groups:
            param_group['lr'] = lr
        optimizer.step()
        if device == "cuda":
            torch.cuda.synchronize()
        print(f"step {step + 1:4d}/{args.num_iterations} | train loss {lossf:.6f} | "
              f"norm {norm:.4f} | lr {lr:.2e}")
