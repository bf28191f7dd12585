"""torch.utils.data._utils.collate: default_collate (a list of examples to a batch) and
default_convert (one example's numpy arrays to tensors), with torch's structure rules.

Numbers become onemodel's dtypes, as om.from_numpy makes them: floats float32 (onemodel has
no float64), integers int64 (int32 kept), bools bool. Strings and bytes stay lists, as torch's.
"""
from __future__ import annotations

import collections.abc
import copy
from typing import Any, Sequence

import numpy as np

from ....tensor import Tensor, _canonical

_NOT_COLLATABLE = ("default_collate: batch must contain tensors, numpy arrays, numbers, dicts or "
                   "lists; found {}")
_KINDS = {"U": "strings", "S": "bytes", "O": "Python objects", "c": "complex numbers",
          "M": "dates", "m": "time spans", "V": "records"}


def is_array(value: Any) -> bool:
    """An array of a dataset: numpy's, a Tensor, or one that numpy reads (a torch tensor)."""
    return isinstance(value, (np.ndarray, Tensor)) or (
        hasattr(value, "__array__") and hasattr(value, "shape") and len(value.shape) > 0)


def numbers(value: Any, what: str) -> np.ndarray:
    """The numbers of an array, example or field, or a TypeError that names it."""
    if isinstance(value, Tensor):
        return value._data
    if hasattr(value, "detach") and hasattr(value, "numpy"):  # a torch tensor
        value = value.detach().cpu().numpy()
    try:
        arr = np.asarray(value)
    except (TypeError, ValueError) as e:
        raise TypeError(f"{what} ({type(value).__name__}) is not an array of numbers: "
                        f"{e}") from None
    if arr.dtype.kind not in "biuf":
        held = _KINDS.get(arr.dtype.kind, "values")
        raise TypeError(f"{what} holds {held} (a {type(value).__name__} of dtype {arr.dtype}); "
                        "a batch holds float, integer or bool numbers")
    return arr


def to_tensor(arr: np.ndarray, what: str) -> Tensor:
    return Tensor._wrap(_canonical(arr, what))


def _is_numeric_leaf(elem: Any) -> bool:
    return isinstance(elem, (Tensor, np.ndarray, np.number, np.bool_, float, int)) or (
        hasattr(elem, "detach") and hasattr(elem, "numpy"))


def _shape_kind(value: Any) -> str:
    """How collation reads a value: by key, by position, or as one leaf."""
    if isinstance(value, collections.abc.Mapping):
        return "dict"
    return "sequence" if isinstance(value, (tuple, list)) else "leaf"


def _stack(batch: Sequence[Any], what: str) -> Tensor:
    arrays = [numbers(v, f"default_collate: {what} of example {i}") for i, v in enumerate(batch)]
    first = arrays[0].shape
    for i, a in enumerate(arrays):
        if a.shape != first:
            raise RuntimeError(f"default_collate: {what} has shape {first} in example 0 and "
                               f"{a.shape} in example {i}: examples must stack (pad them, or "
                               "use batch_size=1)")
    return to_tensor(np.stack(arrays), f"default_collate: {what}")


def _collate(batch: Sequence[Any], what: str) -> Any:
    elem = batch[0]
    for i, other in enumerate(batch):
        if _shape_kind(other) != _shape_kind(elem):
            raise TypeError(f"default_collate: {what} is a {type(other).__name__} in example "
                            f"{i} and a {type(elem).__name__} in example 0")
    if isinstance(elem, (str, bytes)):
        return batch  # as given (torch's): the list, or a field's tuple
    if _is_numeric_leaf(elem):
        if isinstance(elem, np.ndarray) and elem.dtype.kind in "USO":
            raise TypeError(_NOT_COLLATABLE.format(elem.dtype))
        return _stack(batch, what)
    if isinstance(elem, collections.abc.Mapping):
        fields = {key: _collate([d[key] for d in batch], f"field {key!r}") for key in elem}
        try:
            clone = copy.copy(elem)
            clone.update(fields)  # type: ignore[attr-defined]
            return clone
        except (TypeError, AttributeError):
            return fields
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):  # a namedtuple
        return type(elem)(*(_collate(s, f"field {name!r}")
                            for name, s in zip(elem._fields, zip(*batch))))
    if isinstance(elem, collections.abc.Sequence):
        size = len(elem)
        for i, other in enumerate(batch):
            if len(other) != size:
                raise RuntimeError(f"default_collate: each element in list of batch should be "
                                   f"of equal size (example 0 has {size} fields, example {i} "
                                   f"{len(other)})")
        columns = [_collate(s, f"field {k}") for k, s in enumerate(zip(*batch))]
        if isinstance(elem, tuple) or type(elem) is list:
            return columns  # torch's: a tuple of fields is collated to a list
        try:
            return type(elem)(columns)  # type: ignore[call-arg]
        except TypeError:
            return columns
    raise TypeError(_NOT_COLLATABLE.format(type(elem)))


def default_collate(batch: Sequence[Any]) -> Any:
    """Stacks a list of examples into a batch by their structure (torch's rule): tensors,
    arrays and numbers are stacked into one Tensor; dicts, namedtuples and sequences are
    collated field by field (a tuple becomes a list); strings stay a list."""
    if not isinstance(batch, collections.abc.Sequence) or not len(batch):
        raise TypeError(f"default_collate: expected a non-empty list of examples, got "
                        f"{type(batch).__name__}{'' if batch else ' (empty)'}")
    return _collate(batch, "the example")


def default_convert(data: Any) -> Any:
    """An example with its numpy arrays and numbers made Tensors, its structure kept (what the
    DataLoader applies when batching is off, batch_size=None)."""
    if isinstance(data, Tensor):
        return data
    if isinstance(data, (np.ndarray, np.number, np.bool_)):
        if data.dtype.kind in "USO":
            return data
        return to_tensor(np.asarray(data), "default_convert")
    if isinstance(data, collections.abc.Mapping):
        converted = {key: default_convert(value) for key, value in data.items()}
        try:
            clone = copy.copy(data)
            clone.update(converted)  # type: ignore[attr-defined]
            return clone
        except (TypeError, AttributeError):
            return converted
    if isinstance(data, tuple) and hasattr(data, "_fields"):
        return type(data)(*(default_convert(d) for d in data))
    if isinstance(data, tuple):
        return [default_convert(d) for d in data]
    if isinstance(data, collections.abc.Sequence) and not isinstance(data, (str, bytes)):
        try:
            return type(data)([default_convert(d) for d in data])  # type: ignore[call-arg]
        except TypeError:
            return [default_convert(d) for d in data]
    return data
