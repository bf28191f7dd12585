"""Runs torch's OpInfo and ModuleInfo sample inputs through onemodel and compares with torch.

Every OpInfo in torch.testing._internal.common_methods_invocations.op_db whose name is in
OPS below, and every ModuleInfo in common_modules.module_db whose class onemodel.nn has, gives
its CPU float32 samples (and int64 ones for the ops in INT_OPS). Each sample's tensors become
onemodel tensors from the same numpy arrays, torch dtypes become numpy dtypes, and both
libraries run it. A sample

  agrees   same structure and shape, same dtype class (float / integer / bool), floats within
           a scaled error |a - b| / max(1, |b|) <= 1e-5 of torch's float32 result or of its
           float64 result rounded to float32 (or, where torch's own float32 result misses the
           float64 one by more, within twice its error), NaN and +-inf in the same places,
           integers and bools exact; sort/topk/max/min/argmax indices may differ where the
           values tie;
  outside  onemodel rejected it with TypeError, ValueError or NotImplementedError raised by its
           own code (a `raise` in onemodel or an "op: message" text) or by argument binding;
  wrong    anything else: a different result, or another exception (AttributeError,
           IndexError, numpy's errors, an exception raised inside numpy).

Samples torch itself rejects, and random ones (dropout_p > 0), are skipped. Prints a table
(op, samples, agree, outside, wrong), the totals, the largest outside groups by message, and
writes the wrong cases to --wrong (default opinfo_wrong.txt).

    PYTHONPATH=. python tools/opinfo_sweep.py [--ops add,sort] [--no-modules] [--no-ops]
"""
from __future__ import annotations

import argparse
import collections
import linecache
import operator
import os
import re
import sys
import traceback
import warnings

import numpy as np
import torch

import onemodel as om
import onemodel.functional as F
import onemodel.nn as onn
from onemodel import interop

TOL = 1e-5
OM_DIR = os.path.dirname(os.path.abspath(om.__file__))
HERE = os.path.abspath(__file__)


def _method(name):
    def call(x, *args, **kwargs):
        return getattr(x, name)(*args, **kwargs)
    call.__name__ = f"Tensor.{name}"
    return call


