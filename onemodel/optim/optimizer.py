"""The optimizer base: parameter groups, float32 hyper-parameters, a global step count.

docs/spec/training.txt section 3 and docs/spec/clarifications.md: every hyper-parameter enters
the arithmetic (and checkpoints) as its float32 value, while `param_groups` show it as the user
gave it, as PyTorch's do (docs/spec/optimizers.md section 1; a value restored from a checkpoint's
float32 bits shows as the shortest decimal with those bits). The learning rate is read at every
step (a schedule sets it), parameters whose `.grad` is None are skipped, `step_count` counts
completed steps, and the state is float32 (int32 flags), shaped like its parameter, zero at
creation and listed in a fixed order by `state_tensors()`. A parameter's state arrays take memory
from its first update, or from the first call of state_tensors() (which hands them out to be
read and written; `lazy_state`: until then, read-only zero-strided views).

Parameter groups are PyTorch's: `params` is an iterable of tensors
(one group) or of dicts `{"params": [...], "lr": ..., ...}`, each key missing from a dict taking the
constructor's value. Each group applies section 3's arithmetic with its own hyper-parameters;
`step_count` is the optimizer's and the state's index `i` counts the parameters of all groups in
order. The learning rate and weight decay of a group can be set (`param_groups[g]["lr"] = x`,
checked, used as float32 from the next step); the other settings fix the state's
layout and a checkpoint's fixed settings, so they cannot change after construction.

`optimizer.lr` reads group 0's rate. Setting it (what a schedule's `apply` does) sets group 0's
rate to the value and every other group's to float32(initial_g · (float32(value) / initial_0))
in double, with initial_g the float32 of the group's rate at construction: PyTorch's schedulers
also scale every group's initial rate by the same factor, and a one-group optimizer gets exactly
the value.

`hyper_parameters()` lists group 0's as for one group, then for each later group g the entry
`params.g` (its parameter count, a fixed setting: a checkpoint must also match the group sizes)
followed by group 0's names suffixed `.g`, so one group writes today's checkpoint bytes.
"""
from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import MutableMapping
from typing import Any, Callable, Iterable, Iterator, Mapping, Optional, Sequence

import numpy as np

from .. import _config
from ..autograd import enable_grad, zero_grads
from ..tensor import Tensor

# Keys a learning-rate scheduler records in a group, as torch's do; numbers, not settings.
SCHEDULER_KEYS = ("initial_lr", "max_lr", "min_lr", "base_momentum", "max_momentum")
# A group's parameter count is saved as a float32 hyper-parameter: exact up to 2^24.
MAX_GROUP_SIZE = 1 << 24
FLOAT32_MAX = float(np.finfo(np.float32).max)


def lazy_state(shape: tuple, value: float = 0.0, dtype: Any = np.float32) -> np.ndarray:
    """A state array of `shape`, every element `value`, that takes no memory until its
    parameter's first update (Optimizer._allocate_state): a read-only zero-strided view."""
    return np.broadcast_to(np.full((), value, dtype), shape)


def f32(value: float) -> float:
    """The Python float of float32(value): how every hyper-parameter is held."""
    return float(np.float32(value))


def shortest(value: float) -> float:
    """The shortest decimal with the float32 bits of value, as a Python float: a setting restored
    from float32 bits shows as the user gave it (0.01, not 0.009999999776482582)."""
    return float(str(np.float32(value)))


def check_number(owner: str, name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.floating, np.integer)):
        raise ValueError(f"{owner}: {name} must be a number, got {value!r}")
    value = float(value)
    if math.isnan(value):
        raise ValueError(f"{owner}: {name} must not be NaN")
    return value


def same_bits(a: float, b: float) -> bool:
    return np.float32(a).tobytes() == np.float32(b).tobytes()


