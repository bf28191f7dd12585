"""Property tests of the checkpoint round trip (hypothesis): random states of f32, i32, i64 and
u8 tensors of any shape (empty ones included), floats drawn as bit patterns with signalling NaNs
and their payloads, -0.0, denormals and infinities over-represented. Every comparison is by
bytes, never by `==` (NaN != NaN, -0.0 == 0.0 would hide exactly what must survive).
"""
from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from onemodel import checkpoint, nn
from onemodel.optim import SGD
from onemodel.tensor import Tensor

DTYPES = {"f32": np.dtype("<f4"), "i32": np.dtype("<i4"), "i64": np.dtype("<i8"),
          "u8": np.dtype("u1")}
# Bit patterns a float32 copy through arithmetic would change: signalling NaNs with payloads
# (quiet bit clear), quiet NaNs with payloads and sign, -0.0, denormals, infinities, extremes.
SPECIAL_F32 = [0x7F800001, 0x7FA00000, 0x7FBFFFFF, 0xFF800001, 0xFFBFFFFF, 0x7FC00000,
               0x7FC00001, 0xFFFFFFFF, 0x80000000, 0x00000000, 0x00000001, 0x807FFFFF,
               0x007FFFFF, 0x7F800000, 0xFF800000, 0x7F7FFFFF, 0xFF7FFFFF, 0x00800000]
PROFILE = settings(max_examples=40, deadline=None, database=None)


def elements(dtype: str) -> st.SearchStrategy[int]:
    """Raw element values as unsigned integers of the dtype's width."""
    bits = 8 * DTYPES[dtype].itemsize
    anything = st.integers(0, (1 << bits) - 1)
    if dtype == "f32":
        return st.one_of(st.sampled_from(SPECIAL_F32), anything)
    return st.one_of(st.sampled_from([0, 1, (1 << bits) - 1, 1 << (bits - 1)]), anything)


@st.composite
def tensors(draw) -> np.ndarray:
    dtype = draw(st.sampled_from(sorted(DTYPES)))
    shape = tuple(draw(st.lists(st.integers(0, 5), max_size=3)))
    raw = draw(st.lists(elements(dtype), min_size=math.prod(shape),
                        max_size=math.prod(shape)))
    unsigned = np.dtype(f"<u{DTYPES[dtype].itemsize}")
    return np.array(raw, unsigned).view(DTYPES[dtype]).reshape(shape)


class Holder(nn.Module):
    """A module whose state is the given arrays, as buffers b0, b1, ..."""

    def __init__(self, arrays: list[np.ndarray]) -> None:
        super().__init__()
        for i, arr in enumerate(arrays):
            self.register_buffer(f"b{i}", Tensor._wrap(arr.copy()))


def raw(arr: np.ndarray) -> tuple:
    return arr.dtype.str, arr.shape, arr.tobytes()


def state_of(module: nn.Module) -> list[tuple]:
    return [raw(t._data) for _, t in module._named_state()]


extras = st.dictionaries(st.text(max_size=8), st.integers(-(1 << 63), (1 << 63) - 1),
                         max_size=4)


@PROFILE
@given(st.lists(tensors(), max_size=6), extras)
def test_round_trip_keeps_every_bit(arrays, extra):
    source = Holder(arrays)
    data = checkpoint.to_bytes(source, extra=extra)
    blank = Holder([np.zeros(a.shape, a.dtype) for a in arrays])
    assert checkpoint.from_bytes(data, blank) == extra
    assert state_of(blank) == [raw(a) for a in arrays]
    # Writing the loaded state gives the same bytes, so the same hash.
    assert checkpoint.to_bytes(blank, extra=extra) == data
    assert checkpoint.state_hash(blank) == checkpoint.state_hash(source)


@PROFILE
@given(st.lists(tensors(), min_size=1, max_size=4), st.data())
def test_file_round_trip_reads_into_place(tmp_path_factory, arrays, data):
    """The file reader (tensors read straight into their arrays) gives the same bits."""
    path = tmp_path_factory.mktemp("ckpt") / "a.ckpt"
    checkpoint.save(path, Holder(arrays))
    blank = Holder([np.full(a.shape, 7, a.dtype) for a in arrays])
    before = [t._data for _, t in blank._named_state()]
    checkpoint.load(path, blank)
    assert state_of(blank) == [raw(a) for a in arrays]
    # In place: the module holds the same array objects as before the load.
    assert all(a is t._data for a, (_, t) in zip(before, blank._named_state()))


@PROFILE
@given(st.lists(st.sampled_from(SPECIAL_F32) | st.integers(0, (1 << 32) - 1),
                min_size=12, max_size=12),
       st.integers(0, (1 << 63) - 1))
def test_optimizer_state_and_step_round_trip(bits, step):
    model = nn.Linear(3, 3, bias=False)
    opt = SGD(model.parameters(), lr=0.5, momentum=0.9)
    buf = next(iter(opt.state_tensors().values()))
    buf[...] = np.array(bits[:9], np.uint32).view(np.float32).reshape(buf.shape)
    model.weight._data[...] = np.array(bits[3:], np.uint32).view(np.float32).reshape(3, 3)
    opt.step_count = step
    data = checkpoint.to_bytes(model, opt)
    model2 = nn.Linear(3, 3, bias=False)
    opt2 = SGD(model2.parameters(), lr=0.1, momentum=0.9)
    checkpoint.from_bytes(data, model2, opt2)
    assert opt2.step_count == step
    assert raw(next(iter(opt2.state_tensors().values()))) == raw(buf)
    assert raw(model2.weight._data) == raw(model.weight._data)
    assert checkpoint.to_bytes(model2, opt2) == data


def test_from_bytes_takes_any_bytes_like_object():
    arrays = [np.arange(6, dtype=np.float32).reshape(2, 3), np.array(7, np.int64)]
    data = checkpoint.to_bytes(Holder(arrays))
    doubled = np.frombuffer(data, np.uint8).repeat(2)
    for source in (data, bytearray(data), memoryview(data), memoryview(doubled)[::2]):
        blank = Holder([np.zeros_like(a) for a in arrays])
        checkpoint.from_bytes(source, blank)
        assert state_of(blank) == [raw(a) for a in arrays]
