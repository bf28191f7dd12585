"""Runs ported programs under one library and reports what they printed, for
tests/system/test_ported_programs.py.

    python _run.py torch REPORT.json DIR WEIGHTS.npz NAME[:ARG,ARG...] ...   # records weights
    python _run.py onemodel REPORT.json DIR WEIGHTS.npz NAME[:ARG,...] ...   # reads them

Each program runs as __main__ in a fresh namespace and in a folder of its own under DIR, with
Python's and numpy's global seeds at 0. Under onemodel its source has every whole word `torch`
replaced by `onemodel`, as a user would port it. Two things the libraries cannot share by design
are made to agree, at the same points of both runs, so that their losses can be compared:

- initial weights: the first time a module with parameters is called from outside any module's
  forward, its parameters (in `parameters()` order) are recorded under torch and overwritten
  with torch's recorded values under onemodel (a module given a state dict by load_state_dict,
  or one holding such a module, is left as loaded, so a wrong load is not papered over; a
  program run with no recorded weights, as the runs-only ones are, keeps its own);
- the program's own random draws: torch.randn, rand, randint, randperm, randn_like and
  rand_like called from the program's file keep their checks, shapes and dtypes, but their
  values come from one numpy stream per program (the libraries' own calls are left alone).

Everything else (dropout masks, shuffled orders, multinomial samples) stays each library's own;
the test's table says which programs can be compared and how far.
"""
import contextlib
import importlib
import io
import json
import os
import random
import re
import sys
import time
import traceback

import numpy as np


class WeightSync:
    """Records (torch) or restores (onemodel) each top-level module's first parameters."""

    def __init__(self, lib, recorded):
        self.lib, self.recorded, self.depth = lib, recorded, 0
        self.done = []  # modules already handled, kept alive so their ids stay unique
        self.loaded = []  # modules given a state dict, and their submodules
        self.count = 0

    def handled(self, module):
        return any(m is module for m in self.done)

    def mark_loaded(self, module):
        self.loaded.extend(module.modules())
        self.done.extend(module.modules())

    def first_call(self, module):
        self.done.append(module)
        params = list(module.parameters())
        if not params or any(m is n for m in module.modules() for n in self.loaded):
            return
        key, self.count = f"module{self.count}", self.count + 1
        with self.lib.no_grad():
            if self.lib.__name__ == "torch":
                self.recorded[key] = [p.detach().numpy().copy() for p in params]
                return
            theirs = self.recorded.get(key)
            if theirs is None:  # a runs-only program gets no weights: none of its losses count
                return
            if len(theirs) != len(params):
                raise AssertionError(f"harness: {type(module).__name__} has {len(params)} "
                                     f"parameters under onemodel, {len(theirs)} under torch")
            for i, (p, value) in enumerate(zip(params, theirs)):
                if tuple(p.shape) != value.shape:
                    raise AssertionError(f"harness: {type(module).__name__} parameter {i}: "
                                         f"shape {tuple(p.shape)}, torch's {value.shape}")
                p.copy_(self.lib.from_numpy(value))

    def install(self):
        module_class = self.lib.nn.Module
        call, load = module_class.__call__, module_class.load_state_dict
        sync = self

        def patched_call(module, *args, **kwargs):
            if sync.depth == 0 and not sync.handled(module):
                sync.first_call(module)
            sync.depth += 1
            try:
                return call(module, *args, **kwargs)
            finally:
                sync.depth -= 1

        def patched_load(module, *args, **kwargs):
            sync.mark_loaded(module)
            return load(module, *args, **kwargs)

        module_class.__call__ = patched_call
        module_class.load_state_dict = patched_load


def randint_bounds(args, kwargs):
    """(low, high) of a randint call: randint(high, size) or randint(low, high, size)."""
    ints = [a for a in args if isinstance(a, int)]
    low, high = kwargs.get("low", 0), kwargs.get("high")
    if len(ints) == 2:
        low, high = ints
    elif len(ints) == 1 and high is None:
        high = ints[0]
    elif len(ints) == 1:
        low = ints[0]
    return low, high