# torch OpInfo name -> onemodel callable (called as callable(input, *args, **kwargs)).
OPS = {
    "abs": F.abs, "add": F.add, "sub": F.sub, "mul": F.mul, "div": F.div, "true_divide": F.div,
    "floor_divide": operator.floordiv, "neg": F.neg, "pow": F.pow, "exp": F.exp, "log": F.log,
    "sqrt": F.sqrt, "tanh": F.tanh, "sigmoid": F.sigmoid, "erf": F.erf,
    "clamp": F.clamp, "clamp_min": F.clamp_min, "clamp_max": F.clamp_max,
    "maximum": F.maximum, "minimum": F.minimum,
    # the OpInfo takes (self, condition, other) for where and (weight, idx) for embedding
    "where": lambda x, cond, other, **k: F.where(cond, x, other, **k),
    "masked_fill": _method("masked_fill"),
    "eq": F.eq, "ne": F.ne, "lt": F.lt, "le": F.le, "gt": F.gt, "ge": F.ge,
    "sum": F.sum, "mean": F.mean, "max": F.max, "min": F.min, "cumsum": F.cumsum,
    "argmax": _method("argmax"), "argmin": _method("argmin"),
    "sort": F.sort, "topk": F.topk,
    "matmul": F.matmul, "tril": F.tril, "triu": F.triu,
    "cat": lambda ts, *a, **k: F.cat(ts, *a, **k),
    "stack": lambda ts, *a, **k: F.stack(ts, *a, **k),
    "reshape": F.reshape, "flatten": F.flatten, "permute": F.permute, "transpose": F.transpose,
    "squeeze": F.squeeze, "unsqueeze": F.unsqueeze, "clone": F.clone, "gather": F.gather,
    "expand": _method("expand"), "repeat": _method("repeat"), "split": _method("split"),
    "chunk": _method("chunk"), "view_as": _method("view_as"),
    "__getitem__": operator.getitem,
    "softmax": F.softmax, "log_softmax": F.log_softmax,
    "nn.functional.relu": F.relu, "nn.functional.gelu": F.gelu, "nn.functional.silu": F.silu,
    "nn.functional.elu": F.elu, "nn.functional.leaky_relu": F.leaky_relu,
    "nn.functional.softplus": F.softplus,
    "nn.functional.linear": F.linear,
    "nn.functional.embedding": lambda w, idx, **k: F.embedding(idx, w, **k),
    "nn.functional.one_hot": F.one_hot, "nn.functional.normalize": F.normalize,
    "nn.functional.layer_norm": F.layer_norm, "nn.functional.group_norm": F.group_norm,
    "nn.functional.rms_norm": F.rms_norm, "nn.functional.batch_norm": F.batch_norm,
    "nn.functional.conv1d": F.conv1d, "nn.functional.conv2d": F.conv2d,
    "nn.functional.max_pool2d": F.max_pool2d, "nn.functional.avg_pool2d": F.avg_pool2d,
    "nn.functional.avg_pool1d": F.avg_pool1d,
    "nn.functional.adaptive_avg_pool2d": F.adaptive_avg_pool2d,
    "nn.functional.pad": F.pad, "nn.functional.interpolate": F.interpolate,
    # torch's deprecated wrappers of interpolate, and the aten op behind antialias=True
    "nn.functional.upsample_nearest": lambda x, size=None, scale_factor=None: F.interpolate(
        x, size, scale_factor),
    "nn.functional.upsample_bilinear": lambda x, size=None, scale_factor=None: F.interpolate(
        x, size, scale_factor, mode="bilinear", align_corners=True),
    "_upsample_bilinear2d_aa": lambda x, output_size, align_corners, scale_factors=None,
    scales_h=None, scales_w=None: F.interpolate(
        x, None if output_size is None else tuple(output_size),
        scale_factors or (None if scales_h is None else (scales_h, scales_w)), mode="bilinear",
        align_corners=align_corners, antialias=True),
    "nn.functional.scaled_dot_product_attention": F.scaled_dot_product_attention,
    "nn.functional.cross_entropy": F.cross_entropy, "nn.functional.nll_loss": F.nll_loss,
    "nn.functional.mse_loss": F.mse_loss, "nn.functional.l1_loss": F.l1_loss,
    "nn.functional.binary_cross_entropy_with_logits": F.binary_cross_entropy_with_logits,
    "nn.functional.binary_cross_entropy": F.binary_cross_entropy,
    "nn.functional.ctc_loss": F.ctc_loss,
    "mm": F.mm, "diag": F.diag, "diagonal": F.diagonal, "diag_embed": F.diag_embed,
    "nn.functional.bilinear": F.bilinear,
    "nn.functional.embedding_bag": lambda w, idx, **k: F.embedding_bag(idx, w, **k),
}

# Ops whose int64 samples are run too (onemodel keeps integer tensors for these).
INT_OPS = {
    "abs", "add", "sub", "mul", "div", "true_divide", "floor_divide", "neg", "pow", "clamp",
    "clamp_min", "clamp_max", "maximum", "minimum", "where", "masked_fill", "eq", "ne", "lt",
    "le", "gt", "ge", "sum", "max", "min", "cumsum", "argmax", "argmin", "sort", "topk", "tril",
    "triu", "cat", "stack", "reshape", "flatten", "permute", "transpose", "squeeze",
    "unsqueeze", "clone", "gather", "expand", "repeat", "split", "chunk", "view_as",
    "__getitem__", "nn.functional.pad", "nn.functional.one_hot", "nn.functional.relu",
}

# Ops whose second output is an index whose value may differ from torch's on ties.
INDEXED = {"sort", "topk", "max", "min", "argmax", "argmin"}

DTYPES = {torch.float32: np.float32, torch.float64: np.float64, torch.float16: np.float16,
          torch.int64: np.int64, torch.int32: np.int32, torch.int16: np.int16,
          torch.int8: np.int8, torch.uint8: np.uint8, torch.bool: np.bool_}


class Untranslatable(Exception):
    pass


