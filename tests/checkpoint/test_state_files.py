"""onemodel.save / onemodel.load of what training scripts save (docs/spec/clarifications.md,
"State files"): nested dicts, lists and tuples of tensors, arrays and scalars; the tree layout;
refusals on save naming the place in the object; map_location; torch's files; a checkpoint
dict's round trip continuing training bit for bit; the torch-shaped state dicts."""
from __future__ import annotations

import io
import json
import os
import pickle
import struct
import zipfile
from typing import Any

import numpy as np
import pytest

import onemodel as om
from onemodel import checkpoint, nn
from onemodel.optim import lr_scheduler


def manifest_of(data: bytes) -> dict:
    length = struct.unpack_from("<Q", data, 24)[0]
    return json.loads(data[64:64 + length])


def saved(obj) -> bytes:
    buffer = io.BytesIO()
    om.save(obj, buffer)
    return buffer.getvalue()


def loaded(data: bytes, **kwargs):
    return om.load(io.BytesIO(data), **kwargs)


def same(a, b) -> bool:
    """Equal structure, types and values; tensors by dtype, shape and bytes."""
    if isinstance(a, om.Tensor):
        return isinstance(b, om.Tensor) and a.dtype == b.dtype and a.shape == b.shape and \
            a.numpy().tobytes() == b.numpy().tobytes()
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, float):
        return struct.pack("<d", a) == struct.pack("<d", b)
    return a == b


def test_a_nested_object_round_trips_with_its_types_and_bits(tmp_path):
    w = om.tensor(np.array([[1.5, -0.0], [np.nan, 3.0]], np.float32))
    obj = {"model": {"w": w, "n": om.tensor(np.array(7, np.int64))},
           "iter_num": 1234, "best_val_loss": 0.1 + 0.2, "neg": -(1 << 63),
           "config": {"name": "gpt", "layers": [4, 8], "dropout": None, "bias": False,
                      "betas": (0.9, 0.95), "inf": float("inf"), "nan": float("nan"),
                      "unicode": "é\u4e2d\U0001f600", "": ""},
           3: ["three", np.arange(5, dtype=np.int32)], -2: np.zeros((2, 0, 3), np.uint8),
           "empty": [(), {}, []]}
    path = tmp_path / "ckpt.pt"
    om.save(obj, path)
    back = om.load(path)
    expected = {**obj, 3: ["three", om.from_numpy(np.arange(5, dtype=np.int32))],
                -2: om.Tensor._wrap(np.zeros((2, 0, 3), np.uint8))}
    assert same(back, expected)
    assert list(back) == list(obj) and 3 in back and "3" not in back
    # each tensor is the loader's own
    back["model"]["w"].numpy()[...] = 0
    assert same(om.load(path)["model"]["w"], w)
    # a plain tensor, an array, a scalar and a list at the top
    for top, want in ((w, w), (np.int64(5), 5), ([w, 2], [w, 2]),
                      (np.ones(3, np.float32), om.tensor(np.ones(3, np.float32)))):
        assert same(loaded(saved(top)), want)


def test_the_tree_is_the_spec_layout():
    a, b = np.arange(3, dtype=np.int64), np.ones((2, 2), np.float32)
    data = saved({"x": [a, (None, True)], 5: {"y": b, "f": 1.5, "s": "t", "i": -3}})
    m = manifest_of(data)
    assert list(m) == ["format", "version", "checksum", "model", "extra", "tree"]
    assert [(e["name"], e["dtype"], e["shape"]) for e in m["model"]] == [
        ("0", "i64", [3]), ("1", "f32", [2, 2])]
    assert m["tree"] == {"d": [
        ["x", {"l": [{"t": 0}, {"u": [{"n": None}, {"b": True}]}]}],
        [5, {"d": [["y", {"t": 1}], ["f", {"f": 0x3FF8000000000000}], ["s", {"s": "t"}],
                   ["i", {"i": -3}]]}]]}


def test_a_flat_state_dict_keeps_the_bytes_and_loads_as_tensors():
    model = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4))
    data = saved(model.state_dict())
    assert data == checkpoint.to_bytes(model)
    assert "tree" not in manifest_of(data)
    back = loaded(data)
    assert same(back, dict(model.state_dict()))
    fresh = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4))
    fresh.load_state_dict(back)
    assert checkpoint.to_bytes(fresh) == data


def test_module_state_dict_is_torchs_detached_tensors_sharing_memory():
    model = nn.Linear(3, 2)
    sd = model.state_dict()
    assert type(sd).__name__ == "OrderedDict" and list(sd) == ["weight", "bias"]
    assert all(type(v) is om.Tensor and not v.requires_grad for v in sd.values())
    sd["weight"].copy_(om.zeros(2, 3))
    assert not model.weight.detach().numpy().any()
    # load_state_dict takes tensors or arrays
    model.load_state_dict({"weight": np.ones((2, 3), np.float32), "bias": om.ones(2)})
    assert model.weight.detach().numpy().sum() == 6


