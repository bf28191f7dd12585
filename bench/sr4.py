"""SR4 against AdamW: kernel speed, and whether a ternary network trains (docs/spec/sr4.txt).

Part 1, kernels at 1 and 2 threads (best of several runs, taken in turns):
  - the optimizer step over 4 million parameters in 4 matrices: SR4 (the step writes q and
    the materialised ternary weights) against onemodel's AdamW and PyTorch's AdamW (foreach),
    in parameters per second; target SR4 >= 1.0x onemodel AdamW;
  - the forward product x (256, 1024) . W^T, W (1024, 1024): onemodel's ternary product
    (adds only, from the plan of the packed state) against onemodel's float32 gemm, numpy and
    PyTorch on the same shape; target ternary >= 1.0x the float32 gemm. The plan (one byte per
    pair of weights) is built once per value of q, so once per optimizer step in training and
    once in inference: "ternary" is the product alone, "+plan" the product and a new plan.
Part 2, training on scikit-learn's digits (1437 train / 360 test images, 8x8 pixels), the MLP
64-256-10 with ReLU, batch 64, 40 epochs, seeds 0, 1, 2:
  - SR4: TernaryLinear layers; q by SR4 (target step 0.05, cosine-annealed through lr), the
    scales by SGD at 0.005 and the biases by SGD at 0.05 (docs/spec/sr4.txt section 5: the scale
    rate about ten times below the bias rate);
  - AdamW: the same MLP with float32 Linear layers, lr 3e-3 cosine-annealed, weight decay 0.01.
  - SR4 conv: a ternary convnet on the 8x8 images (TernaryConv2d 1-16 3x3, ReLU, TernaryConv2d
    16-32 3x3 stride 2, ReLU, TernaryLinear 512-10), trained as the SR4 MLP.
  It prints the test accuracy band (min / mean / max over seeds), the bits of persistent
  training state per weight: of the weight matrices alone (SR4's packed q; AdamW's weight, m
  and v), of everything a checkpoint of model + optimizer holds (tensor bytes of the model and
  optimizer state over the number of weights of the weight tensors) and of the whole file, the
  wall time, and for open question 10 the number of updates each needs to first bring the loss
  on the whole training set below given levels.
Run: python bench/sr4.py [--quick]
"""
from __future__ import annotations

import argparse
import math
import time

import numpy as np
import torch
from _timing import best_seconds

import onemodel as om
import onemodel.functional as F
from onemodel import checkpoint, nn
from onemodel._kernels import _gemm, _sr4
from onemodel.optim import SGD, SR4, AdamW
from onemodel.optim.lr import cosine


# -- part 1: kernels -------------------------------------------------------------------------
def bench_step(threads: int, runs: int) -> None:
    rng = np.random.default_rng(0)
    shapes = [(1024, 1024)] * 4
    n = sum(a * b for a, b in shapes)
    grads = [(rng.standard_normal(s) * 1e-3).astype(np.float32) for s in shapes]

    def leaves():
        ps = [om.Tensor(np.zeros(s, np.float32), requires_grad=True) for s in shapes]
        for p, g in zip(ps, grads):
            p.grad = om.Tensor(g)
        return ps

    sr4 = SR4(leaves(), target_step=0.05)
    adamw = AdamW(leaves(), lr=1e-3)
    tp = [torch.zeros(s, requires_grad=True) for s in shapes]
    for p, g in zip(tp, grads):
        p.grad = torch.from_numpy(g)
    tadamw = torch.optim.AdamW(tp, lr=1e-3, foreach=True)
    om.set_num_threads(threads)
    torch.set_num_threads(threads)
    # PyTorch apart: its thread pool keeps spinning after a call (see bench_forward).
    t_sr4, t_adamw = best_seconds([sr4.step, adamw.step], min_runs=runs)
    t_torch, = best_seconds([tadamw.step], min_runs=runs)
    print(f"step, {n / 1e6:.0f}M params, {threads} thread(s): SR4 {n / t_sr4 / 1e9:.2f} G/s, "
          f"AdamW {n / t_adamw / 1e9:.2f} G/s, torch AdamW {n / t_torch / 1e9:.2f} G/s; "
          f"SR4 / AdamW = {t_adamw / t_sr4:.2f}x, SR4 / torch = {t_torch / t_sr4:.2f}x")