def _encoder_layer(layer):
    """A torch TransformerEncoderLayer (TransformerEncoder's argument) as onemodel's, built
    from the same arguments; the weights come with the encoder's state."""
    attn = layer.self_attn
    return onn.TransformerEncoderLayer(
        attn.embed_dim, attn.num_heads, layer.linear1.out_features, layer.dropout.p,
        to_om(layer.activation), layer.norm1.eps, attn.batch_first, layer.norm_first,
        layer.linear1.bias is not None)


def to_om(v):
    """A torch sample value -> the same value for onemodel."""
    if isinstance(v, torch.nn.TransformerEncoderLayer):
        return _encoder_layer(v)
    name = getattr(v, "__name__", "")
    if callable(v) and getattr(torch.nn.functional, name, None) is v and hasattr(F, name):
        return getattr(F, name)  # an activation function argument: F.gelu, F.relu
    if isinstance(v, torch.Tensor):
        a = v.detach().cpu().resolve_conj().resolve_neg().numpy()
        return om.tensor(a) if a.dtype.kind in "fiub" else om.from_numpy(a)
    if isinstance(v, torch.dtype):
        if v not in DTYPES:
            raise Untranslatable(f"dtype {v}")
        return np.dtype(DTYPES[v])
    if isinstance(v, torch.Size):
        return tuple(v)
    if isinstance(v, tuple):
        return tuple(to_om(x) for x in v)
    if isinstance(v, list):
        return [to_om(x) for x in v]
    if isinstance(v, dict):
        return {k: to_om(x) for k, x in v.items()}
    return v


def to64(v):
    if isinstance(v, torch.Tensor):
        return v.detach().double() if v.dtype == torch.float32 else v
    if isinstance(v, tuple):
        return tuple(to64(x) for x in v)
    if isinstance(v, list):
        return [to64(x) for x in v]
    if isinstance(v, dict):
        return {k: to64(x) for k, x in v.items()}
    return v


def leaves(v, side):
    """Flattens a result to a list of numpy arrays (or python scalars as 0-d arrays)."""
    if side == "torch" and isinstance(v, torch.Tensor):
        return [v.detach().numpy()]
    if side == "om" and isinstance(v, om.Tensor):
        return [v.detach().numpy()]
    if isinstance(v, (tuple, list)):
        out = []
        for x in v:
            out += leaves(x, side)
        return out
    if isinstance(v, (bool, int, float, np.generic)):
        return [np.asarray(v)]
    raise TypeError(f"unexpected {side} result type {type(v).__name__}")


def kind(a):
    return {"f": "float", "i": "int", "u": "int", "b": "bool"}.get(a.dtype.kind, a.dtype.kind)


def close(got, ref):
    """None if got matches ref, else a short reason."""
    if got.shape != ref.shape:
        return f"shape {got.shape} vs torch {ref.shape}"
    if kind(got) != kind(ref):
        return f"dtype {got.dtype} vs torch {ref.dtype}"
    if kind(ref) != "float":
        bad = int(np.sum(got != ref))
        return None if bad == 0 else f"{bad} of {ref.size} integer values differ"
    g = got.astype(np.float64)
    r = ref.astype(np.float32).astype(np.float64)
    if not np.array_equal(np.isnan(g), np.isnan(r)):
        return "NaN in other places"
    fin = np.isfinite(r)
    if not np.array_equal(np.isfinite(g), fin) or not np.array_equal(g[~fin & ~np.isnan(r)],
                                                                     r[~fin & ~np.isnan(r)]):
        return "inf in other places"
    if not fin.any():
        return None
    err = np.abs(g[fin] - r[fin]) / np.maximum(1.0, np.abs(r[fin]))
    worst = float(err.max())
    return None if worst <= TOL else f"scaled error {worst:.3g}"


def scaled_error(got, ref):
    g, r = got.astype(np.float64), ref.astype(np.float64)
    fin = np.isfinite(r) & np.isfinite(g)
    if not fin.any():
        return 0.0
    return float((np.abs(g[fin] - r[fin]) / np.maximum(1.0, np.abs(r[fin]))).max())


def no_worse_than_torch(got, ref32, ref64):
    """Whether onemodel's float32 result is as close to the float64 one as torch's float32 result
    (within 2x): where float32 rounding alone exceeds TOL, as in attention over large logits."""
    if got.shape != ref64.shape or kind(got) != "float" or close(got, ref32) in (
            "NaN in other places", "inf in other places"):
        return False
    return scaled_error(got, ref64) <= 2 * scaled_error(ref32, ref64)