DRAWS = ("randn", "randn_like", "rand", "rand_like", "randint", "randperm")


def share_draws(lib, rng, program):
    """The program's own draws from one numpy stream, through the library's own functions."""
    fills = {
        "randperm": lambda shape, a, k: rng.permutation(shape[0]),
        "randn": lambda shape, a, k: rng.standard_normal(shape),
        "randn_like": lambda shape, a, k: rng.standard_normal(shape),
        "rand": lambda shape, a, k: rng.random(shape),
        "rand_like": lambda shape, a, k: rng.random(shape),
        "randint": lambda shape, a, k: rng.integers(*randint_bounds(a, k), size=shape),
    }
    for name, fill in fills.items():
        def drawn(*args, _original=getattr(lib, name), _fill=fill, **kwargs):
            out = _original(*args, **kwargs)
            if sys._getframe(1).f_code.co_filename != program:
                return out
            dtype = out.detach().numpy().dtype
            with lib.no_grad():
                out.copy_(lib.from_numpy(np.asarray(_fill(tuple(out.shape), args, kwargs),
                                                    dtype=dtype)))
            return out
        setattr(lib, name, drawn)


def run(lib_name, folder, name, args, recorded):
    lib = importlib.import_module(lib_name)
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), name + ".py")
    with open(path) as f:
        source = f.read()
    if lib_name != "torch":
        source = re.sub(r"\btorch\b", lib_name, source)
    random.seed(0)
    np.random.seed(0)
    sync = WeightSync(lib, recorded)
    saved = lib.nn.Module.__call__, lib.nn.Module.load_state_dict
    draws = {n: getattr(lib, n) for n in DRAWS}
    sync.install()
    share_draws(lib, np.random.default_rng(1234), path)
    workdir = os.path.join(folder, name + ("-" + "-".join(args) if args else ""))
    os.makedirs(workdir, exist_ok=True)
    cwd, argv = os.getcwd(), sys.argv
    precision = getattr(lib, "get_float32_matmul_precision", lambda: None)()
    out, error, start = io.StringIO(), None, time.process_time()
    try:
        os.chdir(workdir)
        sys.argv = [path] + args
        with contextlib.redirect_stdout(out):
            exec(compile(source, path, "exec"), {"__name__": "__main__", "__file__": path})
    except BaseException:  # SystemExit included: the program must run to its end
        error = traceback.format_exc()
    finally:
        os.chdir(cwd)
        sys.argv = argv
        if precision is not None:  # a program's setting must not reach the next one
            lib.set_float32_matmul_precision(precision)
        lib.nn.Module.__call__, lib.nn.Module.load_state_dict = saved
        for n, f in draws.items():
            setattr(lib, n, f)
    return {"stdout": out.getvalue(), "error": error, "cpu_seconds": time.process_time() - start}


def main():
    lib_name, report, folder, weights_file, *programs = sys.argv[1:]
    recorded_all = {}
    if lib_name != "torch":
        with np.load(weights_file) as z:
            for key in z.files:
                program, module, index = key.rsplit("/", 2)
                recorded_all.setdefault(program, {}).setdefault(module, []).append(
                    (int(index), z[key]))
        for modules in recorded_all.values():
            for module, items in modules.items():
                modules[module] = [a for _, a in sorted(items, key=lambda t: t[0])]
    results = {}
    for spec in programs:
        name, _, arg_text = spec.partition(":")
        args = arg_text.split(",") if arg_text else []
        recorded = recorded_all.get(spec, {})
        results[spec] = run(lib_name, folder, name, args, recorded)
        recorded_all[spec] = recorded
    if lib_name == "torch":
        np.savez(weights_file, **{f"{spec}/{module}/{i}": a
                                  for spec, modules in recorded_all.items()
                                  for module, arrays in modules.items()
                                  for i, a in enumerate(arrays)})
    with open(report, "w") as f:
        json.dump(results, f)


if __name__ == "__main__":
    main()
