"""Containers with PyTorch's semantics: Sequential, ModuleList, ModuleDict, ParameterList,
ParameterDict.

Each registers what it holds as ordinary children or parameters of itself, so their state is
named like PyTorch's ("layers.0.weight", "blocks.enc.bias", "scales.1") and takes its place in
the state order like any other registration. List entries are
named by position: inserting or deleting renumbers the ones after it, as in PyTorch.
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


class _Container(Module):
    """What every container's entries go through: the registry that holds them (named as
    PyTorch names them), the check or conversion of an entry, and its registration."""

    def _registry(self) -> "OrderedDict[str, Any]":
        raise NotImplementedError

    def _entry(self, value: Any, where: str) -> Any:
        """value as stored (checked, or converted), else TypeError naming `where`."""
        raise NotImplementedError

    def _put(self, name: str, value: Any) -> None:
        raise NotImplementedError

    def __len__(self) -> int:
        return len(self._registry())


class _Modules(_Container):
    """Entries are child modules (or None)."""

    def _registry(self) -> "OrderedDict[str, Any]":
        return self._modules

    def _entry(self, value: Any, where: str) -> Optional[Module]:
        _check_module(value, where)
        return value

    def _put(self, name: str, value: Any) -> None:
        self.add_module(name, value)


class _Parameters(_Container):
    """Entries are parameters; a plain Tensor is made a Parameter (a float32 copy that
    requires gradients), as PyTorch does."""

    def _registry(self) -> "OrderedDict[str, Any]":
        return self._parameters

    def _entry(self, value: Any, where: str) -> Parameter:
        if isinstance(value, Parameter):
            return value
        if isinstance(value, Tensor):
            return Parameter(value)
        raise TypeError(f"{where} must be a Parameter or a Tensor, got {type(value).__name__}")

    def _put(self, name: str, value: Any) -> None:
        self.register_parameter(name, value)


class _List(_Container):
    """What ModuleList and ParameterList share: entries named "0", "1", ... by position in
    one registry, list indexing, and appending that checks every entry before adding any."""

    def __init__(self, entries: Optional[Iterable[Any]] = None) -> None:
        super().__init__()
        if entries is not None:
            self.extend(entries)

    def __iter__(self) -> Iterator[Any]:
        return iter(self._registry().values())

    def __getitem__(self, index: Union[int, slice]) -> Any:
        values = list(self._registry().values())
        if isinstance(index, slice):
            return type(self)(values[index])
        return values[_position(index, len(values), type(self).__name__)]

    def __setitem__(self, index: int, value: Any) -> None:
        name = type(self).__name__
        position = _position(index, len(self), name)
        self._put(str(position), self._entry(value, f"{name}[{position}]"))

    def __iadd__(self, values: Iterable[Any]) -> "_List":
        return self.extend(values)

    def append(self, value: Any) -> "_List":
        self._put(str(len(self)), self._entry(value, f"{type(self).__name__}.append"))
        return self

    def extend(self, values: Iterable[Any]) -> "_List":
        name = type(self).__name__
        if isinstance(values, (Module, Tensor)) and not isinstance(values, _List):
            raise TypeError(f"{name}.extend: expected an iterable, got a "
                            f"{type(values).__name__}; use append for one entry")
        entries = [self._entry(v, f"{name}.extend: entry {k}") for k, v in enumerate(values)]
        for entry in entries:  # all checked above, before any is added
            self._put(str(len(self)), entry)
        return self


class _Dict(_Container):
    """What ModuleDict and ParameterDict share: entries by name, in insertion order."""

    _sorts_dicts = False  # whether update() takes a plain dict's entries in key order

    def __init__(self, entries: Optional[Any] = None) -> None:
        super().__init__()
        if entries is not None:
            self.update(entries)

    def __iter__(self) -> Iterator[str]:
        return iter(self._registry())

    def __contains__(self, key: object) -> bool:
        return key in self._registry()

    def __getitem__(self, key: str) -> Any:
        if key not in self._registry():
            raise KeyError(key)
        return self._registry()[key]

    def __setitem__(self, key: str, value: Any) -> None:
        _check_name(key, f"{type(self).__name__}[{key!r}]")
        self._put(key, self._entry(value, f"{type(self).__name__}[{key!r}]"))

    def __delitem__(self, key: str) -> None:
        del self._registry()[key]

    def keys(self) -> Iterable[str]:
        return self._registry().keys()

    def values(self) -> Iterable[Any]:
        return self._registry().values()

    def items(self) -> Iterable[tuple[str, Any]]:
        return self._registry().items()

    def get(self, key: str, default: Any = None) -> Any:
        return self._registry().get(key, default)

    def clear(self) -> None:
        self._registry().clear()

    def pop(self, key: str) -> Any:
        value = self[key]
        del self[key]
        return value

    def update(self, entries: Any) -> None:
        """Adds (or replaces) every entry of a mapping, or of an iterable of (name, value)
        pairs; all are checked before any is added."""
        name = type(self).__name__
        if isinstance(entries, (Module, Tensor)) and not isinstance(entries, _Dict):
            raise TypeError(f"{name}.update: expected a mapping or an iterable of (name, value) "
                            f"pairs, got a {type(entries).__name__}")
        if isinstance(entries, (Mapping, _Dict)):
            pairs = list(entries.items())
            # PyTorch's ParameterDict takes a plain dict's entries sorted (an OrderedDict's
            # in order): its state order follows.
            if self._sorts_dicts and not isinstance(entries, (OrderedDict, _Dict)):
                pairs.sort(key=lambda pair: pair[0])
        else:
            pairs = list(entries)
        checked = []
        for k, pair in enumerate(pairs):
            if not isinstance(pair, (tuple, list)) or len(pair) != 2:
                raise ValueError(f"{name}.update: entry {k} must be a (name, value) pair, "
                                 f"got {pair!r}")
            _check_name(pair[0], f"{name}.update")
            checked.append((pair[0], self._entry(pair[1], f"{name}.update: entry {pair[0]!r}")))
        for key, value in checked:
            self._put(key, value)


class Sequential(Module):
    """Runs its children in order; they are named "0", "1", ... (or by an OrderedDict)."""

    def __init__(self, *modules: Any) -> None:
        super().__init__()
        if len(modules) == 1 and isinstance(modules[0], OrderedDict):
            for name, m in modules[0].items():
                self.add_module(name, m)
        else:
            for i, m in enumerate(modules):
                self.add_module(str(i), m)

    def forward(self, input: Any) -> Any:
        for m in self.children():
            input = m(input)
        return input

    def append(self, module: Module) -> "Sequential":
        self.add_module(str(len(self._modules)), module)
        return self

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(self._modules.values())

    def __getitem__(self, index: Union[int, slice]) -> Module:
        items = list(self._modules.items())
        if isinstance(index, slice):
            return Sequential(OrderedDict(items[index]))
        if not -len(items) <= index < len(items):
            raise IndexError(f"Sequential: index {index} out of range for {len(items)} modules")
        return items[index][1]


class ModuleList(_Modules, _List):
    """Holds child modules in a list; they are named "0", "1", ... by position."""

    def __init__(self, modules: Optional[Iterable[Module]] = None) -> None:
        super().__init__(modules)

    def __delitem__(self, index: Union[int, slice]) -> None:
        values = list(self._modules.values())
        if isinstance(index, slice):
            del values[index]
        else:
            del values[_position(index, len(values), "ModuleList")]
        _renumber(self._modules, values)

    def __add__(self, other: Iterable[Module]) -> "ModuleList":
        return ModuleList(list(self) + list(other))

    def insert(self, index: int, module: Module) -> None:
        """Inserts before position `index`, clamped to the list as list.insert does."""
        values = list(self._modules.values())
        values.insert(operator.index(index), self._entry(module, "ModuleList.insert"))
        _renumber(self._modules, values)

    def pop(self, index: int = -1) -> Module:
        module = self[index]
        del self[index]
        return module


class ModuleDict(_Modules, _Dict):
    """Holds child modules by name, in insertion order."""

    def __init__(self, modules: Optional[Union[Mapping[str, Module],
                                               Iterable[tuple[str, Module]]]] = None) -> None:
        super().__init__(modules)


class ParameterList(_Parameters, _List):
    """Holds parameters in a list, named "0", "1", ..."""

    def __init__(self, values: Optional[Iterable[Tensor]] = None) -> None:
        super().__init__(values)


class ParameterDict(_Parameters, _Dict):
    """Holds parameters by name ("scales.alpha" in the state), in insertion order; a plain
    dict given to the constructor or update() is taken in key order, as PyTorch's."""

    _sorts_dicts = True

    def __init__(self, parameters: Optional[Any] = None) -> None:
        super().__init__(parameters)


__all__ = ["ModuleDict", "ModuleList", "ParameterDict", "ParameterList", "Sequential"]