def tie_ok(x, dim, got_idx, ref_idx, keepdim):
    """Whether indices got_idx pick the same values of x as ref_idx along dim (ties)."""
    x = x.detach().double()
    g = torch.as_tensor(got_idx).long()
    r = torch.as_tensor(ref_idx).long()
    if dim is None:
        x = x.reshape(-1)
        gv, rv = x[g.reshape(-1)], x[r.reshape(-1)]
    else:
        if x.dim() == 0:
            return bool(torch.all(g == r))
        if g.dim() < x.dim() and not keepdim:
            g, r = g.unsqueeze(dim), r.unsqueeze(dim)
        gv, rv = torch.take_along_dim(x, g, dim), torch.take_along_dim(x, r, dim)
    return bool(torch.all((gv == rv) | (gv.isnan() & rv.isnan())))


def index_dim(name, args, kwargs):
    if name == "topk":
        return kwargs.get("dim", args[1] if len(args) > 1 else -1)
    if name == "sort":
        d = kwargs.get("dim", args[0] if args else -1)
        return d if isinstance(d, int) else -1
    return kwargs.get("dim", args[0] if args else None)


def compare(name, t_out, t64_out, o_out, sample):
    """None if onemodel's output agrees with torch's, else the reason."""
    try:
        got = leaves(o_out, "om")
    except TypeError as e:
        return str(e)
    ref = leaves(t_out, "torch")
    ref64 = leaves(t64_out, "torch") if t64_out is not None else None
    if len(got) != len(ref):
        return f"{len(got)} outputs vs torch {len(ref)}"
    for i, (g, r) in enumerate(zip(got, ref)):
        why = close(g, r)
        if why is not None and ref64 is not None and kind(r) == "float":
            if close(g, ref64[i]) is None or no_worse_than_torch(g, r, ref64[i]):
                why = None
        if why is not None and name in INDEXED and kind(r) == "int":
            dim = index_dim(name, sample.args, sample.kwargs)
            keep = sample.kwargs.get("keepdim", len(sample.args) > 1 and sample.args[1] is True)
            try:
                if tie_ok(sample.input, dim, g, r, keep):
                    why = None
            except Exception:
                pass
        if why is not None:
            return f"output {i}: {why}"
    return None


SIGNATURE = re.compile(r"unexpected keyword|positional argument|required (positional|keyword)"
                       r"|takes \d+|got multiple values|missing \d+ required")


def clean_rejection(exc):
    """Whether exc is onemodel rejecting the call: a typed error from its own raise, or from
    binding the arguments to its signature."""
    if type(exc) not in (TypeError, ValueError, NotImplementedError):
        return False
    tb = exc.__traceback__
    frames = []
    while tb is not None:
        frames.append((os.path.abspath(tb.tb_frame.f_code.co_filename), tb.tb_lineno))
        tb = tb.tb_next
    path, line = frames[-1]
    if path == HERE or path == os.path.join(OM_DIR, "nn", "module.py"):
        if SIGNATURE.search(str(exc)):  # binding the arguments (module.py: forward's)
            return True
    if not path.startswith(OM_DIR):
        return False
    if "raise" in linecache.getline(path, line):
        return True
    return bool(re.match(r"^[\w.]+(\(\))?( into \w+)?: ", str(exc)))


def message_group(exc):
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    text = re.sub(r"\(.*?\)|\[.*?\]", "(..)", text)
    text = re.sub(r"-?\d+(\.\d+)?(e-?\d+)?", "N", text)
    return f"{type(exc).__name__}: {text[:110]}"


def brief(v):
    if isinstance(v, torch.Tensor):
        s = f"T{tuple(v.shape)}:{str(v.dtype).replace('torch.', '')}"
        if v.numel() <= 8:
            s += f"={v.detach().tolist()}"
        return s
    if isinstance(v, (list, tuple)):
        inner = ", ".join(brief(x) for x in v)
        return f"[{inner}]" if isinstance(v, list) else f"({inner})"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k}={brief(x)}" for k, x in v.items()) + "}"
    return repr(v)


