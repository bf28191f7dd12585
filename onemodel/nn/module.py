"""Module and Parameter: named state, its order, strict loading.

The state order is a module's parameters in registration order, then its buffers in
registration order, then each child recursively, with dotted paths. named_parameters() is the
parameter subsequence of it and state_dict() the whole; optimizers and checkpoints rely on it.
Registration happens on attribute assignment, so the order is the order of assignment.
"""
from __future__ import annotations

from collections import OrderedDict
from typing import Any, Callable, Iterator, Mapping, NamedTuple, Optional

import numpy as np

from ..autograd import zero_grads
from ..tensor import Tensor, float32, is_float32, to_float32_on_cpu


def check_factory_kwargs(device: Any, dtype: Any, owner: str) -> None:
    """torch's device= and dtype= on a layer: the CPU and float32, what its parameters are;
    anything else is refused naming the layer."""
    if device is not None and str(device).split(":")[0] != "cpu":
        raise ValueError(f"{owner}: onemodel runs on the CPU only, got device={device!r}")
    if dtype is not None and not is_float32(dtype):
        raise TypeError(f"{owner}: parameters are float32, got dtype={dtype!r} (float64 is not "
                        "supported yet; mixed precision is amp.autocast)")


def _positive(value: Any, name: str, layer: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value <= 0:
        raise ValueError(f"{layer}: {name} must be a positive integer, got {value!r}")
    return int(value)


class Parameter(Tensor):
    """A float32 leaf tensor that requires gradients and registers itself on a Module.

    Holds a copy of `data` (float data is rounded to float32; other dtypes are refused).
    """

    __slots__ = ()

    def __init__(self, data: Any, requires_grad: bool = True) -> None:
        arr = np.asarray(data._data if isinstance(data, Tensor) else data)
        if arr.dtype.kind != "f":
            raise TypeError(f"Parameter: data must be floating point, got {arr.dtype}")
        super().__init__(arr.astype(float32, copy=False), requires_grad=requires_grad)

    def __repr__(self) -> str:
        return "Parameter containing:\n" + super().__repr__()


class IncompatibleKeys(NamedTuple):
    """What load_state_dict found missing and unexpected (PyTorch's _IncompatibleKeys)."""

    missing_keys: list[str]
    unexpected_keys: list[str]

    def __repr__(self) -> str:
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return (f"IncompatibleKeys(missing_keys={self.missing_keys!r}, "
                f"unexpected_keys={self.unexpected_keys!r})")


def _check_name(name: Any, what: str) -> None:
    if not isinstance(name, str):
        raise TypeError(f"{what}: name must be a str, got {type(name).__name__}")
    if name == "" or "." in name:
        raise KeyError(f"{what}: name {name!r} must be non-empty and contain no '.'")


class Module:
    """Base class of every layer: owns parameters, buffers and named child modules."""

    training: bool

    def __init__(self) -> None:
        object.__setattr__(self, "_parameters", OrderedDict())
        object.__setattr__(self, "_buffers", OrderedDict())
        object.__setattr__(self, "_modules", OrderedDict())
        object.__setattr__(self, "training", True)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__} has no forward()")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if "_parameters" not in self.__dict__:
            raise self._not_initialised()
        return self.forward(*args, **kwargs)

    # -- registration ---------------------------------------------------------------------
    def _not_initialised(self) -> AttributeError:
        # A subclass whose __init__ forgot super().__init__() has no registries; say so rather
        # than "no attribute '_parameters'" (PyTorch: "cannot assign module before
        # Module.__init__() call").
        name = type(self).__name__
        return AttributeError(f"{name}: Module.__init__() was not called; call "
                              f"super().__init__() first in {name}.__init__, before assigning "
                              "parameters, buffers or submodules or using the module")

    def _registries(self) -> tuple:
        d = self.__dict__
        if "_parameters" not in d:
            raise self._not_initialised()
        return d["_parameters"], d["_buffers"], d["_modules"]

    def _forget(self, name: str) -> None:
        for registry in self._registries():
            registry.pop(name, None)
        self.__dict__.pop(name, None)

    def register_parameter(self, name: str, param: Optional[Parameter]) -> None:
        """Registers a parameter (None keeps the slot, as for a layer built with bias=False)."""
        parameters, buffers, modules = self._registries()
        _check_name(name, "register_parameter")
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(f"register_parameter: {name!r} must be a Parameter or None, got "
                            f"{type(param).__name__}")
        if name in buffers or name in modules:
            self._forget(name)
        self.__dict__.pop(name, None)
        parameters[name] = param

    def register_buffer(self, name: str, tensor: Optional[Tensor]) -> None:
        """Registers saved, untrained state (running statistics, a draw counter)."""
        parameters, buffers, modules = self._registries()
        _check_name(name, "register_buffer")
        if tensor is not None and (not isinstance(tensor, Tensor)
                                   or isinstance(tensor, Parameter)):
            raise TypeError(f"register_buffer: {name!r} must be a Tensor (not a Parameter) or "
                            f"None, got {type(tensor).__name__}")
        if name in parameters or name in modules:
            self._forget(name)
        self.__dict__.pop(name, None)
        buffers[name] = tensor

    def add_module(self, name: str, module: Optional["Module"]) -> None:
        parameters, buffers, modules = self._registries()
        _check_name(name, "add_module")
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"add_module: {name!r} must be a Module or None, got "
                            f"{type(module).__name__}")
        if name in parameters or name in buffers:
            self._forget(name)
        self.__dict__.pop(name, None)
        modules[name] = module

    def __setattr__(self, name: str, value: Any) -> None:
        if isinstance(value, Parameter):
            self.register_parameter(name, value)
        elif isinstance(value, Module):
            self.add_module(name, value)
        elif "_parameters" in self.__dict__ and name in self._parameters:
            if value is not None:
                raise TypeError(f"cannot assign {type(value).__name__} to parameter {name!r} "
                                "(a Parameter or None is required)")
            self._parameters[name] = None
        elif "_buffers" in self.__dict__ and name in self._buffers:
            self.register_buffer(name, value)
        elif "_modules" in self.__dict__ and name in self._modules:
            if value is not None:
                raise TypeError(f"cannot assign {type(value).__name__} to child module "
                                f"{name!r} (a Module or None is required)")
            self._modules[name] = None
        else:
            object.__setattr__(self, name, value)

    def __getattr__(self, name: str) -> Any:
        # Only reached when normal lookup fails: registered state lives in the three dicts.
        d = self.__dict__
        if "_parameters" not in d:
            raise self._not_initialised()
        for registry in ("_parameters", "_buffers", "_modules"):
            if registry in d and name in d[registry]:
                return d[registry][name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name: str) -> None:
        for registry in self._registries():
            if name in registry:
                del registry[name]
                return
        object.__delattr__(self, name)

    # -- traversal --------------------------------------------------------------------------
    def _named_submodules(self) -> Iterator[tuple[str, "Module"]]:
        """Every child slot that holds a module, a module held twice under both names."""
        for name, m in self._modules.items():
            if m is not None:
                yield name, m

    def named_children(self) -> Iterator[tuple[str, "Module"]]:
        """Children in registration order; one module held under two names appears once."""
        seen: set[int] = set()
        for name, m in self._named_submodules():
            if id(m) not in seen:
                seen.add(id(m))
                yield name, m

    def children(self) -> Iterator["Module"]:
        """The direct child modules, in registration order, as `torch.nn.Module.children`."""
        for _, m in self.named_children():
            yield m

    def named_modules(self, memo: Optional[set] = None, prefix: str = "",
                      remove_duplicate: bool = True) -> Iterator[tuple[str, "Module"]]:
        """This module, then every descendant depth-first in registration order; a module
        reachable by two paths is listed once, at the first (unless remove_duplicate=False)."""
        if memo is None:
            memo = set()
        if remove_duplicate:
            if self in memo:
                return
            memo.add(self)
        yield prefix, self
        for name, m in self._named_submodules():
            yield from m.named_modules(memo, f"{prefix}.{name}" if prefix else name,
                                       remove_duplicate)

    def modules(self) -> Iterator["Module"]:
        """This module and every module below it, depth first, each once, as
        `torch.nn.Module.modules`.
        """
        for _, m in self.named_modules():
            yield m

    def _named_state(self, prefix: str = "") -> Iterator[tuple[str, Tensor]]:
        """Every parameter and buffer, in the state order, with dotted names."""
        for registry in (self._parameters, self._buffers):
            for name, t in registry.items():
                if t is not None:
                    yield prefix + name, t
        for name, m in self._named_submodules():
            yield from m._named_state(f"{prefix}{name}.")

    def _named_members(self, parameters: bool, prefix: str, recurse: bool,
                       remove_duplicate: bool) -> Iterator[tuple[str, Tensor]]:
        """Parameters (or buffers) in the state order; a tensor shared by two names (a tied
        weight) appears once, under its first name, unless remove_duplicate is False."""
        seen: set[int] = set()
        base = f"{prefix}." if prefix else ""
        own = self._parameters if parameters else self._buffers
        items = self._named_state(base) if recurse else (
            (base + n, t) for n, t in own.items() if t is not None)
        for name, t in items:
            if isinstance(t, Parameter) != parameters:
                continue
            if remove_duplicate:
                if id(t) in seen:
                    continue
                seen.add(id(t))
            yield name, t

    def named_parameters(self, prefix: str = "", recurse: bool = True,
                         remove_duplicate: bool = True) -> Iterator[tuple[str, Parameter]]:
        """Parameters in the state order; a parameter shared by two names appears once."""
        for name, t in self._named_members(True, prefix, recurse, remove_duplicate):
            assert isinstance(t, Parameter)
            yield name, t

    def parameters(self, recurse: bool = True) -> Iterator[Parameter]:
        """The parameters, in state order, each once, as `torch.nn.Module.parameters`.

        Parameters
        ----------
        recurse : bool, optional
            Include the submodules' parameters (default True).
        """
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix: str = "", recurse: bool = True,
                      remove_duplicate: bool = True) -> Iterator[tuple[str, Tensor]]:
        """(name, buffer) pairs, in state order, as `torch.nn.Module.named_buffers`.

        Parameters
        ----------
        prefix : str, optional
            Prepended to every name.
        recurse : bool, optional
            Include the submodules' buffers (default True).
        remove_duplicate : bool, optional
            List a buffer shared by several modules once (default True).
        """
        yield from self._named_members(False, prefix, recurse, remove_duplicate)

    def buffers(self, recurse: bool = True) -> Iterator[Tensor]:
        """The buffers (batch-norm statistics, dropout counters, ...), in state order, as
        `torch.nn.Module.buffers`.

        Parameters
        ----------
        recurse : bool, optional
            Include the submodules' buffers (default True).
        """
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    # -- state ------------------------------------------------------------------------------
    def state_dict(self) -> "OrderedDict[str, Tensor]":
        """Name -> tensor, for every parameter and buffer, in the state order: as PyTorch's,
        each detached and sharing memory (and version counter) with the module's own, so
        `state_dict()[name].copy_(x)` writes the module and a saved state needs no copy."""
        return OrderedDict((name, t.detach()) for name, t in self._named_state())

    def load_state_dict(self, state_dict: Mapping[str, Any],
                        strict: bool = True) -> IncompatibleKeys:
        """Copies every entry into the existing tensor of that name (identity kept) and
        returns the (missing_keys, unexpected_keys) named tuple, as PyTorch.

        All-or-nothing: a value whose dtype or shape differs, or (when strict) a missing or an
        unexpected name, raises ValueError naming every such key, before anything is copied.
        With strict=False, missing entries keep their values and unexpected ones are ignored.
        Values are numpy arrays (or scalars) or Tensors.
        """
        if not isinstance(state_dict, Mapping):
            raise TypeError(f"load_state_dict: expected a mapping of name -> array, got "
                            f"{type(state_dict).__name__}")
        targets = OrderedDict(self._named_state())
        missing = [k for k in targets if k not in state_dict]
        unexpected = [str(k) for k in state_dict if k not in targets]
        mismatched = []
        sources = {}
        for name, t in targets.items():
            if name not in state_dict:
                continue
            value = state_dict[name]
            if isinstance(value, Tensor):
                value = value._data
            if not isinstance(value, (np.ndarray, np.generic)):
                mismatched.append(f"{name} (a {type(value).__name__}, expected an array of "
                                  f"dtype {t.dtype} and shape {tuple(t.shape)})")
                continue
            value = np.asarray(value)
            problems = []
            if value.dtype != t.dtype:
                problems.append(f"dtype {value.dtype} != expected {t.dtype}")
            if value.shape != t.shape:
                problems.append(f"shape {value.shape} != expected {t.shape}")
            if problems:
                mismatched.append(f"{name} ({', '.join(problems)})")
            sources[name] = value
        if mismatched or (strict and (missing or unexpected)):
            parts = []
            if strict and missing:
                parts.append("missing keys: " + ", ".join(missing))
            if strict and unexpected:
                parts.append("unexpected keys: " + ", ".join(unexpected))
            if mismatched:
                parts.append("mismatched keys: " + "; ".join(mismatched))
            raise ValueError(f"load_state_dict into {type(self).__name__}: "
                             + "; ".join(parts))
        for name, value in sources.items():
            t = targets[name]
            np.copyto(t._data, value)
            t._version += 1
        return IncompatibleKeys(missing, unexpected)

    # -- device and dtype ------------------------------------------------------------------
    def to(self, *args: Any, **kwargs: Any) -> "Module":
        """model.to(device) / .to(dtype) as in PyTorch: the module itself, for the CPU and
        float32, which its parameters already are; other devices and dtypes are refused (mixed
        precision is amp.autocast)."""
        to_float32_on_cpu(args, kwargs, f"{type(self).__name__}: its parameters are float32 "
                                        f"on the CPU; for mixed precision use amp.autocast")
        return self

    def cpu(self) -> "Module":
        """Returns the module itself: everything lives on the CPU."""
        return self

    def float(self) -> "Module":
        """Returns the module itself: every parameter is float32 already."""
        return self

    def double(self) -> "Module":
        raise TypeError(f"{type(self).__name__}.double: float64 is not supported yet; onemodel "
                        "computes in float32")

    def half(self) -> "Module":
        raise TypeError(f"{type(self).__name__}.half: float16 parameters are not supported; "
                        "mixed precision is amp.autocast")

    # -- modes and gradients --------------------------------------------------------------
    def train(self, mode: bool = True) -> "Module":
        """Sets training mode on this module and every descendant."""
        for m in self.modules():
            object.__setattr__(m, "training", bool(mode))
        return self

    def eval(self) -> "Module":
        """Evaluation mode (`train(False)`): dropout passes its input through, batch norm uses its
        running statistics. Returns the module.
        """
        return self.train(False)

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Drops every parameter's .grad (PyTorch 2's default), or with set_to_none=False fills
        each existing one with zeros in place."""
        zero_grads(self.parameters(), set_to_none)

    def requires_grad_(self, requires_grad: bool = True) -> "Module":
        """Sets `requires_grad` on every parameter and returns the module, as
        `torch.nn.Module.requires_grad_`.

        Parameters
        ----------
        requires_grad : bool, optional
            Whether autograd records operations on the parameters (default True).
        """
        for p in self.parameters():
            p.requires_grad = requires_grad
        return self

    def apply(self, fn: Callable[["Module"], None]) -> "Module":
        """Calls fn on every descendant, children first, then on this module (as PyTorch)."""
        for m in self.children():
            m.apply(fn)
        fn(self)
        return self

    # -- printing ---------------------------------------------------------------------------
    def extra_repr(self) -> str:
        return ""

    def __repr__(self) -> str:
        lines = []
        for name, m in self._named_submodules():
            child = repr(m).replace("\n", "\n  ")
            lines.append(f"  ({name}): {child}")
        head = f"{type(self).__name__}({self.extra_repr()}"
        if not lines:
            return head + ")"
        return head + "\n" + "\n".join(lines) + "\n)"
