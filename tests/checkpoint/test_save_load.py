"""onemodel.save / onemodel.load: PyTorch's torch.save(model.state_dict(), f) and
model.load_state_dict(torch.load(f)), over the checkpoint format (a model-only checkpoint of the
dict's arrays), read without a target and with the same hostile-input checks."""
from __future__ import annotations

import io
import os
import struct

import numpy as np
import pytest

import onemodel as om
from onemodel import checkpoint, nn
from onemodel._kernels._crc import crc32c


def model(seed: int) -> nn.Module:
    return nn.Sequential(nn.Linear(5, 7, seed=seed), nn.BatchNorm1d(7), nn.ReLU(),
                         nn.Linear(7, 3, seed=seed + 1))


def array(value) -> np.ndarray:
    return value.numpy() if isinstance(value, om.Tensor) else value


def same_state(a: dict, b: dict) -> bool:
    return list(a) == list(b) and all(
        array(a[k]).dtype == array(b[k]).dtype and array(a[k]).shape == array(b[k]).shape
        and array(a[k]).tobytes() == array(b[k]).tobytes() for k in a)


def test_round_trip_restores_a_model_bit_for_bit(tmp_path):
    src, dst = model(1), model(2)
    src(om.tensor(np.random.default_rng(0).standard_normal((4, 5)).astype(np.float32)))
    path = tmp_path / "model.pt"
    om.save(src.state_dict(), path)
    loaded = om.load(path)
    assert same_state(loaded, src.state_dict())  # names in order, dtypes (i64 too), bytes
    assert loaded["1.num_batches_tracked"].dtype == np.int64
    dst.load_state_dict(loaded)
    assert same_state(dst.state_dict(), src.state_dict())
    # the arrays are the loader's own: changing one changes neither the file nor the model
    loaded["0.weight"].numpy()[...] = 0
    assert same_state(om.load(str(path), map_location="cpu"), src.state_dict())


def test_file_objects_and_the_checkpoint_format_interoperate(tmp_path):
    src = model(3)
    buffer = io.BytesIO()
    om.save(src.state_dict(), buffer)
    assert buffer.getvalue() == checkpoint.to_bytes(src)  # a model-only checkpoint, byte for byte
    buffer.seek(0)
    assert same_state(om.load(buffer, weights_only=True), src.state_dict())
    # a training checkpoint with its optimizer: load gives the model's part
    opt = om.optim.Adam(src.parameters(), lr=1e-3)
    checkpoint.save(tmp_path / "train.ckpt", src, opt, extra={"epoch": 3})
    assert same_state(om.load(tmp_path / "train.ckpt"), src.state_dict())
    other = model(4)
    checkpoint.load(tmp_path / "train.ckpt", other)  # and save's reader takes save_state_dict's
    om.save(other.state_dict(), tmp_path / "m.pt")
    checkpoint.load(tmp_path / "m.pt", model(5))


def test_what_a_file_cannot_hold_is_refused_before_writing(tmp_path):
    path = tmp_path / "x.pt"
    sd = model(1).state_dict()
    with pytest.raises(TypeError, match=r"save: obj\['epoch'\]: a builtins.object cannot"):
        om.save({**sd, "epoch": object()}, path)
    with pytest.raises(TypeError, match=r"key \(0, 1\) of type tuple"):
        om.save({(0, 1): sd["0.weight"]}, path)
    with pytest.raises(ValueError, match=r"obj\['w'\]: dtype float64 cannot be saved"):
        om.save({"w": np.zeros(3)}, path)
    assert not os.listdir(tmp_path)
    with pytest.raises(ValueError, match="map_location 'cuda:0'.*CPU only"):
        om.load(path, map_location="cuda:0")


def reframed(data: bytes, old: bytes, new: bytes) -> bytes:
    """data with one manifest text replaced by another of the same length, checksum redone."""
    assert len(old) == len(new) and data.count(old) == 1
    data = bytearray(data.replace(old, new))
    data[56:64] = struct.pack("<Q", crc32c(bytes(data[64:])))
    return bytes(data)


def test_hostile_files_raise_checkpoint_errors_only():
    good = checkpoint.to_bytes({"a": np.ones(3, np.float32), "b": np.arange(4)})
    assert same_state(om.load(io.BytesIO(good)), {"a": np.ones(3, np.float32), "b": np.arange(4)})
    cases = [
        (good[:-1], checkpoint.BadHeader, "file_length"),
        (good[:100] + bytes([good[100] ^ 1]) + good[101:], checkpoint.BadHeader, "checksum"),
        (reframed(good, b'"name":"b"', b'"name":"a"'), checkpoint.BadManifest,
         "'a' appears more than once"),
        (reframed(good, b'"shape":[3]', b'"shape":[9]'), checkpoint.BadTensor,
         "length 12 is not the shape's 36 bytes"),
        (b"", checkpoint.BadHeader, "empty"),
    ]
    for data, error, match in cases:
        with pytest.raises(error, match=match):
            om.load(io.BytesIO(data))