def test_optimizer_state_dict_has_torchs_structure():
    torch = pytest.importorskip("torch")
    model = nn.Linear(3, 2)
    theirs = torch.nn.Linear(3, 2)
    opt = om.optim.Adam(model.parameters(), lr=1e-3)
    ref = torch.optim.Adam(theirs.parameters(), lr=1e-3)
    for o, p in ((opt, model), (ref, theirs)):
        for _ in range(2):
            o.zero_grad()
            p(om.ones(1, 3) if o is opt else torch.ones(1, 3)).sum().backward()
            o.step()
    ours, want = opt.state_dict(), ref.state_dict()
    assert list(ours) == list(want) == ["state", "param_groups"]
    assert list(ours["state"]) == list(want["state"]) == [0, 1]
    for i in (0, 1):
        assert list(ours["state"][i]) == list(want["state"][i])
        assert int(ours["state"][i]["step"].item()) == int(want["state"][i]["step"].item()) == 2
        for key in ("exp_avg", "exp_avg_sq"):
            assert ours["state"][i][key].shape == tuple(want["state"][i][key].shape)
    group, their_group = ours["param_groups"][0], want["param_groups"][0]
    assert group["params"] == their_group["params"] == [0, 1]
    assert set(group) <= set(their_group)
    for key in ("lr", "eps", "weight_decay", "amsgrad"):
        assert group[key] == pytest.approx(their_group[key])
    # the state tensors are the optimizer's own, as torch's
    assert np.shares_memory(ours["state"][0]["exp_avg"].numpy(), opt.state_tensors()["exp_avg.0"])


def test_optimizer_load_state_dict_checks_before_changing():
    model = nn.Linear(3, 2)
    opt = om.optim.Adam(model.parameters(), lr=1e-3)
    sd = loaded(saved(opt.state_dict()))
    sd["state"][1]["step"] = om.tensor(np.array(4, np.int64))
    before = checkpoint.to_bytes(model, opt)
    with pytest.raises(ValueError, match="steps differ"):
        opt.load_state_dict(sd)
    sd["state"][1]["step"] = om.tensor(np.array(0.5, np.float32))
    with pytest.raises(ValueError, match=r"state\[1\]\['step'\] must be a 0-d tensor"):
        opt.load_state_dict(sd)
    sd["state"][1]["step"] = om.tensor(np.array(0.0, np.float32))  # torch's float32 step
    sd["state"][1]["exp_avg"] = om.zeros(3)
    with pytest.raises(ValueError, match="state 'exp_avg.1': expected float32"):
        opt.load_state_dict(sd)
    assert checkpoint.to_bytes(model, opt) == before


def data_at(step: int) -> tuple:
    rng = np.random.default_rng(step)
    return (om.tensor(rng.standard_normal((8, 6)).astype(np.float32)),
            om.tensor(rng.standard_normal((8, 2)).astype(np.float32)))


def make_run(seed: int):
    om.manual_seed(seed)
    model = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 2))
    opt = om.optim.Adam(model.parameters(), lr=3e-3, weight_decay=0.01)
    sched = lr_scheduler.StepLR(opt, step_size=4, gamma=0.5)
    return model, opt, sched


def train(model, opt, sched, steps: range) -> float:
    loss = None
    for step in steps:
        x, y = data_at(step)
        opt.zero_grad()
        loss = om.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        sched.step()
    return float(loss.item())


def test_a_torch_style_checkpoint_dict_resumes_training_bit_for_bit(tmp_path):
    model, opt, sched = make_run(0)
    train(model, opt, sched, range(10))
    want = checkpoint.to_bytes(model, opt)

    model, opt, sched = make_run(0)
    best = train(model, opt, sched, range(6))
    om.save({"model": model.state_dict(), "optimizer": opt.state_dict(),
             "scheduler": sched.state_dict(), "iter_num": 6, "best_val_loss": best,
             "config": {"lr": 3e-3, "layers": [6, 16, 2]}}, tmp_path / "ckpt.pt")
    train(model, opt, sched, range(6, 8))  # the interrupted run went on; the file did not

    model, opt, sched = make_run(1)  # fresh objects, other weights
    ckpt = om.load(tmp_path / "ckpt.pt", map_location="cpu")
    model.load_state_dict(ckpt["model"])
    opt.load_state_dict(ckpt["optimizer"])
    sched.load_state_dict(ckpt["scheduler"])
    assert ckpt["iter_num"] == 6 and ckpt["best_val_loss"] == best
    assert opt.step_count == 6 and np.float32(opt.lr) == np.float32(3e-3 * 0.5)
    train(model, opt, sched, range(ckpt["iter_num"], 10))
    assert checkpoint.to_bytes(model, opt) == want


