"""Containers with PyTorch's semantics: ModuleList, ModuleDict, ParameterList.

Each registers what it holds as ordinary children or parameters of itself, so their state is
named like PyTorch's ("layers.0.weight", "blocks.enc.bias", "scales.1") and takes its place in
the state order (training.txt section 1) like any other registration. List entries are named by
position: inserting or deleting renumbers the ones after it, as in PyTorch.
"""
from __future__ import annotations

import operator
from collections import OrderedDict
from typing import Any, Iterable, Iterator, Mapping, Optional, Union

from ..tensor import Tensor
from .module import Module, Parameter, _check_name


def _position(index: Any, length: int, container: str) -> int:
    """index as a position in [0, length), counting from the end when negative."""
    try:
        i = operator.index(index)
    except TypeError:
        raise TypeError(f"{container}: indices must be integers or slices, got "
                        f"{type(index).__name__}") from None
    if not -length <= i < length:
        raise IndexError(f"{container}: index {i} is out of range for length {length}")
    return i % length


def _check_module(value: Any, where: str) -> None:
    if value is not None and not isinstance(value, Module):
        raise TypeError(f"{where} must be a Module or None, got {type(value).__name__}")


def _renumber(registry: "OrderedDict[str, Any]", values: list) -> None:
    """Refills the registry in place (the module holds it) with names "0", "1", ..."""
    registry.clear()
    registry.update((str(i), v) for i, v in enumerate(values))


class ModuleList(Module):
    """Holds child modules in a list; they are named "0", "1", ... by position."""

    def __init__(self, modules: Optional[Iterable[Module]] = None) -> None:
        super().__init__()
        if modules is not None:
            self.extend(modules)

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(self._modules.values())

    def __getitem__(self, index: Union[int, slice]) -> Any:
        values = list(self._modules.values())
        if isinstance(index, slice):
            return ModuleList(values[index])
        return values[_position(index, len(values), "ModuleList")]

    def __setitem__(self, index: int, module: Module) -> None:
        self.add_module(str(_position(index, len(self), "ModuleList")), module)

    def __delitem__(self, index: Union[int, slice]) -> None:
        values = list(self._modules.values())
        if isinstance(index, slice):
            del values[index]
        else:
            del values[_position(index, len(values), "ModuleList")]
        _renumber(self._modules, values)

    def __iadd__(self, modules: Iterable[Module]) -> "ModuleList":
        return self.extend(modules)

    def __add__(self, other: Iterable[Module]) -> "ModuleList":
        return ModuleList(list(self) + list(other))

    def append(self, module: Module) -> "ModuleList":
        self.add_module(str(len(self)), module)
        return self

    def extend(self, modules: Iterable[Module]) -> "ModuleList":
        if isinstance(modules, Module) and not isinstance(modules, ModuleList):
            raise TypeError(f"ModuleList.extend: expected an iterable of Modules, got a "
                            f"{type(modules).__name__}; use append for one module")
        modules = list(modules)
        for k, m in enumerate(modules):  # all checked before any is added
            _check_module(m, f"ModuleList.extend: entry {k}")
        for m in modules:
            self.append(m)
        return self

    def insert(self, index: int, module: Module) -> None:
        """Inserts before position `index`, clamped to the list as list.insert does."""
        values = list(self._modules.values())
        values.insert(operator.index(index), module)
        self.append(module)  # validates the module before anything moves
        _renumber(self._modules, values)

    def pop(self, index: int = -1) -> Module:
        module = self[index]
        del self[index]
        return module


class ModuleDict(Module):
    """Holds child modules by name, in insertion order."""

    def __init__(self, modules: Optional[Union[Mapping[str, Module],
                                               Iterable[tuple[str, Module]]]] = None) -> None:
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[str]:
        return iter(self._modules)

    def __contains__(self, key: object) -> bool:
        return key in self._modules

    def __getitem__(self, key: str) -> Module:
        if key not in self._modules:
            raise KeyError(key)
        return self._modules[key]

    def __setitem__(self, key: str, module: Module) -> None:
        self.add_module(key, module)

    def __delitem__(self, key: str) -> None:
        del self._modules[key]

    def keys(self) -> Iterable[str]:
        return self._modules.keys()

    def values(self) -> Iterable[Module]:
        return self._modules.values()

    def items(self) -> Iterable[tuple[str, Module]]:
        return self._modules.items()

    def clear(self) -> None:
        self._modules.clear()

    def pop(self, key: str) -> Module:
        module = self[key]
        del self[key]
        return module

    def update(self, modules: Union[Mapping[str, Module],
                                    Iterable[tuple[str, Module]]]) -> None:
        """Adds (or replaces) every entry of a mapping, or of an iterable of (name, module)."""
        if isinstance(modules, Module) and not isinstance(modules, ModuleDict):
            raise TypeError(f"ModuleDict.update: expected a mapping or an iterable of "
                            f"(name, module) pairs, got a {type(modules).__name__}")
        pairs = list(modules.items() if isinstance(modules, (Mapping, ModuleDict))
                     else modules)
        for k, pair in enumerate(pairs):  # all checked before any is added
            if not isinstance(pair, (tuple, list)) or len(pair) != 2:
                raise ValueError(f"ModuleDict.update: entry {k} must be a (name, module) pair, "
                                 f"got {pair!r}")
            _check_name(pair[0], "ModuleDict.update")
            _check_module(pair[1], f"ModuleDict.update: entry {pair[0]!r}")
        for name, module in pairs:
            self[name] = module


class ParameterList(Module):
    """Holds parameters in a list, named "0", "1", ...; a plain Tensor is made a Parameter
    (a float32 copy that requires gradients), as PyTorch does."""

    def __init__(self, values: Optional[Iterable[Tensor]] = None) -> None:
        super().__init__()
        if values is not None:
            self.extend(values)

    @staticmethod
    def _parameter(value: Any) -> Parameter:
        if isinstance(value, Parameter):
            return value
        if isinstance(value, Tensor):
            return Parameter(value)
        raise TypeError(f"ParameterList: entries must be Parameters or Tensors, got "
                        f"{type(value).__name__}")

    def __len__(self) -> int:
        return len(self._parameters)

    def __iter__(self) -> Iterator[Parameter]:
        return iter(self._parameters.values())

    def __getitem__(self, index: Union[int, slice]) -> Any:
        values = list(self._parameters.values())
        if isinstance(index, slice):
            return ParameterList(values[index])
        return values[_position(index, len(values), "ParameterList")]

    def __setitem__(self, index: int, value: Tensor) -> None:
        position = _position(index, len(self), "ParameterList")
        self.register_parameter(str(position), self._parameter(value))

    def __iadd__(self, values: Iterable[Tensor]) -> "ParameterList":
        return self.extend(values)

    def append(self, value: Tensor) -> "ParameterList":
        self.register_parameter(str(len(self)), self._parameter(value))
        return self

    def extend(self, values: Iterable[Tensor]) -> "ParameterList":
        if isinstance(values, Tensor):
            raise TypeError("ParameterList.extend: expected an iterable of Parameters, got a "
                            "Tensor; use append for one parameter")
        converted = [self._parameter(v) for v in values]  # all checked before any is added
        for p in converted:
            self.append(p)
        return self


__all__ = ["ModuleDict", "ModuleList", "ParameterList"]