class Tally:
    def __init__(self):
        self.rows = collections.OrderedDict()
        self.outside = collections.Counter()
        self.outside_ops = collections.defaultdict(collections.Counter)
        self.wrong = []
        self.skipped = collections.Counter()

    def row(self, key):
        return self.rows.setdefault(key, [0, 0, 0, 0])

    def add(self, key, status, detail=None):
        r = self.row(key)
        r[0] += 1
        if status == "agree":
            r[1] += 1
        elif status == "outside":
            r[2] += 1
            self.outside[detail] += 1
            self.outside_ops[detail][key] += 1
        else:
            r[3] += 1
            self.wrong.append((key, detail))

    def totals(self):
        t = [0, 0, 0, 0]
        for r in self.rows.values():
            t = [a + b for a, b in zip(t, r)]
        return t

    def report(self, title, out):
        print(f"\n{title}", file=out)
        print(f"{'op':<52} {'samples':>7} {'agree':>6} {'outside':>7} {'wrong':>6}", file=out)
        for key, r in self.rows.items():
            print(f"{key:<52} {r[0]:>7} {r[1]:>6} {r[2]:>7} {r[3]:>6}", file=out)
        t = self.totals()
        print(f"{'TOTAL':<52} {t[0]:>7} {t[1]:>6} {t[2]:>7} {t[3]:>6}", file=out)
        if self.skipped:
            print("skipped: " + ", ".join(f"{k} {v}" for k, v in self.skipped.items()), file=out)
        print(f"\nlargest outside-the-API groups ({title}):", file=out)
        for msg, n in self.outside.most_common(25):
            ops = ", ".join(f"{k} {v}" for k, v in self.outside_ops[msg].most_common(4))
            print(f"{n:>5}  {msg}\n       [{ops}]", file=out)


def run_one(tally, key, name, fn, sample, torch_call):
    """Runs one sample through torch and onemodel and records the verdict."""
    if sample.kwargs.get("dropout_p", 0) or sample.kwargs.get("p", 0) and "dropout" in name:
        tally.skipped["random"] += 1
        return
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            t_out = torch_call(sample.input, *sample.args, **sample.kwargs)
    except Exception:
        tally.skipped["torch rejects"] += 1
        return
    t64_out = None
    try:
        t64_out = torch_call(to64(sample.input), *to64(sample.args), **to64(sample.kwargs))
    except Exception:
        pass
    desc = (f"{key}: input={brief(sample.input)} args={brief(tuple(sample.args))} "
            f"kwargs={brief(sample.kwargs)}")
    try:
        x, args, kwargs = to_om(sample.input), to_om(tuple(sample.args)), to_om(sample.kwargs)
    except Untranslatable as e:
        tally.skipped[f"untranslatable {e}"] += 1
        return
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            o_out = fn(x, *args, **kwargs)
    except Exception as e:  # noqa: BLE001 - classifying every exception is the point
        if clean_rejection(e):
            tally.add(key, "outside", message_group(e))
        else:
            tb = traceback.extract_tb(e.__traceback__)[-1]
            where = f"{os.path.relpath(tb.filename, os.path.dirname(OM_DIR))}:{tb.lineno}"
            tally.add(key, "wrong", f"{desc}\n    raises {type(e).__name__}: {e} at {where}")
        return
    why = compare(name, t_out, t64_out, o_out, sample)
    if why is None:
        tally.add(key, "agree")
    else:
        tally.add(key, "wrong", f"{desc}\n    {why}")


def sweep_ops(only):
    from torch.testing._internal.common_methods_invocations import op_db
    tally = Tally()
    for op in op_db:
        if op.name not in OPS or (only and op.name not in only):
            continue
        dtypes = [d for d in (torch.float32,) if d in op.dtypes]
        if op.name in INT_OPS and torch.int64 in op.dtypes:
            dtypes.append(torch.int64)
        for dtype in dtypes:
            key = op.name + (f".{op.variant_test_name}" if op.variant_test_name else "")
            key += "" if dtype == torch.float32 else " int64"
            torch.manual_seed(0)
            try:
                samples = list(op.sample_inputs("cpu", dtype, requires_grad=False))
            except Exception as e:  # noqa: BLE001
                print(f"{key}: sample_inputs failed: {e}", file=sys.stderr)
                continue
            for s in samples:
                run_one(tally, key, op.name, OPS[op.name], s, op)
    return tally


