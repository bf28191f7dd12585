"""The .pyi stubs of the compiled kernel modules against the modules themselves: the same public
names, and for every function the same parameters in the same order with the same defaults
(read from the compiled functions' signatures, so a stub that drifts from its .pyx fails here).
"""
from __future__ import annotations

import ast
import importlib
import inspect
from pathlib import Path
from types import ModuleType

import pytest

from onemodel import _kernels

MODULES = sorted(_kernels._MODULE_NAMES)


def stub_of(module: ModuleType) -> ast.Module:
    path = Path(module.__file__).with_name(module.__name__.rsplit(".", 1)[1] + ".pyi")
    assert path.exists(), f"{module.__name__} has no stub {path.name}"
    return ast.parse(path.read_text(), str(path))


def stub_api(tree: ast.Module) -> dict[str, ast.FunctionDef | None]:
    """Public functions (name -> def) and annotated constants (name -> None) of a stub; plain
    assignments are type aliases for the stub's own use (F32 = npt.NDArray[...])."""
    api: dict[str, ast.FunctionDef | None] = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            api[node.name] = node
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            api[node.target.id] = None
    return {name: node for name, node in api.items() if not name.startswith("_")}


def runtime_api(module: ModuleType) -> dict[str, object]:
    return {name: value for name, value in vars(module).items()
            if not name.startswith("_") and not isinstance(value, ModuleType)}


def stub_parameters(node: ast.FunctionDef) -> list[tuple[str, object]]:
    """(name, default) per parameter, in order; inspect.Parameter.empty for none."""
    args = node.args
    assert not (args.vararg or args.kwarg or args.kwonlyargs or args.posonlyargs), node.name
    defaults = [inspect.Parameter.empty] * (len(args.args) - len(args.defaults))
    defaults += [ast.literal_eval(d) for d in args.defaults]
    return [(a.arg, d) for a, d in zip(args.args, defaults)]


@pytest.mark.parametrize("name", MODULES)
def test_stub_names_are_the_module_names(name):
    module = importlib.import_module(f"onemodel._kernels.{name}")
    stubbed, actual = set(stub_api(stub_of(module))), set(runtime_api(module))
    assert stubbed == actual, (f"{name}.pyi: missing {sorted(actual - stubbed)}, "
                               f"not in the module {sorted(stubbed - actual)}")


@pytest.mark.parametrize("name", MODULES)
def test_stub_signatures_are_the_compiled_ones(name):
    module = importlib.import_module(f"onemodel._kernels.{name}")
    api = runtime_api(module)
    for fn_name, node in stub_api(stub_of(module)).items():
        value = api.get(fn_name)
        assert (node is None) == (not callable(value)), f"{name}.{fn_name}: function or not"
        if node is None:
            continue
        actual = [(p.name, p.default) for p in inspect.signature(value).parameters.values()]
        assert stub_parameters(node) == actual, f"{name}.{fn_name}: stub differs from the module"


def test_a_drifted_stub_is_caught():
    """The comparison itself: a stub without gemm's bias, as the stub once was, differs."""
    from onemodel._kernels import _gemm
    tree = stub_of(_gemm)
    node = stub_api(tree)["gemm"]
    assert node is not None
    actual = [(p.name, p.default) for p in inspect.signature(_gemm.gemm).parameters.values()]
    del node.args.args[6], node.args.defaults[0]
    assert stub_parameters(node) != actual


def test_vmath_op_literal_is_the_op_table():
    from onemodel._kernels import _vmath
    alias = next(node for node in stub_of(_vmath).body if isinstance(node, ast.Assign)
                 and isinstance(node.targets[0], ast.Name) and node.targets[0].id == "Op")
    names = tuple(ast.literal_eval(e) for e in alias.value.slice.elts)
    assert names == _vmath.OPS
