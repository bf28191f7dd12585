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
    for dtype, name in ((om.float64, "float64"), (om.half, "float16"), (om.bfloat16, "bfloat16")):
        with pytest.raises(TypeError, match=rf"zeros: unsupported dtype {name}; use float32, "
                                            "int32, int64 or bool.*amp.autocast"):
            om.zeros(2, dtype=dtype)
    with pytest.raises(TypeError, match="tensor: unsupported dtype bfloat16"):
        om.tensor([1.0], dtype=om.bfloat16)


def test_bfloat16_is_a_dtype_object_as_torch_s():
    """numpy has no bfloat16: onemodel's is an object of its own, with torch.dtype's
    attributes, one per process (pickling gives it back), taken by autocast."""
    import copy
    import pickle
    bf16 = om.bfloat16
    assert not isinstance(bf16, str) and bf16 != "bfloat16"
    assert repr(bf16) == "onemodel.bfloat16" and bf16.name == "bfloat16"
    assert (bf16.itemsize, bf16.is_floating_point, bf16.is_complex, bf16.is_signed) == (
        torch.bfloat16.itemsize, True, False, True)
    assert pickle.loads(pickle.dumps(bf16)) is bf16 and copy.deepcopy(bf16) is bf16
    with om.autocast(dtype=om.bfloat16):
        assert om.amp.operand_dtype() == "bf16"
    with pytest.raises(TypeError, match="to: only the CPU and float32"):
        om.ones(2).to(om.bfloat16)


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


def both(x, requires_grad=False):
    """The same float32 values as a onemodel and a torch tensor."""
    x = np.asarray(x, np.float32)
    return (om.tensor(x, requires_grad=requires_grad),
            torch.tensor(x).requires_grad_(requires_grad))


STEPWISE = ("round", "floor", "ceil", "trunc", "sign")


@pytest.mark.parametrize("name", STEPWISE)
def test_stepwise_functions_match_torch_with_zero_gradients(name):
    values = [0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.0, -0.0, 2.49999, -7.2, 1e30, np.inf, -np.inf,
              np.nan, 3.0, -1e-40]
    ours, theirs = both(values, requires_grad=True)
    out, ref = getattr(om, name)(ours), getattr(torch, name)(theirs)
    np.testing.assert_array_equal(out.detach().numpy(), ref.detach().numpy())
    assert np.signbit(out.detach().numpy()).tolist() == np.signbit(ref.detach().numpy()).tolist()
    assert getattr(ours, name)().detach().numpy().tobytes() == out.detach().numpy().tobytes()
    out.sum().backward()
    ref.sum().backward()
    np.testing.assert_array_equal(ours.grad.numpy(), theirs.grad.numpy())  # zeros
    ints = om.tensor([3, -2])
    assert getattr(om, name)(ints).numpy().tolist() == getattr(torch, name)(
        torch.tensor([3, -2])).tolist()


@pytest.mark.parametrize("dim,keepdim", [(None, False), (0, False), (1, True), ((0, 2), False),
                                         (-1, True)])
def test_var_std_norm_match_torch_forward_and_backward(dim, keepdim):
    x = np.random.default_rng(1).standard_normal((4, 5, 6)).astype(np.float32) * 3 + 1
    for name, kwargs in (("var", {}), ("var", {"correction": 0}), ("std", {}),
                         ("std", {"unbiased": False}), ("std", {"correction": 2}),
                         ("norm", {}), ("norm", {"p": 1}), ("norm", {"p": float("inf")})):
        ours, theirs = both(x, requires_grad=True)
        if name == "norm":
            out = ours.norm(dim=dim, keepdim=keepdim, **kwargs)
            ref = theirs.norm(dim=dim, keepdim=keepdim, **kwargs)
        else:
            out = getattr(om, name)(ours, dim, keepdim=keepdim, **kwargs)
            ref = getattr(torch, name)(theirs, dim, keepdim=keepdim, **kwargs)
        assert out.shape == tuple(ref.shape), (name, kwargs)
        np.testing.assert_allclose(out.detach().numpy(), ref.detach().numpy(), rtol=2e-6,
                                   err_msg=f"{name} {kwargs}")
        g = np.random.default_rng(2).standard_normal(ref.shape).astype(np.float32)
        out.backward(om.tensor(g))
        ref.backward(torch.tensor(g))
        np.testing.assert_allclose(ours.grad.numpy(), theirs.grad.numpy(), rtol=1e-4,
                                   atol=1e-6, err_msg=f"{name} {kwargs} gradient")


