"""Conv1d, GroupNorm, RMSNorm, channel dropout and nearest interpolation against PyTorch
(forward and backward), finite differences, exact-mode bits, and their errors."""
import numpy as np
import pytest

import onemodel as om
from onemodel import functional as F
from onemodel import interop, nn
from onemodel.functional.dropout import dropout_mask

torch = pytest.importorskip("torch")
TF = torch.nn.functional


def _x(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


# -- conv1d ---------------------------------------------------------------------------------
CONV1D = [
    dict(),
    dict(stride=2, padding=1),
    dict(dilation=2, padding=3),
    dict(groups=2, padding="same"),
    dict(padding="valid", stride=3),
]


@pytest.mark.parametrize("kwargs", CONV1D)
@pytest.mark.parametrize("batched", [True, False])
def test_conv1d_matches_torch(kwargs, batched, rng, check_torch):
    x = _x(rng, 2, 4, 11) if batched else _x(rng, 4, 11)
    w = _x(rng, 6, 4 // kwargs.get("groups", 1), 3)
    b = _x(rng, 6)
    check_torch(lambda *a: F.conv1d(*a, **kwargs), lambda *a: TF.conv1d(*a, **kwargs), x, w, b)
    check_torch(lambda *a: F.conv1d(*a, **kwargs), lambda *a: TF.conv1d(*a, **kwargs), x, w)


def test_conv1d_gradient_and_exact_bits(rng, check_grad, check_exact):
    x, w, b = _x(rng, 2, 2, 6), _x(rng, 3, 2, 3), _x(rng, 3)
    check_grad(lambda *a: F.conv1d(*a, padding=1), x, w, b)
    check_exact(lambda *a: F.conv1d(*a, stride=2, dilation=2, padding=2), _x(rng, 3, 8, 40),
                _x(rng, 16, 8, 5), _x(rng, 16))


def test_conv1d_module_matches_torch(rng, assert_close):
    m = nn.Conv1d(4, 6, 3, stride=2, padding=1, groups=2, seed=5)
    assert m.weight.shape == (6, 2, 3) and m.kernel_size == (3,)
    assert abs(m.weight.detach().numpy()).max() <= 1 / np.sqrt(2 * 3)  # fan-in bound
    t = torch.nn.Conv1d(4, 6, 3, stride=2, padding=1, groups=2)
    t.load_state_dict(interop.to_torch_state_dict(m))
    x = _x(rng, 2, 4, 9)
    assert_close(m(om.tensor(x)).detach().numpy(), t(torch.from_numpy(x)).detach().numpy(), 1e-5)
    assert nn.Conv1d(2, 2, 3, bias=False).bias is None


@pytest.mark.parametrize("call, error, message", [
    (lambda x, w: F.conv1d(x[0, 0], w), ValueError, r"input must be \(N, C, L\)"),
    (lambda x, w: F.conv1d(x, w[..., None]), ValueError, "weight must be"),
    (lambda x, w: F.conv1d(x, w[:, :2]), ValueError, "input channels must be 2"),
    (lambda x, w: F.conv1d(x, w, stride=(1, 1)), TypeError, "stride must be an int"),
    (lambda x, w: F.conv1d(x[..., :2], w), ValueError, "larger than the padded input"),
    (lambda x, w: F.conv1d(x, w, padding="same", stride=2), ValueError, "same' needs stride 1"),
    (lambda x, w: F.conv1d(x, w, groups=0), ValueError, "groups must be"),
])
def test_conv1d_bad_input(call, error, message, rng):
    x, w = om.tensor(_x(rng, 2, 4, 8)), om.tensor(_x(rng, 6, 4, 3))
    with pytest.raises(error, match="conv1d: .*" + message):
        call(x, w)
    with pytest.raises(ValueError, match="Conv1d: padding_mode must be one of"):
        nn.Conv1d(2, 2, 3, padding_mode="mirror")


# -- group norm and RMS norm ---------------------------------------------------------------
@pytest.mark.parametrize("shape, groups", [((3, 12), 3), ((2, 6, 5), 2), ((2, 4, 3, 3), 4),
                                           ((2, 4, 3, 3), 1)])
def test_group_norm_matches_torch(shape, groups, rng, check_torch):
    x = _x(rng, *shape) * 3 + 1
    w, b = _x(rng, shape[1]), _x(rng, shape[1])
    check_torch(lambda *a: F.group_norm(a[0], groups, *a[1:], eps=1e-3),
                lambda *a: TF.group_norm(a[0], groups, *a[1:], eps=1e-3), x, w, b, tol=1e-4)
    check_torch(lambda a: F.group_norm(a, groups), lambda a: TF.group_norm(a, groups), x,
                tol=1e-4)


@pytest.mark.parametrize("shape, groups", [((0, 2), 1), ((0, 4, 3), 2)])
def test_group_norm_empty_batch_matches_torch(shape, groups, rng, check_torch):
    # N = 0 (an OpInfo sample): the group rows are sized explicitly, not by -1.
    x, w, b = _x(rng, *shape), _x(rng, shape[1]), _x(rng, shape[1])
    check_torch(lambda *a: F.group_norm(a[0], groups, *a[1:]),
                lambda *a: TF.group_norm(a[0], groups, *a[1:]), x, w, b)


def test_group_norm_module_gradient_and_bits(rng, check_grad, check_exact, assert_close):
    m = nn.GroupNorm(2, 4)
    assert [n for n, _ in m.named_parameters()] == ["weight", "bias"]
    t = torch.nn.GroupNorm(2, 4)
    x = _x(rng, 2, 4, 5)
    assert_close(m(om.tensor(x)).detach().numpy(), t(torch.from_numpy(x)).detach().numpy(), 1e-5)
    assert nn.GroupNorm(2, 4, affine=False).weight is None
    m, t = nn.GroupNorm(2, 4, bias=False), torch.nn.GroupNorm(2, 4, bias=False)
    assert list(m.state_dict()) == list(t.state_dict()) == ["weight"] and m.bias is None
    assert_close(m(om.tensor(x)).detach().numpy(), t(torch.from_numpy(x)).detach().numpy(), 1e-5)
    check_grad(lambda a, w, b: F.group_norm(a, 2, w, b), _x(rng, 2, 4, 3), _x(rng, 4),
               _x(rng, 4))
    check_exact(lambda a, w, b: F.group_norm(a, 4, w, b), _x(rng, 3, 8, 33), _x(rng, 8),
                _x(rng, 8))


@pytest.mark.parametrize("shape, norm", [((3, 8), (8,)), ((2, 3, 4), (3, 4)), ((5,), [5])])
@pytest.mark.parametrize("eps", [None, 1e-2])
def test_rms_norm_matches_torch(shape, norm, eps, rng, check_torch):
    x = _x(rng, *shape)
    w = _x(rng, *((norm,) if isinstance(norm, int) else norm))
    check_torch(lambda a, b: F.rms_norm(a, norm, b, eps), lambda a, b: TF.rms_norm(a, norm, b, eps),
                x, w)
    check_torch(lambda a: F.rms_norm(a, norm, eps=eps), lambda a: TF.rms_norm(a, norm, eps=eps), x)


def test_rms_norm_module_gradient_and_bits(rng, check_grad, check_exact, assert_close):
    m = nn.RMSNorm((3, 4), eps=1e-4)
    t = torch.nn.RMSNorm((3, 4), eps=1e-4)
    x = _x(rng, 2, 3, 4)
    assert_close(m(om.tensor(x)).detach().numpy(), t(torch.from_numpy(x)).detach().numpy(), 1e-6)
    assert nn.RMSNorm(4, elementwise_affine=False).weight is None
    check_grad(lambda a, w: F.rms_norm(a, (4,), w), _x(rng, 3, 4), _x(rng, 4))
    check_exact(lambda a, w: F.rms_norm(a, (37,), w), _x(rng, 5, 37), _x(rng, 37))


@pytest.mark.parametrize("call, message", [
    (lambda x: F.group_norm(x, 3), "group_norm: num_groups 3 must be a positive divisor"),
    (lambda x: F.group_norm(x[0, 0], 1), r"group_norm: input must be \(N, C, \*\)"),
    (lambda x: F.group_norm(x, 2, om.ones(3)), r"group_norm: weight of shape \(3,\)"),
    (lambda x: F.rms_norm(x, (4,)), r"rms_norm: normalized_shape \(4,\) does not match"),
    (lambda x: F.rms_norm(x, 5, om.ones(4)), r"rms_norm: weight of shape \(4,\)"),
])
def test_norm_bad_input(call, message, rng):
    with pytest.raises(ValueError, match=message):
        call(om.tensor(_x(rng, 2, 4, 5)))
    with pytest.raises(ValueError, match="GroupNorm: num_channels 5 must be divisible"):
        nn.GroupNorm(2, 5)


# -- channel dropout -----------------------------------------------------------------------
@pytest.mark.parametrize("cls, shape, drawn", [
    (nn.Dropout1d, (2, 3, 5), (2, 3)), (nn.Dropout1d, (8, 5), (8,)),
    (nn.Dropout2d, (2, 3, 4, 5), (2, 3))])
def test_channel_dropout_stream(cls, shape, drawn, rng, assert_close):
    """The mask of (seed, draw) over the channels alone, broadcast over each channel."""
    p = 0.5
    m = cls(p, seed=7)
    x = om.tensor(_x(rng, *shape), requires_grad=True)
    keep_shape = drawn + (1,) * (len(shape) - len(drawn))
    for draw in range(2):
        out = m(x)
        keep = dropout_mask(drawn, p, 7, draw).reshape(keep_shape)
        assert_close(out.detach().numpy(), x.detach().numpy() * keep, 0.0)
        zeroed = np.all(out.detach().numpy().reshape(drawn + (-1,)) == 0, -1)
        assert zeroed.any() and not zeroed.all()  # whole channels dropped, not all of them
    out.backward(np.ones(shape, np.float32))
    assert_close(x.grad.numpy(), np.broadcast_to(keep, shape), 0.0)
    assert int(m.draws.numpy()) == 2
    m.eval()
    assert m(x) is x


def test_channel_dropout_errors_and_warning(rng):
    with pytest.raises(ValueError, match=r"dropout1d: input must be \(N, C, L\) or \(C, L\)"):
        F.dropout1d(om.tensor(_x(rng, 2, 3, 4, 5)), seed=1)
    with pytest.raises(ValueError, match=r"dropout2d: input must be \(N, C, H, W\)"):
        F.dropout2d(om.tensor(_x(rng, 2, 3)), seed=1)
    with pytest.raises(ValueError, match=r"Dropout2d: probability p must be in \[0, 1\]"):
        nn.Dropout2d(1.5)
    with pytest.warns(UserWarning, match="interpreted as shape \\(N, C, L\\)"):
        out = F.dropout2d(om.tensor(np.ones((4, 8, 3), np.float32)), 0.5, seed=3)
    np.testing.assert_array_equal(out.numpy(), np.ones((4, 8, 3), np.float32)
                                  * dropout_mask((4, 8), 0.5, 3, 0)[..., None])


# -- interpolate and Upsample ---------------------------------------------------------------
INTERP = [
    ((2, 3, 7), dict(scale_factor=2)),
    ((2, 3, 7), dict(size=12)),
    ((2, 3, 7), dict(size=4)),
    ((1, 2, 5, 6), dict(scale_factor=1.7)),
    ((1, 2, 5, 6), dict(scale_factor=(2, 0.5))),
    ((1, 2, 5, 6), dict(size=(9, 13))),
    ((1, 2, 5, 6), dict(scale_factor=1.7, recompute_scale_factor=True)),
    ((1, 2, 3, 4, 5), dict(scale_factor=(1.5, 2, 0.8))),
]


@pytest.mark.parametrize("mode", ["nearest", "nearest-exact"])
@pytest.mark.parametrize("shape, kwargs", INTERP)
def test_interpolate_matches_torch(shape, kwargs, mode, rng, check_torch):
    check_torch(lambda a: F.interpolate(a, mode=mode, **kwargs),
                lambda a: TF.interpolate(a, mode=mode, **kwargs), _x(rng, *shape), tol=0.0,
                grad_tol=1e-6)


def test_upsample_module_gradient_and_bits(rng, check_grad, check_exact, assert_close):
    x = _x(rng, 2, 3, 4, 5)
    m, t = nn.Upsample(scale_factor=3), torch.nn.Upsample(scale_factor=3)
    assert_close(m(om.tensor(x)).numpy(), t(torch.from_numpy(x)).numpy(), 0.0)
    check_grad(lambda a: F.interpolate(a, size=(5, 7)), _x(rng, 1, 2, 3, 4))
    check_exact(lambda a: F.interpolate(a, scale_factor=2.5), x)
    same = om.tensor(x)
    assert F.interpolate(same, scale_factor=1) is not same


@pytest.mark.parametrize("kwargs, error, message", [
    (dict(scale_factor=2, mode="cubic"), ValueError, "mode must be one of"),
    (dict(scale_factor=2, align_corners=True), ValueError, "align_corners"),
    (dict(), ValueError, "exactly one of size and scale_factor"),
    (dict(size=3, scale_factor=2), ValueError, "exactly one of size and scale_factor"),
    (dict(size=(3, 4, 5)), TypeError, "size must be one number or 2"),
    (dict(scale_factor=0.1), ValueError, r"output size \(0, 0\) must be positive"),
])
def test_interpolate_bad_input(kwargs, error, message, rng):
    with pytest.raises(error, match="interpolate: " + message):
        F.interpolate(om.tensor(_x(rng, 1, 2, 3, 4)), **kwargs)
    with pytest.raises(ValueError, match=r"interpolate: input must be \(N, C, L\)"):
        F.interpolate(om.tensor(_x(rng, 3, 4)), scale_factor=2)
    with pytest.raises(ValueError, match="Upsample: mode must be one of"):
        nn.Upsample(scale_factor=2, mode="cubic")