MODULES_TRAIN = {"BatchNorm1d", "BatchNorm2d"}


def sweep_modules(only):
    from torch.testing._internal.common_modules import module_db
    tally = Tally()
    for info in module_db:
        cls = info.module_cls.__name__
        if not hasattr(onn, cls) or (only and cls not in only):
            continue
        for training in ([False, True] if cls in MODULES_TRAIN else [False]):
            key = f"nn.{cls}" + (" train" if training else "")
            try:
                inputs = info.module_inputs_func(info, device="cpu", dtype=torch.float32,
                                                 requires_grad=False, training=training)
            except Exception as e:  # noqa: BLE001
                print(f"{key}: module_inputs failed: {e}", file=sys.stderr)
                continue
            for mi in inputs:
                if mi.forward_input is None:
                    continue
                run_module(tally, key, cls, info.module_cls, getattr(onn, cls), mi, training)
    return tally


def run_module(tally, key, cls, tcls, ocls, mi, training):
    c, f = mi.constructor_input, mi.forward_input
    desc = (f"{key}: ctor args={brief(tuple(c.args))} kwargs={brief(c.kwargs)} "
            f"forward args={brief(tuple(f.args))} kwargs={brief(f.kwargs)}")
    torch.manual_seed(0)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tm = tcls(*c.args, **c.kwargs).float()
            tm.train(training)
            state = {k: v.detach().clone() for k, v in tm.state_dict().items()}
            t_out = tm(*f.args, **f.kwargs)
    except Exception:
        tally.skipped["torch rejects"] += 1
        return
    if any(getattr(tm, a, 0) and isinstance(getattr(tm, a), float)
           for a in ("dropout", "p")) and training:
        tally.skipped["random"] += 1
        return
    try:
        cargs, ckw = to_om(tuple(c.args)), to_om(c.kwargs)
        fargs, fkw = to_om(tuple(f.args)), to_om(f.kwargs)
    except Untranslatable as e:
        tally.skipped[f"untranslatable {e}"] += 1
        return
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            m = ocls(*cargs, **ckw)
            interop.load_torch_state_dict(m, state)
            m.train(training)
            o_out = m(*fargs, **fkw)
    except Exception as e:  # noqa: BLE001
        if clean_rejection(e):
            tally.add(key, "outside", message_group(e))
        else:
            tb = traceback.extract_tb(e.__traceback__)[-1]
            where = f"{os.path.relpath(tb.filename, os.path.dirname(OM_DIR))}:{tb.lineno}"
            tally.add(key, "wrong", f"{desc}\n    raises {type(e).__name__}: {e} at {where}")
        return

    class S:  # compare() wants a sample; modules have no index ties to resolve
        input, args, kwargs = None, (), {}
    why = compare(cls, t_out, None, o_out, S)
    if why is None:
        tally.add(key, "agree")
    else:
        tally.add(key, "wrong", f"{desc}\n    {why}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", default="", help="comma-separated OpInfo / module names")
    parser.add_argument("--no-ops", action="store_true")
    parser.add_argument("--no-modules", action="store_true")
    parser.add_argument("--wrong", default="opinfo_wrong.txt")
    a = parser.parse_args()
    only = set(filter(None, a.ops.split(",")))
    torch.set_num_threads(1)
    om.set_num_threads(1)
    tallies = []
    if not a.no_ops:
        tallies.append(("ops (op_db)", sweep_ops(only)))
    if not a.no_modules:
        tallies.append(("modules (module_db)", sweep_modules(only)))
    with open(a.wrong, "w") as out:
        for title, t in tallies:
            t.report(title, sys.stdout)
            for key, detail in t.wrong:
                print(detail, file=out)
    print()
    for title, t in tallies:
        n, ok, outside, wrong = t.totals()
        print(f"{title}: {n} samples, {ok} agree, {outside} outside the API, {wrong} wrong")
    print(f"wrong cases written to {a.wrong}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