@pytest.mark.parametrize("make", [
    lambda ps: om.optim.SGD(ps, lr=0.1, momentum=0.9),
    lambda ps: om.optim.AdamW(ps, lr=1e-2, amsgrad=True),
    lambda ps: om.optim.SR4(ps, target_step=1e-2, seed=5),
], ids=["sgd", "adamw-amsgrad", "sr4"])
def test_every_optimizer_state_dict_round_trips_through_a_file(make):
    om.manual_seed(0)
    model = nn.Linear(4, 3, bias=False)
    opt = make(model.parameters())
    for step in range(3):
        opt.zero_grad()
        model(data_at(step)[0][:, :4]).sum().backward()
        opt.step()
    other = nn.Linear(4, 3, bias=False)
    fresh = make(other.parameters())
    other.load_state_dict(loaded(saved(model.state_dict())))
    fresh.load_state_dict(loaded(saved(opt.state_dict())))
    assert checkpoint.to_bytes(other, fresh) == checkpoint.to_bytes(model, opt)


def test_save_refuses_what_load_would_refuse_naming_the_place(tmp_path):
    path = tmp_path / "x.pt"
    deep: Any = om.ones(1)
    for _ in range(32):
        deep = [deep]
    cases = [
        ({"config": {"fn": lambda: 0}}, TypeError, r"obj\['config'\]\['fn'\]: a function"),
        ({"a": [1, object()]}, TypeError, r"obj\['a'\]\[1\]: a builtins.object cannot"),
        ({"a": {1.5: 2}}, TypeError, r"obj\['a'\]: key 1.5 of type float"),
        ({float("nan"): 1}, TypeError, "key nan of type float"),
        ({(1, 2): 1}, TypeError, r"key \(1, 2\) of type tuple"),
        ({True: 1}, TypeError, "key True of type bool"),
        ({"n": 1 << 63}, ValueError, r"obj\['n'\]: 9223372036854775808 does not fit"),
        ({1 << 64: 0}, ValueError, "does not fit in 64 bits"),
        ({"w": np.zeros(2)}, ValueError, r"obj\['w'\]: dtype float64 cannot be saved"),
        ([np.zeros(2, np.float16)], ValueError, r"obj\[0\]: dtype float16"),
        ({"s": "a\ud800"}, ValueError, "lone surrogate"),
        ({"s": "x" * ((1 << 20) + 1)}, ValueError, "more than 1048576"),
        ([deep], ValueError, "nest deeper than 32"),
        (["x" * 900_000] * 5, ValueError, "onemodel.load would refuse the file"),
    ]
    for obj, error, match in cases:
        with pytest.raises(error, match=match):
            om.save(obj, path)
        with pytest.raises(error, match=match):
            om.save(obj, io.BytesIO())
    assert not os.listdir(tmp_path)
    cyclic: list = []
    cyclic.append(cyclic)
    with pytest.raises(ValueError, match="nest deeper"):
        om.save(cyclic, path)
    om.save(deep, path)  # 32 deep is allowed
    assert same(om.load(path), deep)


def test_map_location_accepts_the_cpu_only():
    torch = pytest.importorskip("torch")
    data = saved({"w": om.ones(2)})
    for where in (None, "cpu", "cpu:0", om.device("cpu"), torch.device("cpu"),
                  {"cuda:0": "cpu"}, {"cpu": om.device("cpu")}):
        assert same(loaded(data, map_location=where), {"w": om.ones(2)})
    assert same(loaded(data, map_location=lambda storage, loc: storage), {"w": om.ones(2)})
    for where in ("cuda", "cuda:0", "mps", torch.device("cuda"), {"cpu": "cuda:1"}, 3):
        with pytest.raises(ValueError, match="onemodel runs on the CPU only"):
            loaded(data, map_location=where)
    with pytest.raises(TypeError, match="map_location returned a str"):
        loaded(data, map_location=lambda storage, loc: "gpu")
    with pytest.raises(TypeError, match="weights_only must be a bool"):
        loaded(data, weights_only="yes")
    assert same(loaded(data, weights_only=False), {"w": om.ones(2)})


def test_torch_files_are_refused_naming_the_fix(tmp_path):
    torch = pytest.importorskip("torch")
    zipped, legacy = tmp_path / "zip.pt", tmp_path / "legacy.pt"
    torch.save({"w": torch.ones(2)}, zipped)
    torch.save({"w": torch.ones(2)}, legacy, _use_new_zipfile_serialization=False)
    assert zipfile.is_zipfile(zipped)
    for path, what in ((zipped, "a zip archive"), (legacy, "a pickle")):
        with pytest.raises(checkpoint.TorchFile, match=f"{path}: the file is {what}.*"
                           r"onemodel.interop.load_torch_state_dict") as info:
            om.load(path)
        assert isinstance(info.value, checkpoint.BadHeader)
        with pytest.raises(checkpoint.TorchFile):
            checkpoint.load(path, nn.Linear(1, 1))
    with pytest.raises(checkpoint.TorchFile, match="a pickle"):
        om.load(io.BytesIO(pickle.dumps({"w": 1}, protocol=4)))


def test_a_tree_file_is_not_a_training_state():
    data = saved([om.ones(2)])
    with pytest.raises(checkpoint.Mismatch, match="written by onemodel.save"):
        checkpoint.from_bytes(data, nn.Linear(1, 1))
