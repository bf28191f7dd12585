"""The package's floors: each unit imports only from its own floor or those below, so the
architecture reads bottom-up (kernels, tensor and graph, functional, layers and optimizers, the
loop around them). The one documented arrow upward: tensor.py's operators call functional
(a Tensor's `a + b` is functional.add), imported where they run, and Tensor.to_sparse, which
makes an onemodel.sparse tensor."""
from __future__ import annotations

import ast
import os

import onemodel

FLOORS = [
    {"_ieee", "_kernels", "_config", "_kernel_choice", "_printing", "progress", "backends",
     "onnx", "version",
     "_rank_watch", "_memory"},
    # each names another: autograd's hints, tensor's backward(), Tensor.uniform_ and normal_;
    # Tensor's mixins (forwards, in-place methods), hooks, the functions that make tensors,
    # autograd.grad and autograd.Function with them, the gradient buffers' rules
    {"autograd", "tensor", "_tensor_surface", "_tensor_ops", "_tensor_creation", "random",
     "_inplace", "_hooks", "_grad", "_function", "_grad_buffers"},
    {"_autocast"},
    {"functional", "sparse"},
    {"optim", "checkpoint", "metrics_log", "state_files"},
    {"nn", "amp", "utils", "data", "cuda"},  # data is utils.data under its first name
    {"distributed", "interop", "process_group"},
    {"train", "launch", "_trainer_checks"},
    {"examples", "plot"},  # onemodel-plot reads the examples' run folders
    {"__init__"},
]
# the operators (module docstring), the in-place methods (the out-of-place op on a stand-in),
# a custom Function's broadcast gradient summed back (functional._core.sum_to_shape),
# Tensor.to_sparse's conversion into onemodel.sparse, and nn.parallel's
# DistributedDataParallel, which asks the process group for the world size
UPWARD = {("tensor", "functional"), ("_inplace", "functional"), ("_function", "functional"),
          ("_tensor_surface", "sparse"), ("nn", "process_group"), ("nn", "distributed")}
ROOT = os.path.dirname(onemodel.__file__)


def _floor(unit: str) -> int:
    for level, units in enumerate(FLOORS):
        if unit in units:
            return level
    raise AssertionError(f"onemodel.{unit} is on no floor: add it to FLOORS")


def _imports():
    """(importing unit, imported unit, file, line) for every import inside the package."""
    for folder, _, files in os.walk(ROOT):
        for name in files:
            if not name.endswith(".py"):
                continue
            path = os.path.join(folder, name)
            parts = os.path.relpath(path, ROOT)[:-3].split(os.sep)
            unit = parts[0]
            package = parts[:-1]  # the module's package, below onemodel
            for node in ast.walk(ast.parse(open(path, encoding="utf-8").read())):
                if isinstance(node, ast.ImportFrom) and node.level:
                    base = package[:len(package) - node.level + 1]
                    target = base + (node.module.split(".") if node.module else [])
                    if target:
                        yield unit, target[0], path, node.lineno
                    else:  # from . import x, y (at the package root)
                        for alias in node.names:
                            yield unit, alias.name, path, node.lineno
                elif isinstance(node, ast.ImportFrom) and node.module and \
                        node.module.startswith("onemodel."):
                    yield unit, node.module.split(".")[1], path, node.lineno


def test_every_import_goes_to_its_floor_or_below():
    wrong = [f"{os.path.relpath(path, ROOT)}:{line}: {unit} imports {target}"
             for unit, target, path, line in _imports()
             if target != "__version__" and (unit, target) not in UPWARD
             and _floor(target) > _floor(unit)]
    assert not wrong, "imports from a higher floor:\n" + "\n".join(wrong)


def test_every_unit_has_a_floor():
    units = {name[:-3] if name.endswith(".py") else name for name in os.listdir(ROOT)
             if (name.endswith(".py") or os.path.isdir(os.path.join(ROOT, name)))
             and name != "__pycache__"}
    for unit in units:
        _floor(unit)