class ParamGroup(MutableMapping):
    """One parameter group: its tensors under "params" and its hyper-parameters.

    A mapping like PyTorch's group dict; only the optimizer's changeable settings can be set.
    """

    def __init__(self, owner: "Optimizer", index: int, values: dict) -> None:
        self._owner, self._index, self._values = owner, index, values

    def __getitem__(self, key: str) -> Any:
        return self._values[key]

    def __setitem__(self, key: str, value: Any) -> None:
        owner = self._owner
        where = f"{owner.kind}: param_groups[{self._index}]"
        if key in SCHEDULER_KEYS:
            self._values[key] = check_number(where, key, value)
            return
        if key not in owner._changeable:
            raise ValueError(f"{where}[{key!r}] cannot be set: only {list(owner._changeable)} "
                             "can change after construction")
        self._values[key] = owner._check_setting(where, key, value)

    def __delitem__(self, key: str) -> None:
        raise ValueError(f"{self._owner.kind}: param_groups[{self._index}][{key!r}] cannot "
                         "be deleted")

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        hp = ", ".join(f"{k!r}: {v!r}" for k, v in self._values.items() if k != "params")
        return f"{{'params': <{len(self._values['params'])} tensors>, {hp}}}"


class GroupSetting:
    """An attribute that reads and sets group 0's setting of its name (the one-group API)."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.key = name

    def __get__(self, obj: Any, objtype: Any = None) -> Any:
        return self if obj is None else obj.param_groups[0][self.key]

    def __set__(self, obj: Any, value: Any) -> None:
        obj.param_groups[0][self.key] = value


class Optimizer:
    """Holds the parameter groups and the step count; subclasses update."""

    kind = "Optimizer"
    # Group keys that may be set after construction; each is also its hyper-parameter's name.
    _changeable: tuple = ("lr",)
    # Hyper-parameters a checkpoint must match exactly (docs/spec/training.txt section 6); the
    # others (the learning rate, weight decay) are restored from it.
    _fixed: tuple = ()
    groups_supported = True

    def __init__(self, params: Iterable[Any], defaults: Mapping[str, Any]) -> None:
        groups, single = self._group_dicts(params)
        self.param_groups: list[ParamGroup] = []
        self.params: list[Tensor] = []
        self._group_of: list[int] = []
        seen: dict[int, int] = {}
        for g, group in enumerate(groups):
            where = self.kind if single else f"{self.kind}: param_groups[{g}]"
            unknown = [k for k in group if k != "params" and k not in defaults]
            if unknown:
                raise ValueError(f"{where}: unknown key {unknown[0]!r} (known: "
                                 f"{['params'] + list(defaults)})")
            values = self._check_group(where, {**defaults, **group})
            if not f32(values["lr"]) > 0.0:
                raise ValueError(f"{where}: lr must be > 0, got {values['lr']!r}")
            tensors = self._check_params(where, "params" if single else "['params']",
                                         group["params"], g, seen)
            self.param_groups.append(ParamGroup(self, g, {"params": tensors, **values}))
            self.params += tensors
            self._group_of += [g] * len(tensors)
        # float32 values: what a schedule's factors multiply (the bits of section 3).
        self._initial_lrs = [f32(group["lr"]) for group in self.param_groups]
        self._step_count = 0
        # ZeRO-1 (distributed.OptimizerShards): parameter index -> the [start, end) of its
        # flat elements this worker updates (absent: none); None: every element.
        self._pieces: Optional[dict[int, tuple[int, int]]] = None

    def _group_dicts(self, params: Iterable[Any]) -> tuple[list[dict], bool]:
        """The groups as dicts, and whether params was a plain list of tensors."""
        if isinstance(params, Tensor):
            raise ValueError(f"{self.kind}: params must be an iterable of tensors or of "
                             "dicts, not a single tensor")
        params = list(params)
        if not params:
            raise ValueError(f"{self.kind}: params is empty")
        if not any(isinstance(p, Mapping) for p in params):
            return [{"params": params}], True
        if not self.groups_supported:
            raise ValueError(f"{self.kind}: parameter groups are not supported; pass the "
                             "tensors themselves")
        for g, group in enumerate(params):
            if not isinstance(group, Mapping) or "params" not in group:
                raise ValueError(f"{self.kind}: params[{g}] must be a dict with a 'params' "
                                 f"key when any element is one, got {type(group).__name__}")
        return [dict(group) for group in params], False

    def _check_params(self, where: str, name: str, params: Any, g: int,
                      seen: dict[int, int]) -> list[Tensor]:
        if isinstance(params, Tensor):
            params = [params]  # PyTorch accepts one tensor as a group's params
        params = list(params)
        if not params:
            raise ValueError(f"{where}: {name} is empty")
        if len(params) > MAX_GROUP_SIZE:
            raise ValueError(f"{where}: {name} holds {len(params)} tensors, at most 2^24")
        for i, p in enumerate(params):
            if not isinstance(p, Tensor):
                raise ValueError(f"{where}: {name}[{i}] is a {type(p).__name__}, "
                                 "not a Tensor")
            if p.dtype != np.float32:
                raise ValueError(f"{where}: {name}[{i}] has dtype {p.dtype}, "
                                 "expected float32")
            if id(p) in seen:
                other = seen[id(p)]
                raise ValueError(f"{where}: {name}[{i}] appears twice in params" if other == g
                                 else f"{where}: {name}[{i}] is also in param_groups[{other}]")
            seen[id(p)] = g
        return params

    def _check_group(self, where: str, values: dict) -> dict:
        """The group's hyper-parameters checked, as given (the arithmetic reads their float32
        values), in the group's key order (without "params")."""
        return {"lr": self._check_setting(where, "lr", values["lr"])}

    def _check_setting(self, where: str, key: str, value: Any) -> Any:
        """A changeable setting checked and kept as given, as PyTorch shows it (a numpy number
        as a Python float); the arithmetic and checkpoints use its float32 value."""
        number = check_number(where, key, value)
        if key == "lr":
            # 0 is allowed here: a schedule may end at a rate of 0.
            if number < 0.0 or math.isinf(number):
                raise ValueError(f"{where}: lr must be finite and >= 0, got {value!r}")
        elif number < 0.0:
            raise ValueError(f"{where}: {key} must be >= 0, got {value!r}")
        if number > FLOAT32_MAX:
            raise ValueError(f"{where}: {key} overflows float32: {value!r}")
        return value if isinstance(value, (int, float)) else number

    # -- learning rate and step count -------------------------------------------------------
    @property
    def lr(self) -> float:
        return self.param_groups[0]["lr"]

    @lr.setter
    def lr(self, value: float) -> None:
        lr = self._check_setting(self.kind, "lr", value)
        factor = f32(lr) / self._initial_lrs[0]
        rates = [lr] + [self._check_setting(f"{self.kind}: param_groups[{g}]", "lr",
                                            f32(initial * factor))
                        for g, initial in enumerate(self._initial_lrs[1:], 1)]
        for group, rate in zip(self.param_groups, rates):
            group["lr"] = rate

    @property
    def step_count(self) -> int:
        return self._step_count

    @step_count.setter
    def step_count(self, value: int) -> None:
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
            raise ValueError(f"{self.kind}: step_count must be an integer >= 0, got {value!r}")
        self._step_count = int(value)

    # -- the step -----------------------------------------------------------------------------
    def zero_grad(self, set_to_none: bool = True) -> None:
        """Drops every gradient (PyTorch 2's default), or with set_to_none=False fills each
        existing one with zeros in place."""
        zero_grads(self.params, set_to_none)

    def step(self, closure: Optional[Callable[[], Any]] = None) -> Any:
        """Updates every parameter that has a gradient, then counts the step. As PyTorch's, a
        closure is called first (under enable_grad) and its loss returned."""
        loss = self._evaluate(closure)
        self._apply()
        return loss

    def _evaluate(self, closure: Optional[Callable[[], Any]]) -> Any:
        """closure() under enable_grad, or None without one."""
        if closure is None:
            return None
        if not callable(closure):
            raise TypeError(f"{self.kind}.step: closure must be callable, got "
                            f"{type(closure).__name__}")
        with enable_grad():
            return closure()

    def _apply(self) -> None:
        # Every gradient is checked before any parameter changes.
        work = [(i, p, self._grad_array(i, p)) for i, p in enumerate(self.params)
                if p.grad is not None]
        nthreads = _config.num_threads()
        for i, p, g in work:
            start, end = (0, p._data.size) if self._pieces is None else \
                self._pieces.get(i, (0, 0))
            if start == end and self._pieces is not None:
                continue
            self._allocate_state([i])
            self._update(i, self.param_groups[self._group_of[i]],
                         p._data.reshape(-1)[start:end], g.reshape(-1)[start:end], nthreads)
            p._version += 1
        self._step_count += 1

    def _allocate_state(self, indices: Optional[Iterable[int]] = None) -> None:
        """Real arrays for the lazy state (lazy_state) of these parameters (default: every
        one this worker steps; state_tensors() hands out writable arrays)."""
        lists = self._state_lists().values()
        if indices is None:
            indices = range(len(self.params)) if self._pieces is None else list(self._pieces)
        for i in indices:
            for states in lists:
                a = states[i]
                if a is not None and not a.flags.writeable:
                    states[i] = np.array(a)

    def _grad_array(self, i: int, p: Tensor) -> np.ndarray:
        g = p.grad._data if isinstance(p.grad, Tensor) else p.grad
        if not isinstance(g, np.ndarray) or g.dtype != np.float32 or g.shape != p.shape:
            shape = getattr(g, "shape", None)
            dtype = getattr(g, "dtype", type(g).__name__)
            raise ValueError(f"{self.kind}.step: params[{i}] of shape {p.shape}: gradient of "
                             f"shape {shape} and dtype {dtype}, expected float32 {p.shape}")
        if not p._data.flags.c_contiguous:
            raise ValueError(f"{self.kind}.step: params[{i}] is not C-contiguous")
        if np.may_share_memory(g, p._data):
            raise ValueError(f"{self.kind}.step: params[{i}]: gradient shares memory with "
                             "the parameter")
        return np.ascontiguousarray(g)

    def _update(self, i: int, group: ParamGroup, p: np.ndarray, g: np.ndarray,
                nthreads: int) -> None:
        raise NotImplementedError

    # -- state --------------------------------------------------------------------------------
    def state_tensors(self) -> "OrderedDict[str, np.ndarray]":
        """Name -> the state array itself (not a copy), in checkpoint order."""
        return OrderedDict()

    def _state_lists(self) -> "dict[str, list]":
        """kind -> the per-parameter list (None where a parameter has none) behind
        state_tensors()' `<kind>.<i>` entries, updated element by element: what lazy_state
        allocates, and ZeRO-1 (distributed.OptimizerShards) swaps for this worker's piece or
        a placeholder. Empty: not swappable (every worker then steps the whole state)."""
        return {}

    def _group_hyper(self, group: Mapping[str, Any]) -> "OrderedDict[str, float]":
        """One group's hyper-parameters by checkpoint name (flags as 0.0 or 1.0)."""
        return OrderedDict(lr=f32(group["lr"]))

    def hyper_parameters(self) -> "OrderedDict[str, float]":
        """Name -> value (a float32 value as a Python float; flags as 0.0 or 1.0), in order."""
        return self._flat_hyper(self.param_groups)

    def _flat_hyper(self, groups: Sequence) -> "OrderedDict[str, float]":
        out: OrderedDict[str, float] = OrderedDict()
        for g, group in enumerate(groups):
            if g:
                out[f"params.{g}"] = float(len(group["params"]))
            for name, value in self._group_hyper(group).items():
                out[_suffixed(name, g)] = value
        return out

    @property
    def fixed_hyper_parameters(self) -> tuple:
        """The names of hyper_parameters() that a checkpoint must match bit for bit."""
        return tuple(name for g in range(len(self.param_groups))
                     for name in ((f"params.{g}",) if g else ()) + tuple(
                         _suffixed(n, g) for n in self._fixed))

    def load_hyper_parameters(self, values: Mapping[str, float]) -> None:
        """Restores the changeable hyper-parameters after checking that the fixed ones (and the
        names) equal this optimizer's; nothing changes when a check fails."""
        self._check_hyper_parameters(values)
        self._set_hyper_parameters(values)

    def _check_hyper_parameters(self, values: Mapping[str, float]) -> None:
        own = self.hyper_parameters()
        if list(values) != list(own):
            raise ValueError(f"{self.kind}: hyper-parameters {list(values)} do not match "
                             f"{list(own)}")
        for name in self.fixed_hyper_parameters:
            if not same_bits(values[name], own[name]):
                raise ValueError(f"{self.kind}: {name} is {own[name]!r}, "
                                 f"the saved value {values[name]!r}")
        for g in range(len(self.param_groups)):
            for key in self._changeable:
                self._check_setting(f"{self.kind}: param_groups[{g}]", key,
                                    values[_suffixed(key, g)])

    def _set_hyper_parameters(self, values: Mapping[str, float]) -> None:
        for g, group in enumerate(self.param_groups):
            for key in self._changeable:
                group[key] = shortest(values[_suffixed(key, g)])

    # -- PyTorch's state_dict -----------------------------------------------------------------
    def state_dict(self) -> dict:
        """PyTorch's layout: "state" maps each parameter's index to {"step": the step count as
        a 0-d int64 tensor, then its state tensors by name} (names without an index, like
        SR4's seed, map from the name itself); "param_groups" lists each group's settings with
        "params" as indices. The state tensors are the optimizer's own (as PyTorch's: copy
        them to keep them). onemodel counts steps globally, so every "step" is the same; int64
        keeps counts past 2^24 exact (PyTorch's is a float32 tensor)."""
        state: dict = {i: {"step": Tensor._wrap(np.array(self._step_count, np.int64))}
                       for i in range(len(self.params))}
        for name, arr in self.state_tensors().items():
            key, index = _split(name)
            if index is None:
                state[name] = Tensor._wrap(arr)
            else:
                state[index][key] = Tensor._wrap(arr)
        return {"state": state, "param_groups": self._indexed_groups()}

    def _indexed_groups(self) -> list[dict]:
        """Each group's settings as a dict, with "params" as the parameters' indices."""
        groups, start = [], 0
        for group in self.param_groups:
            n = len(group["params"])
            groups.append({**{k: v for k, v in group.items() if k != "params"},
                           "params": list(range(start, start + n))})
            start += n
        return groups

    def load_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        """Restores what state_dict() returned (tensors or numpy arrays), checking everything
        before changing anything: the keys, the group count and sizes, the fixed settings,
        the step counts and every state tensor's name, dtype and shape (ValueError)."""
        where = f"{self.kind}.load_state_dict"
        if not isinstance(state_dict, Mapping) or set(state_dict) != {"param_groups", "state"}:
            keys = list(state_dict) if isinstance(state_dict, Mapping) else state_dict
            raise ValueError(f"{where}: expected the keys 'state' and 'param_groups', got "
                             f"{keys!r}")
        groups = state_dict["param_groups"]
        if not isinstance(groups, (list, tuple)) or len(groups) != len(self.param_groups):
            n = len(groups) if isinstance(groups, (list, tuple)) else groups
            raise ValueError(f"{where}: {n!r} parameter groups saved, "
                             f"{len(self.param_groups)} in this optimizer")
        for g, (saved, own) in enumerate(zip(groups, self._indexed_groups())):
            if not isinstance(saved, Mapping) or \
                    set(saved) - set(SCHEDULER_KEYS) != set(own) - set(SCHEDULER_KEYS):
                raise ValueError(f"{where}: param_groups[{g}] has keys "
                                 f"{list(saved) if isinstance(saved, Mapping) else saved!r}, "
                                 f"expected {list(own)}")
            for key in SCHEDULER_KEYS:
                if key in saved:
                    check_number(f"{where}: param_groups[{g}]", key, saved[key])
            for key, value in own.items():
                if key not in ("params", *SCHEDULER_KEYS) and not _same_kind(saved[key], value):
                    raise ValueError(f"{where}: param_groups[{g}][{key!r}] is "
                                     f"{saved[key]!r}, expected a {type(value).__name__}")
            if not isinstance(saved["params"], (list, tuple)) or \
                    list(saved["params"]) != own["params"]:
                raise ValueError(f"{where}: param_groups[{g}] holds parameters "
                                 f"{saved['params']!r}, this optimizer {own['params']!r}")
        values = self._flat_hyper(groups)
        self._check_hyper_parameters(values)
        state = state_dict["state"]
        if not isinstance(state, Mapping):
            raise ValueError(f"{where}: state must be a dict, got {type(state).__name__}")
        step = self._saved_step(where, state)
        arrays = self._saved_arrays(where, state)
        self._set_hyper_parameters(values)
        for group, saved in zip(self.param_groups, groups):
            for key in SCHEDULER_KEYS:
                if key in saved:  # a scheduler's records, restored as torch restores them
                    group[key] = saved[key]
        for dst, src in arrays:
            dst[...] = src
        self._step_count = step
        self._state_loaded()

    def _saved_step(self, where: str, state: Mapping) -> int:
        """The step count every parameter's "step" holds (an integer, or an integral float as
        PyTorch's), the same for all."""
        steps = set()
        for i in range(len(self.params)):
            entry = state.get(i)
            step = _array(entry.get("step")) if isinstance(entry, Mapping) else None
            if step is None or step.shape != () or step.dtype.kind not in "iuf" or \
                    not (0 <= step < 2 ** 63) or step != np.floor(step):
                raise ValueError(f"{where}: state[{i}]['step'] must be a 0-d tensor holding "
                                 f"an integer >= 0, got {_short(entry)}")
            steps.add(int(step))
        if len(steps) > 1:
            raise ValueError(f"{where}: the parameters' steps differ ({sorted(steps)}); "
                             f"{self.kind} counts steps for all its parameters at once")
        return steps.pop()

    def _saved_arrays(self, where: str, state: Mapping) -> list:
        """(own array, saved array) pairs for every state tensor, all checked."""
        pairs = []
        for name, own in self.state_tensors().items():
            key, index = _split(name)
            entry = state.get(name) if index is None else state.get(index)
            if index is not None and isinstance(entry, Mapping):
                entry = entry.get(key)
            saved = _array(entry)
            if saved is None or saved.dtype != own.dtype or saved.shape != own.shape:
                got = (f"{saved.dtype} {saved.shape}" if saved is not None
                       else type(entry).__name__)
                raise ValueError(f"{where}: state {name!r}: expected {own.dtype} {own.shape}, "
                                 f"got {got}")
            pairs.append((own, saved))
        # Every own entry was found, so a larger count means entries this optimizer has not.
        saved_count = sum(len([k for k in s if k != "step"]) if isinstance(s, Mapping) else 1
                          for s in state.values())
        if saved_count != len(pairs) or len(state) != len(self.params) + sum(
                _split(name)[1] is None for name in self.state_tensors()):
            raise ValueError(f"{where}: state holds {saved_count} tensors besides the steps "
                             f"for {len(state)} keys, this optimizer {len(pairs)} for "
                             f"{len(self.params)} parameters")
        return pairs

    def _state_loaded(self) -> None:
        """Called after load_state_dict copied the state in (SR4 rewrites its weights)."""

    def __repr__(self) -> str:
        hp = ", ".join(f"{k}={v:g}" for k, v in self.hyper_parameters().items())
        return f"{self.kind}({len(self.params)} parameters, {hp}, step_count={self._step_count})"


def _array(value: Any) -> Any:
    """The array of a saved tensor (or a numpy array), else None."""
    value = value._data if isinstance(value, Tensor) else value
    return value if isinstance(value, np.ndarray) else None


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _suffixed(name: str, g: int) -> str:
    return name if g == 0 else f"{name}.{g}"


def _same_kind(value: Any, like: Any) -> bool:
    """Whether a saved group value has the type of this optimizer's (a flag, a number or a
    pair of numbers), so that converting it cannot fail or mislead."""
    if isinstance(like, bool):
        return isinstance(value, (bool, np.bool_))
    if isinstance(like, (tuple, list)):
        return isinstance(value, (tuple, list)) and len(value) == len(like) and all(
            _same_kind(v, w) for v, w in zip(value, like))
    return not isinstance(value, (bool, np.bool_)) and isinstance(
        value, (int, float, np.integer, np.floating))


def _split(name: str) -> tuple:
    """'exp_avg.3' -> ('exp_avg', 3); a name without a parameter index -> (name, None)."""
    key, _, index = name.rpartition(".")
    return (key, int(index)) if key and index.isdigit() else (name, None)