def bench_forward(threads: int, runs: int, m: int = 256, k: int = 1024, n: int = 1024) -> None:
    rng = np.random.default_rng(1)
    x = rng.standard_normal((m, k)).astype(np.float32)
    q = np.zeros((n * k + 1) // 2, np.uint8)
    _sr4.init(q, n * k, 0, 0, 3)
    w = np.empty((n, k), np.float32)
    _sr4.materialize(q, w.reshape(-1), 2, 1)
    codes = np.empty(_sr4.plan_size(n, k), np.uint8)
    _sr4.ternary_plan(q, n, k, 2, codes, threads)
    out = np.empty((m, n), np.float32)
    out3 = out[None]

    def planned():
        _sr4.ternary_plan(q, n, k, 2, codes, threads)
        _sr4.ternary_matmul(x, codes, n, out, threads)

    x3, w3 = x[None], w[None]
    xt, wt = torch.from_numpy(x), torch.from_numpy(w)
    torch.set_num_threads(threads)
    # onemodel's two products in turns, then numpy and PyTorch: their thread pools keep spinning
    # after a call and would slow whatever runs next on this 2-core machine.
    t_tern, t_plan, t_gemm = best_seconds([
        lambda: _sr4.ternary_matmul(x, codes, n, out, threads), planned,
        lambda: _gemm.gemm(x3, w3, out3, 0, 1, threads)], min_runs=runs)
    t_np, t_torch = best_seconds([lambda: x @ w.T, lambda: xt @ wt.T], min_runs=runs)
    gflop = 2 * m * n * k / 1e9
    print(f"forward ({m}, {k}) x ({n}, {k})^T, {threads} thread(s): ternary "
          f"{t_tern * 1e3:.2f} ms (+plan {t_plan * 1e3:.2f} ms), float32 gemm "
          f"{t_gemm * 1e3:.2f} ms ({gflop / t_gemm:.0f} GFLOP/s), numpy {t_np * 1e3:.2f} ms, "
          f"torch {t_torch * 1e3:.2f} ms; ternary / gemm = {t_gemm / t_tern:.2f}x (+plan "
          f"{t_gemm / t_plan:.2f}x), / numpy = {t_np / t_tern:.2f}x, / torch = "
          f"{t_torch / t_tern:.2f}x")


# -- part 2: training -------------------------------------------------------------------------
def digits(seed: int = 0):
    from sklearn.datasets import load_digits
    d = load_digits()
    x = (d.data / 16.0).astype(np.float32)
    y = d.target.astype(np.int64)
    order = np.random.default_rng(seed).permutation(len(y))
    test, train = order[:360], order[360:]
    return x[train], y[train], x[test], y[test]


def weight_count(model: nn.Module) -> int:
    ternary = sum(w.numel() for w in nn.ternary_weights(model))
    floats = sum(p.numel() for n, p in model.named_parameters() if n.endswith("weight"))
    return ternary + floats


def matrix_state_bits(model: nn.Module, opt) -> float:
    """Bits per weight of what the weight matrices alone keep between steps (the spec's
    comparison: SR4's packed q against AdamW's weight + m + v), per-output vectors aside."""
    ternary = nn.ternary_weights(model)
    state = opt.state_tensors()
    if ternary:
        q_bytes = sum(a.nbytes for name, a in state.items() if name.startswith("q."))
        return 8 * q_bytes / sum(w.numel() for w in ternary)
    total = count = 0
    for i, (name, p) in enumerate(model.named_parameters()):
        if name.endswith("weight"):
            total += p._data.nbytes + sum(a.nbytes for key, a in state.items()
                                          if key.endswith(f".{i}"))
            count += p.numel()
    return 8 * total / count


def state_bytes(model: nn.Module, opt) -> int:
    model_bytes = sum(t._data.nbytes for _, t in model._named_state())
    return model_bytes + sum(a.nbytes for a in opt.state_tensors().values())


def train(kind: str, seed: int, data, epochs: int, levels) -> dict:
    xtr, ytr, xte, yte = data
    batch = 64
    steps = epochs * math.ceil(len(ytr) / batch)
    shape = (-1, 64)
    if kind.startswith("SR4"):
        if kind == "SR4 conv":
            shape = (-1, 1, 8, 8)
            model = nn.Sequential(nn.TernaryConv2d(1, 16, 3, padding=1), nn.ReLU(),
                                  nn.TernaryConv2d(16, 32, 3, stride=2, padding=1), nn.ReLU(),
                                  nn.Flatten(), nn.TernaryLinear(512, 10))
        else:
            model = nn.Sequential(nn.TernaryLinear(64, 256), nn.ReLU(),
                                  nn.TernaryLinear(256, 10))
        layers = [m for m in model.modules()
                  if isinstance(m, (nn.TernaryLinear, nn.TernaryConv2d))]
        opt = SR4(nn.ternary_weights(model), target_step=0.05, seed=seed)
        extra = [SGD([m.scale for m in layers], lr=0.005), SGD([m.bias for m in layers], lr=0.05)]
        schedule = cosine(0.05, steps, 0.0025)
    else:
        g = om.Generator(seed)
        model = nn.Sequential(nn.Linear(64, 256, generator=g), nn.ReLU(),
                              nn.Linear(256, 10, generator=g))
        opt = AdamW(model.parameters(), lr=3e-3)
        extra = []
        schedule = cosine(3e-3, steps, 1.5e-4)
    rng = np.random.default_rng(seed)
    first = {level: None for level in levels}
    updates = 0
    t0 = time.perf_counter()
    for _ in range(epochs):
        perm = rng.permutation(len(ytr))
        for b in range(0, len(perm), batch):
            idx = perm[b:b + batch]
            loss = F.cross_entropy(model(om.Tensor(xtr[idx].reshape(shape))), om.Tensor(ytr[idx]))
            for o in [opt] + extra:
                o.zero_grad()
            loss.backward()
            schedule.apply(opt)
            for o in [opt] + extra:
                o.step()
            updates += 1
            if updates % 10 == 0 and any(v is None for v in first.values()):
                with om.no_grad():
                    logits = model(om.Tensor(xtr.reshape(shape)))
                    full = float(F.cross_entropy(logits, om.Tensor(ytr)).numpy())
                for level in levels:
                    if first[level] is None and full <= level:
                        first[level] = updates
    wall = time.perf_counter() - t0
    with om.no_grad():
        acc = float((model(om.Tensor(xte.reshape(shape))).numpy().argmax(1) == yte).mean())
        logits = model(om.Tensor(xtr.reshape(shape)))
        train_loss = float(F.cross_entropy(logits, om.Tensor(ytr)).numpy())
    bits = 8 * state_bytes(model, opt) / weight_count(model)
    ckpt_bits = 8 * len(checkpoint.to_bytes(model, opt)) / weight_count(model)
    return {"acc": acc, "loss": train_loss, "bits": bits, "ckpt_bits": ckpt_bits, "wall": wall,
            "matrix_bits": matrix_state_bits(model, opt),
            "first": first, "updates": updates}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    runs = 3 if args.quick else 10
    for threads in (1, 2):
        bench_step(threads, runs)
    for threads in (1, 2):
        bench_forward(threads, runs)

    data = digits()
    epochs = 10 if args.quick else 40
    seeds = (0, 1, 2)
    levels = (0.5, 0.3, 0.2, 0.1)
    om.set_num_threads(1)
    results = {kind: [train(kind, s, data, epochs, levels) for s in seeds]
               for kind in ("SR4", "AdamW", "SR4 conv")}
    print(f"\ndigits, MLP 64-256-10 (SR4 conv: the ternary convnet), {epochs} epochs x "
          f"{results['SR4'][0]['updates'] // epochs} updates, batch 64, seeds {seeds}, 1 thread")
    print(f"{'optimizer':10} {'test acc min/mean/max':>24} {'train loss':>11} "
          f"{'matrix bits/w':>14} {'state bits/w':>13} {'ckpt bits/w':>12} {'wall s':>7}")
    for kind, rs in results.items():
        acc = [r["acc"] for r in rs]
        print(f"{kind:10} {min(acc):8.4f}/{np.mean(acc):.4f}/{max(acc):.4f} "
              f"{np.mean([r['loss'] for r in rs]):11.4f} {rs[0]['matrix_bits']:14.2f} "
              f"{rs[0]['bits']:13.2f} "
              f"{rs[0]['ckpt_bits']:12.2f} {np.mean([r['wall'] for r in rs]):7.2f}")
    print("\nopen question 10: updates to first reach a full-training-set loss (per seed; "
          "- = not reached)")
    for level in levels:
        row = {k: [r["first"][level] for r in results[k]] for k in ("SR4", "AdamW")}
        ratio = ""
        if all(v is not None for vs in row.values() for v in vs):
            ratio = f"  SR4 / AdamW = {np.mean(row['SR4']) / np.mean(row['AdamW']):.1f}x"
        fmt = {k: ", ".join("-" if v is None else str(v) for v in vs) for k, vs in row.items()}
        print(f"  loss <= {level}: SR4 {fmt['SR4']}; AdamW {fmt['AdamW']}{ratio}")


if __name__ == "__main__":
    main()
