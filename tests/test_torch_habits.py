"""What PyTorch scripts type in their first lines, with torch renamed onemodel: dtype names,
device= on the constructors, torch.autocast's keywords, f-strings of a loss, x.t(),
.contiguous(). Each against torch where torch has it, and the refusals by name."""
from __future__ import annotations

import numpy as np
import pytest

import onemodel as om
from onemodel import amp, nn

torch = pytest.importorskip("torch")


def test_dtype_names_are_torch_s():
    for name in ("float32", "float", "float64", "double", "float16", "half", "int32", "int",
                 "int64", "long", "bool"):
        assert str(getattr(om, name)) == str(getattr(torch, name)).removeprefix("torch."), name
    assert om.tensor([1, 2], dtype=om.long).dtype == np.int64
    assert om.zeros(2, dtype=om.float).dtype == np.float32
    assert om.ones(2, dtype=om.int).dtype == np.int32
    assert om.tensor([0, 3], dtype=om.bool).numpy().tolist() == [False, True]
    for dtype in (om.float64, om.half, om.bfloat16):
        with pytest.raises(TypeError, match=rf"zeros: unsupported dtype {dtype}; use float32, "
                                            "int32, int64 or bool.*amp.autocast"):
            om.zeros(2, dtype=dtype)
    with pytest.raises(TypeError, match="tensor: unsupported dtype bfloat16"):
        om.tensor([1.0], dtype=om.bfloat16)


def test_constructors_take_the_cpu_as_device():
    cpu = om.device("cpu")
    made = [om.tensor([1.0], device="cpu"), om.zeros(2, device=cpu), om.ones(2, device="cpu:0"),
            om.full((2,), 3.0, device="cpu"), om.empty(2, device="cpu"),
            om.zeros_like(om.ones(2), device="cpu"), om.ones_like(om.ones(2), device=cpu),
            om.full_like(om.ones(2), 2.0, device="cpu"), om.empty_like(om.ones(2), device=cpu),
            om.arange(3, device="cpu"), om.rand(2, device="cpu"), om.randn(2, device=cpu),
            om.randint(5, (2,), device="cpu"), om.randperm(3, device="cpu")]
    assert all(isinstance(t, om.Tensor) for t in made)
    x = om.randn(3, 2, requires_grad=True, device="cpu")
    assert x.requires_grad and om.rand(2, requires_grad=True).requires_grad
    for call, op in ((lambda: om.zeros(2, device="cuda"), "zeros"),
                     (lambda: om.tensor([1], device="cuda:0"), "tensor"),
                     (lambda: om.arange(3, device="mps"), "arange"),
                     (lambda: om.randn(2, device="cuda"), "randn")):
        with pytest.raises(ValueError, match=f"{op}: onemodel runs on the CPU only, got device"):
            call()


def test_torch_autocast_spelling_gives_the_same_bits():
    lin = nn.Linear(16, 8, seed=0)
    x = om.randn(4, 16, generator=om.Generator(1))
    with amp.autocast("bf16"):
        ref_bf16 = lin(x).detach().numpy()
    with amp.autocast("fp16"):
        ref_fp16 = lin(x).detach().numpy()
    with om.autocast(device_type="cpu", dtype=om.bfloat16):
        assert lin(x).detach().numpy().tobytes() == ref_bf16.tobytes()
    with om.autocast(dtype=om.float16, device_type="cpu"):
        assert lin(x).detach().numpy().tobytes() == ref_fp16.tobytes()
    with om.autocast(device_type="cpu"):  # torch's CPU default is bfloat16 too
        assert lin(x).detach().numpy().tobytes() == ref_bf16.tobytes()
    assert lin(x).detach().numpy().tobytes() != ref_bf16.tobytes()
    with pytest.raises(ValueError, match="'cpu' is a device, and the first argument is the dtype"):
        with om.autocast("cpu"):
            pass
    with pytest.raises(ValueError, match="CPU only, got device_type 'cuda'"):
        with om.autocast(device_type="cuda", dtype=om.bfloat16):
            pass


def test_a_zero_d_tensor_formats_as_its_value():
    for value in (2.718281828, -0.5, 1e-9):
        assert f"{om.tensor(value):.4f}" == f"{torch.tensor(value):.4f}"
        assert f"{om.tensor(value):>12.3e}" == f"{torch.tensor(value):>12.3e}"
    assert f"{om.tensor(7)}" == f"{torch.tensor(7)}" == "7" and f"{om.tensor(7):3d}" == "  7"
    assert f"{om.tensor([1.0, 2.0])}" == str(om.tensor([1.0, 2.0]))
    with pytest.raises(TypeError, match="unsupported format string"):
        f"{om.tensor([1.0, 2.0]):.2f}"
    with pytest.raises(TypeError, match="unsupported format string"):
        f"{torch.tensor([1.0, 2.0]):.2f}"


def test_t_contiguous_and_is_contiguous_as_torch():
    rng = np.random.default_rng(0)
    for shape in ((), (3,), (2, 3)):
        a = rng.standard_normal(shape).astype(np.float32)
        np.testing.assert_array_equal(om.tensor(a).t().numpy(), torch.tensor(a).t().numpy())
    x = om.tensor(rng.standard_normal((2, 3)).astype(np.float32), requires_grad=True)
    (x.t() * om.arange(2.0)).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.broadcast_to(np.float32([[0], [1]]), (2, 3)))
    with pytest.raises(ValueError, match=r"t: expects a tensor of at most 2 dimensions, got "
                                         r"shape \(2, 3, 4\)"):
        om.zeros(2, 3, 4).t()
    y = om.zeros(3, 2).t()
    assert y.contiguous() is y and y.is_contiguous() and y.numpy().flags.c_contiguous