def test_norm_of_zeros_has_a_zero_gradient_and_bad_p_is_refused():
    ours, theirs = both(np.zeros((2, 3)), requires_grad=True)
    ours.norm(dim=1).sum().backward()
    theirs.norm(dim=1).sum().backward()
    np.testing.assert_array_equal(ours.grad.numpy(), theirs.grad.numpy())
    assert not np.isnan(ours.grad.numpy()).any()
    with pytest.raises(ValueError, match="norm: p must be 'fro', 2, 1 or inf, got 3"):
        om.norm(ours, p=3)


def test_tests_and_truth_match_torch():
    values = [[1.0, np.nan, np.inf], [-np.inf, 0.0, -2.0]]
    ours, theirs = both(values)
    for name in ("isnan", "isinf", "isfinite"):
        assert getattr(om, name)(ours).numpy().tolist() == getattr(torch, name)(theirs).tolist()
        assert getattr(ours, name)().numpy().tolist() == getattr(torch, name)(theirs).tolist()
    for name in ("any", "all"):
        for dim in (None, 0, 1):
            kw = {} if dim is None else {"dim": dim}
            assert getattr(ours, name)(**kw).numpy().tolist() == \
                getattr(theirs, name)(**kw).tolist(), (name, dim)
    a, b = both([[1.0, 2.0], [3.0, 4.0]])
    for other in ([[1.0, 2.0], [3.0, 4.0 + 1e-6]], [[1.0, 2.0], [3.0, 4.1]], [1.0, 2.0]):
        oo, tt = both(other)
        assert om.allclose(a, oo) == torch.allclose(b, tt)
        assert om.equal(a, oo) == torch.equal(b, tt) and a.equal(oo) == b.equal(tt)
    assert om.allclose(ours, ours, equal_nan=True) and not om.allclose(ours, ours)


def test_products_and_selections_match_torch():
    rng = np.random.default_rng(3)
    x, y = rng.standard_normal((2, 3, 4)), rng.standard_normal((2, 4, 5))
    (ox, tx), (oy, ty) = both(x, True), both(y, True)
    out, ref = om.bmm(ox, oy), torch.bmm(tx, ty)
    np.testing.assert_allclose(out.detach().numpy(), ref.detach().numpy(), rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match=r"bmm: expected \(b, n, m\) and \(b, m, p\), got "
                                         r"\(2, 3, 4\) and \(3, 4, 5\)"):
        om.bmm(ox, om.zeros(3, 4, 5))
    (ou, tu), (ov, tv) = both(rng.standard_normal(3), True), both(rng.standard_normal(4), True)
    out, ref = ou.outer(ov), torch.outer(tu, tv)
    assert out.detach().numpy().tobytes() == ref.detach().numpy().tobytes()
    out.sum().backward()
    ref.sum().backward()
    np.testing.assert_allclose(ou.grad.numpy(), tu.grad.numpy(), rtol=1e-6)
    idx = [2, 0, 2]
    out, ref = om.index_select(ox, 2, om.tensor(idx)), torch.index_select(tx, 2, torch.tensor(idx))
    np.testing.assert_array_equal(out.detach().numpy(), ref.detach().numpy())
    out.sum().backward()
    ref.sum().backward()
    np.testing.assert_array_equal(ox.grad.numpy(), tx.grad.numpy())
    with pytest.raises(ValueError, match="index_select: index must be a 1-D integer tensor"):
        ox.index_select(0, om.tensor([[0]]))
    for ours, theirs in ((om.split(ox, 2, 2), torch.split(tx, 2, 2)),
                         (om.chunk(ox, 3, 1), torch.chunk(tx, 3, 1))):
        assert [p.shape for p in ours] == [tuple(p.shape) for p in theirs]
    assert ox.pow(2).detach().numpy().tobytes() == tx.pow(2).detach().numpy().tobytes()
    g = om.tensor([[[1], [0], [2]], [[3], [3], [0]]])
    assert ox.gather(2, g).detach().numpy().tobytes() == \
        tx.gather(2, torch.tensor(g.numpy())).detach().numpy().tobytes()
    assert ox.mul(ox).detach().numpy().tobytes() == (ox * ox).detach().numpy().tobytes()
    assert ox.matmul(oy).detach().numpy().tobytes() == (ox @ oy).detach().numpy().tobytes()


