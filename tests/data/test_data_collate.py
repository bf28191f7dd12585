"""default_collate and default_convert against torch 2.13's on the structures datasets return:
numbers, numpy arrays and scalars, tensors, dicts, namedtuples, tuples (collated to lists),
lists, strings; their errors; the names under torch's module paths."""
import collections

import numpy as np
import pytest

import onemodel as om
from onemodel.utils.data import default_collate, default_convert

torch = pytest.importorskip("torch")

Point = collections.namedtuple("Point", ["x", "y"])
# onemodel has no float64: what torch makes float64 is float32 here (docs/spec, "float64").
_DTYPES = {"torch.float64": "float32", "torch.float32": "float32", "torch.int64": "int64",
           "torch.int32": "int32", "torch.bool": "bool"}


def plain(value):
    """A batch as nested Python values, tensors as (dtype, shape, values), comparable across
    the two libraries."""
    if isinstance(value, om.Tensor):
        return ("tensor", str(value.dtype), tuple(value.shape), value.numpy().tolist())
    if isinstance(value, torch.Tensor):
        if value.dtype == torch.float64:  # rounded as onemodel stores it
            value = value.to(torch.float32)
        return ("tensor", _DTYPES[str(value.dtype)], tuple(value.shape), value.tolist())
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return (type(value).__name__, [plain(v) for v in value])
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, [plain(v) for v in value])
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    return value


def _torch_side(example):
    """The example as a torch dataset returns it: onemodel Tensors become torch tensors."""
    if isinstance(example, om.Tensor):
        return torch.from_numpy(example.numpy().copy())
    if isinstance(example, tuple) and hasattr(example, "_fields"):
        return type(example)(*(_torch_side(v) for v in example))
    if isinstance(example, (list, tuple)):
        return type(example)(_torch_side(v) for v in example)
    if isinstance(example, dict):
        return {k: _torch_side(v) for k, v in example.items()}
    return example


BATCHES = {
    "ints": [0, 3, -2],
    "floats": [0.5, 1.25, -3.0],
    "bools": [True, False, True],
    "numpy scalars": [np.float32(1.5), np.float32(-2)],
    "numpy int64 scalars": [np.int64(4), np.int64(5)],
    "arrays": [np.arange(6, dtype=np.float32).reshape(2, 3) + i for i in range(3)],
    "int32 arrays": [np.arange(3, dtype=np.int32) * i for i in range(2)],
    "float64 arrays": [np.linspace(0, 1, 4) + i for i in range(2)],
    "tensors": [om.from_numpy(np.arange(4, dtype=np.float32) * i) for i in range(3)],
    "strings": ["a", "bc", "d"],
    "tuples": [(np.ones(2, np.float32) * i, i) for i in range(3)],
    "lists": [[i, float(i), "s"] for i in range(3)],
    "dicts": [{"image": np.full((2, 2), i, np.float32), "label": i, "name": f"n{i}"}
              for i in range(3)],
    "namedtuples": [Point(np.float32(i), [i, i + 1]) for i in range(2)],
    "nested": [{"a": (i, {"b": [np.float32(i)]}), "c": Point(i, "x")} for i in range(2)],
}


@pytest.mark.parametrize("name", list(BATCHES))
def test_default_collate_is_torchs(name):
    batch = BATCHES[name]
    ours = default_collate(batch)
    theirs = torch.utils.data.default_collate([_torch_side(e) for e in batch])
    assert plain(ours) == plain(theirs)


def test_collated_tuples_are_lists_and_namedtuples_keep_their_type():
    ours = default_collate(BATCHES["tuples"])
    assert type(ours) is list and type(default_collate(BATCHES["namedtuples"])) is Point


CONVERTED = [np.arange(3), np.float32(2.5), Point(np.zeros(2), 1), (np.ones(2), "s"),
             {"a": np.arange(2), "b": [np.int64(3)]}, 7, "text", np.array(["x", "y"])]


@pytest.mark.parametrize("example", CONVERTED, ids=lambda e: type(e).__name__)
def test_default_convert_is_torchs(example):
    ours = default_convert(example)
    theirs = torch.utils.data.default_convert(example)
    if isinstance(example, np.ndarray) and example.dtype.kind == "U":
        assert ours is example and theirs is example
    else:
        assert plain(ours) == plain(theirs)


def test_collate_errors_name_the_field_and_examples():
    with pytest.raises(RuntimeError, match=r"field 'x' has shape \(2,\) in example 0 and "
                                           r"\(3,\) in example 1"):
        default_collate([{"x": np.zeros(2)}, {"x": np.zeros(3)}])
    with pytest.raises(RuntimeError, match="each element in list of batch should be of equal "
                                           "size"):
        default_collate([(1, 2), (1, 2, 3)])
    with pytest.raises(TypeError, match="field 'x' is a list in example 1 and a int in "
                                        "example 0"):
        default_collate([{"x": 1}, {"x": [1]}])
    with pytest.raises(TypeError, match="batch must contain tensors, numpy arrays, numbers, "
                                        "dicts or lists; found <class 'NoneType'>"):
        default_collate([None, None])
    with pytest.raises(TypeError, match="expected a non-empty list of examples"):
        default_collate([])


def test_names_under_torchs_module_paths():
    from onemodel.utils.data._utils.collate import default_collate as deep
    from onemodel.utils.data._utils.worker import get_worker_info
    from onemodel.utils.data.dataloader import default_collate as from_loader
    from onemodel.utils.data.dataloader import default_convert as convert
    assert deep is from_loader is default_collate and convert is default_convert
    assert get_worker_info() is None and om.utils.data.get_worker_info is get_worker_info