def test_constructors_eye_linspace_and_likes():
    for args in ((3,), (2, 4), (0,)):
        np.testing.assert_array_equal(om.eye(*args).numpy(), torch.eye(*args).numpy())
    assert om.eye(2, dtype=om.long).dtype == np.int64
    assert om.eye(2, requires_grad=True).requires_grad
    for start, end, steps in ((0, 1, 5), (-3.7, 11.3, 1001), (5, -5, 17), (0, 1, 1), (2, 2, 4),
                              (0, 10, 0)):
        ours = om.linspace(start, end, steps).numpy()
        ref = torch.linspace(start, end, steps).numpy()
        assert ours.shape == ref.shape and ours.dtype == np.float32
        np.testing.assert_allclose(ours, ref, rtol=0, atol=np.spacing(np.float32(max(abs(start),
                                                                                   abs(end)))))
        if steps:
            assert ours[0] == np.float32(start) and (steps == 1 or ours[-1] == np.float32(end))
    with pytest.raises(ValueError, match="linspace: steps must be an integer >= 0, got -1"):
        om.linspace(0, 1, -1)
    x = om.zeros(2, 3)
    for like in (om.rand_like(x), om.randn_like(x, requires_grad=True),
                 om.rand_like(om.zeros(2, 3, dtype=om.long), dtype=om.float)):
        assert like.shape == (2, 3) and like.dtype == np.float32
    with pytest.raises(TypeError, match="rand_like: the draws are float32, got dtype int64"):
        om.rand_like(om.zeros(2, dtype=om.long))
    om.manual_seed(4)
    a = om.randn_like(x)
    om.manual_seed(4)
    assert a.numpy().tobytes() == om.randn(2, 3).numpy().tobytes()
    assert om.is_tensor(x) and not om.is_tensor(x.numpy()) and om.numel(x) == 6


def test_device_and_conversion_methods():
    x = om.tensor([[1.5, -2.0]])
    assert x.device == om.device("cpu") and str(x.device) == "cpu" and x.cpu() is x
    assert x.int().dtype == np.int32 and x.int().numpy().tolist() == [[1, -2]]
    assert x.bool().numpy().tolist() == torch.tensor([[1.5, -2.0]]).bool().tolist()
    with pytest.raises(ValueError, match="cuda: onemodel runs on the CPU only"):
        x.cuda()
    with pytest.raises(TypeError, match="double: float64 tensors are not supported"):
        x.double()
    with pytest.raises(TypeError, match=r"half: .*amp.autocast\('fp16'\)"):
        x.half()
    i = om.tensor([1, 2])
    assert i.new_zeros(2, 3).dtype == np.int64 and i.new_zeros((2, 3)).shape == (2, 3)
    assert x.new_ones(4).numpy().tolist() == [1.0] * 4 and x.new_empty(2).shape == (2,)
    assert x.new_full((2,), 7).numpy().tolist() == [7.0, 7.0]
    assert i.new_tensor([3.7]).dtype == np.int64 and x.new_tensor([3]).dtype == np.float32


@pytest.mark.parametrize("equation,shapes", [
    ("ij,jk->ik", [(3, 4), (4, 5)]), ("ij,jk", [(3, 4), (4, 5)]),
    ("bhqd,bhkd->bhqk", [(2, 3, 4, 8), (2, 3, 5, 8)]), ("i,j->ij", [(3,), (4,)]),
    ("ij->ji", [(3, 4)]), ("ij->", [(3, 4)]), ("ij->j", [(3, 4)]), ("i,i->", [(5,), (5,)]),
    ("...ij,...jk->...ik", [(2, 3, 3, 4), (2, 3, 4, 5)]),
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)]),
    ("bn,anm,bm->ba", [(2, 3), (4, 3, 5), (2, 5)]), ("ij,kl->ijkl", [(2, 3), (4, 5)]),
    ("b i d, b j d -> b i j", [(2, 3, 4), (2, 5, 4)])])
def test_einsum_matches_torch_forward_and_backward(equation, shapes):
    rng = np.random.default_rng(len(equation))
    arrays = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    ours = [om.tensor(a, requires_grad=True) for a in arrays]
    theirs = [torch.tensor(a, requires_grad=True) for a in arrays]
    out, ref = om.einsum(equation, *ours), torch.einsum(equation, *theirs)
    assert out.shape == tuple(ref.shape)
    np.testing.assert_allclose(out.detach().numpy(), ref.detach().numpy(), rtol=1e-5, atol=1e-5)
    g = rng.standard_normal(tuple(ref.shape)).astype(np.float32)
    out.backward(om.tensor(g))
    ref.backward(torch.tensor(g))
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-5, atol=1e-5)


def test_einsum_refusals_name_the_problem():
    x = om.zeros(3, 3)
    with pytest.raises(ValueError, match="einsum: subscripts 'ii' for an operand of shape"):
        om.einsum("ii->i", x)
    with pytest.raises(ValueError, match="names 2 operands, got 1"):
        om.einsum("ij,jk->ik", x)
    with pytest.raises(ValueError, match="subscript 'j' has size 3 in one operand and 4"):
        om.einsum("ij,jk->ik", x, om.zeros(4, 2))
    with pytest.raises(ValueError, match="output subscripts 'iz' must be distinct input"):
        om.einsum("ij->iz", x)


def test_reorderings_and_selections_match_torch():
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4) - 7.5
    o, t = om.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    g = np.random.default_rng(0).standard_normal(96).astype(np.float32)
    cases = [
        (lambda x: x.flip(0, 2), lambda x: x.flip(0, 2)),
        (lambda x: om.flip(x, [1]), lambda x: torch.flip(x, [1])),
        (lambda x: om.roll(x, 5), lambda x: torch.roll(x, 5)),
        (lambda x: x.roll((1, -2), (0, 2)), lambda x: x.roll((1, -2), (0, 2))),
        (lambda x: om.movedim(x, (0, 1), (2, 0)), lambda x: torch.movedim(x, (0, 1), (2, 0))),
        (lambda x: x.narrow(2, -3, 2), lambda x: x.narrow(2, -3, 2)),
        (lambda x: x.swapaxes(0, 2), lambda x: x.swapaxes(0, 2)),
        (lambda x: om.hstack([x, x]), lambda x: torch.hstack([x, x])),
        (lambda x: om.vstack([x[0, 0], x[1, 1]]), lambda x: torch.vstack([x[0, 0], x[1, 1]])),
        (lambda x: x.masked_select(om.tensor([True, False, True, True])),
         lambda x: x.masked_select(torch.tensor([True, False, True, True]))),
        (lambda x: om.repeat_interleave(x, om.tensor([1, 0, 2]), 1),
         lambda x: torch.repeat_interleave(x, torch.tensor([1, 0, 2]), 1)),
        (lambda x: x.repeat_interleave(2), lambda x: x.repeat_interleave(2)),
        (lambda x: x[0].expand_as(x), lambda x: x[0].expand_as(x)),
        (lambda x: om.amax(x, (0, 2)), lambda x: torch.amax(x, (0, 2))),
        (lambda x: x.amin(1, keepdim=True), lambda x: x.amin(1, keepdim=True)),
        (lambda x: om.logsumexp(x, 1), lambda x: torch.logsumexp(x, 1)),
        (lambda x: x.logsumexp((0, 2), keepdim=True),
         lambda x: x.logsumexp((0, 2), keepdim=True)),
        (lambda x: om.square(x), lambda x: torch.square(x)),
        (lambda x: x.abs().rsqrt(), lambda x: x.abs().rsqrt()),
        (lambda x: x.reciprocal(), lambda x: x.reciprocal()),
    ]
    for k, (ours, theirs) in enumerate(cases):
        o.grad, t.grad = None, None
        out, ref = ours(o), theirs(t)
        assert out.shape == tuple(ref.shape), k
        np.testing.assert_allclose(out.detach().numpy(), ref.detach().numpy(), rtol=1e-6,
                                   err_msg=str(k))
        grad = g[:ref.numel()].reshape(ref.shape)
        out.backward(om.tensor(grad))
        ref.backward(torch.tensor(grad))
        np.testing.assert_allclose(o.grad.numpy(), t.grad.numpy(), rtol=1e-5, err_msg=str(k))
    i = np.array([[0, 1.5, 0], [2, 0, -1]], np.float32)
    assert om.nonzero(om.tensor(i)).numpy().tolist() == torch.nonzero(torch.tensor(i)).tolist()
    assert [p.numpy().tolist() for p in om.tensor(i).nonzero(as_tuple=True)] == \
        [p.tolist() for p in torch.tensor(i).nonzero(as_tuple=True)]
    assert om.nonzero(om.tensor(3.0)).shape == tuple(torch.nonzero(torch.tensor(3.0)).shape)
    assert om.argsort(om.tensor(i), 1).numpy().tolist() == \
        torch.argsort(torch.tensor(i), dim=1, stable=True).tolist()
    for indexing in ("ij", "xy"):
        for p, q in zip(om.meshgrid(om.arange(3.0), om.arange(4.0), indexing=indexing),
                        torch.meshgrid(torch.arange(3.0), torch.arange(4.0), indexing=indexing)):
            np.testing.assert_array_equal(p.numpy(), q.numpy())
    with pytest.raises(ValueError, match="narrow: start 3 and length 2 leave dim 0 of size 2"):
        o.narrow(0, 3, 2)
    with pytest.raises(ValueError, match="repeat_interleave: repeats must be integers >= 0"):
        o.repeat_interleave(om.tensor([1, 2]), 1)
    with pytest.raises(ValueError, match="amax: dims 1 of shape .* hold no elements"):
        om.amax(om.zeros(2, 0), 1)


def test_device_selection_and_backend_flags_of_reproducible_scripts():
    """The lines that choose a device or ask for reproducibility run unchanged and choose the
    CPU; cudnn's flags can be set and read back."""
    device = (om.accelerator.current_accelerator().type if om.accelerator.is_available()
              else "mps" if om.backends.mps.is_available() else "cpu")
    assert device == "cpu" and om.zeros(2, device=device).device == om.device("cpu")
    om.backends.cudnn.benchmark = True
    om.backends.cudnn.deterministic = True
    assert om.backends.cudnn.benchmark and not om.backends.cudnn.is_available()
    om.use_deterministic_algorithms(True)
    assert om.are_deterministic_algorithms_enabled()
    with pytest.raises(TypeError, match="mode must be a bool, got 'yes'"):
        om.use_deterministic_algorithms("yes")


@pytest.mark.parametrize("dim,keepdim", [(None, False), (None, True), (0, False), (1, True),
                                         (-1, False)])
def test_prod_matches_torch_with_zero_factors(dim, keepdim):
    """Sequential products; a zero factor's gradient is the product of the others, as torch's
    (not prod / x)."""
    rng = np.random.default_rng(5)
    a = rng.standard_normal((3, 4, 5)).astype(np.float32)
    a[0, 1, 2] = a[1, :, 3] = a[2, 2, 1] = a[2, 2, 4] = 0.0
    ours, theirs = om.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    out = ours.prod(dim, keepdim) if dim is not None else om.prod(ours, keepdim=keepdim)
    ref = theirs.prod(dim, keepdim) if dim is not None else theirs.prod()
    if dim is None and keepdim:
        ref = ref.reshape(1, 1, 1)
    assert out.shape == tuple(ref.shape)
    np.testing.assert_allclose(out.detach().numpy(), ref.detach().numpy(), rtol=1e-6)
    g = rng.standard_normal(tuple(ref.shape)).astype(np.float32)
    out.backward(om.tensor(g))
    ref.backward(torch.tensor(g))
    np.testing.assert_allclose(ours.grad.numpy(), theirs.grad.numpy(), rtol=1e-5, atol=1e-7)
    ints = np.array([[2, 3, 4], [5, 0, 7]])
    assert om.prod(om.tensor(ints), 1).numpy().tolist() == torch.prod(torch.tensor(ints),
                                                                       1).tolist()
    assert om.prod(om.zeros(2, 0), 1).numpy().tolist() == [1.0, 1.0]
