"""conv2d and nn.Conv2d: PyTorch over a table of stride/padding/dilation/groups, central
differences on a float64 reference, exact-mode bits on every ISA path and thread count."""
import numpy as np
import pytest

import onemodel
from onemodel.functional.conv import conv1d, conv2d
from onemodel.nn.conv import Conv2d
from onemodel.random import Generator
from onemodel.tensor import tensor

torch = pytest.importorskip("torch")
TF = torch.nn.functional


def conv64(x, w, b=None, stride=1, padding=0, dilation=1, groups=1):
    """Direct float64 convolution: one einsum per kernel tap and group."""
    s, p, d = (np.broadcast_to(v, 2) for v in (stride, padding, dilation))
    x = np.pad(np.asarray(x, np.float64), ((0, 0), (0, 0), (p[0], p[0]), (p[1], p[1])))
    w = np.asarray(w, np.float64)
    k, cg, kh, kw = w.shape
    kg = k // groups
    oh = (x.shape[2] - d[0] * (kh - 1) - 1) // s[0] + 1
    ow = (x.shape[3] - d[1] * (kw - 1) - 1) // s[1] + 1
    out = np.zeros((x.shape[0], k, oh, ow))
    for g in range(groups):
        for i in range(kh):
            for j in range(kw):
                patch = x[:, g * cg:(g + 1) * cg, i * d[0]:i * d[0] + s[0] * (oh - 1) + 1:s[0],
                          j * d[1]:j * d[1] + s[1] * (ow - 1) + 1:s[1]]
                out[:, g * kg:(g + 1) * kg] += np.einsum("nchw,kc->nkhw", patch,
                                                          w[g * kg:(g + 1) * kg, :, i, j])
    return out if b is None else out + np.asarray(b, np.float64)[:, None, None]


# (N, C, H, W), (K, kh, kw), stride, padding, dilation, groups
CASES = [
    ((2, 3, 7, 6), (4, 3, 3), 1, 1, 1, 1),
    ((2, 4, 9, 8), (6, 3, 2), 2, 1, 2, 2),
    ((3, 6, 5, 5), (6, 1, 1), 1, 0, 1, 3),
    ((1, 1, 3, 3), (1, 3, 3), 1, 0, 1, 1),
    ((2, 2, 1, 1), (3, 3, 3), 1, 1, 1, 1),
    ((2, 4, 10, 11), (8, 5, 3), (2, 3), (2, 0), (1, 2), 4),
    ((1, 17, 6, 6), (15, 3, 3), 1, 1, 1, 1),
    ((4, 32, 8, 8), (16, 3, 3), 1, 1, 1, 1),   # K = 288: more than one depth block of gemm
    ((2, 8, 12, 12), (8, 3, 3), 3, 2, 1, 8),   # depthwise
    ((12, 32, 14, 14), (8, 3, 3), 1, 1, 1, 2),  # the batch in 6 chunks of 2 images
]


@pytest.mark.parametrize("xs, ws, stride, padding, dilation, groups", CASES)
def test_matches_torch(check_torch, rng, xs, ws, stride, padding, dilation, groups):
    x = rng.standard_normal(xs, dtype=np.float32)
    w = rng.standard_normal((ws[0], xs[1] // groups) + ws[1:], dtype=np.float32)
    b = rng.standard_normal(ws[0], dtype=np.float32)
    args = (stride, padding, dilation, groups)
    # Scaled error; weight and bias gradients are reductions over the whole batch.
    check_torch(lambda x, w, b: conv2d(x, w, b, *args), lambda x, w, b: TF.conv2d(x, w, b, *args),
                x, w, b, tol=1e-5, grad_tol=1e-4)
    check_torch(lambda x, w: conv2d(x, w, None, *args), lambda x, w: TF.conv2d(x, w, None, *args),
                x, w, tol=1e-5, grad_tol=1e-4)


def test_unbatched_and_string_padding(check_torch, rng):
    x = rng.standard_normal((3, 7, 7), dtype=np.float32)
    w = rng.standard_normal((5, 3, 3, 3), dtype=np.float32)
    for padding in ("same", "valid", 2):
        check_torch(lambda x, w: conv2d(x, w, padding=padding, dilation=2),
                    lambda x, w: TF.conv2d(x, w, padding=padding, dilation=2), x, w,
                    grad_tol=1e-4)


@pytest.mark.parametrize("shape, weight, dilation", [
    ((1, 4, 5, 5), (1, 4, 2, 3), 3),   # spans 3 and 6: one odd (an OpInfo sample)
    ((4, 5, 5), (1, 4, 2, 3), 3),
    ((2, 3, 6, 7), (5, 3, 4, 2), 1),   # both odd
])
def test_same_padding_of_an_odd_span_puts_the_extra_on_the_right(check_torch, check_exact, rng,
                                                                  shape, weight, dilation):
    x, w = rng.standard_normal(shape, np.float32), rng.standard_normal(weight, np.float32)
    b = rng.standard_normal(weight[:1], np.float32)
    check_torch(lambda *a: conv2d(*a, padding="same", dilation=dilation),
                lambda *a: TF.conv2d(*a, padding="same", dilation=dilation), x, w, b,
                grad_tol=1e-4)
    check_exact(lambda *a: conv2d(*a, padding="same", dilation=dilation), x, w, b)
    check_torch(lambda *a: conv1d(*a, padding="same"), lambda *a: TF.conv1d(*a, padding="same"),
                x[..., 0, :], w[..., 0, :], b)


def test_long_batch_reduction(check_torch, rng):
    # The weight gradient is one fused multiply-add chain over 64 * 28 * 28 positions.
    x = rng.standard_normal((64, 1, 28, 28), dtype=np.float32)
    w = rng.standard_normal((8, 1, 3, 3), dtype=np.float32)
    b = rng.standard_normal(8, dtype=np.float32)
    check_torch(lambda x, w, b: conv2d(x, w, b, padding=1),
                lambda x, w, b: TF.conv2d(x, w, b, padding=1), x, w, b, grad_tol=1e-4)


@pytest.mark.parametrize("xs, ws, stride, padding, dilation, groups", CASES[:3])
def test_central_differences(check_grad, rng, xs, ws, stride, padding, dilation, groups):
    x = rng.standard_normal(xs, dtype=np.float32)
    w = rng.standard_normal((ws[0], xs[1] // groups) + ws[1:], dtype=np.float32)
    b = rng.standard_normal(ws[0], dtype=np.float32)
    args = (stride, padding, dilation, groups)
    check_grad(lambda x, w, b: conv2d(x, w, b, *args), x, w, b,
               ref64=lambda x, w, b: conv64(x, w, b, *args))


@pytest.mark.parametrize("xs, ws, stride, padding, dilation, groups",
                         [CASES[1], CASES[5], CASES[7], CASES[9],
                          ((0, 3, 5, 5), (2, 3, 3), 1, 1, 1, 1),
                          # one image: threads split its products; more than one block of
                          # depth (288 > 256) and of columns (1089 > 1024) in each product
                          ((1, 32, 33, 33), (16, 3, 3), 1, 1, 1, 1),
                          ((1, 32, 33, 33), (16, 3, 3), 2, 1, 1, 1)])
def test_exact_bits_every_path_and_thread_count(check_exact, rng, xs, ws, stride, padding,
                                                 dilation, groups):
    x = rng.standard_normal(xs, dtype=np.float32)
    w = rng.standard_normal((ws[0], xs[1] // groups) + ws[1:], dtype=np.float32)
    b = rng.standard_normal(ws[0], dtype=np.float32)
    check_exact(lambda x, w, b: conv2d(x, w, b, stride, padding, dilation, groups), x, w, b)


def test_empty_batch_gives_zero_gradients():
    x = tensor(np.zeros((0, 3, 5, 5), np.float32), requires_grad=True)
    w = tensor(np.ones((2, 3, 3, 3), np.float32), requires_grad=True)
    b = tensor(np.ones(2, np.float32), requires_grad=True)
    y = conv2d(x, w, b, padding=1)
    assert y.shape == (0, 2, 5, 5)
    y.backward(np.zeros(y.shape, np.float32))
    assert x.grad.shape == (0, 3, 5, 5)
    assert not w.grad.numpy().any() and not b.grad.numpy().any()


def test_special_values_propagate_as_in_torch(assert_close, rng):
    x = rng.standard_normal((2, 2, 6, 6), dtype=np.float32)
    x.reshape(-1)[::7] = np.array([np.inf, -np.inf, np.nan, 0.0, -0.0, 1e-45, -1e-40, 1e-38],
                                  np.float32)[np.arange(x.size)[::7] % 8]
    w = rng.standard_normal((3, 2, 3, 3), dtype=np.float32)
    y = conv2d(tensor(x), tensor(w), padding=1).numpy()
    assert_close(y, TF.conv2d(torch.from_numpy(x), torch.from_numpy(w), padding=1).numpy())


@pytest.mark.parametrize("x_shape, w_shape, kwargs, error, words", [
    ((2, 3, 5, 5), (4, 2, 3, 3), {}, ValueError, "channels"),
    ((2, 4, 5, 5), (3, 2, 3, 3), {"groups": 2}, ValueError, "divisible"),
    ((2, 3, 2, 2), (4, 3, 3, 3), {}, ValueError, "larger than the padded input"),
    ((2, 3, 5, 5), (4, 3, 3), {}, ValueError, "weight"),
    ((3, 5, 5, 1, 1), (4, 3, 3, 3), {}, ValueError, "input"),
    ((2, 3, 5, 5), (4, 3, 3, 3), {"stride": 0}, ValueError, "stride"),
    ((2, 3, 5, 5), (4, 3, 3, 3), {"padding": -1}, ValueError, "padding"),
    ((2, 3, 5, 5), (4, 3, 3, 3), {"groups": 0}, ValueError, "groups"),
    ((2, 3, 5, 5), (4, 3, 3, 3), {"padding": "same", "stride": 2}, ValueError, "same"),
])
def test_bad_arguments_raise_before_any_kernel(x_shape, w_shape, kwargs, error, words):
    with pytest.raises(error, match="conv2d") as info:
        conv2d(tensor(np.zeros(x_shape, np.float32)), tensor(np.zeros(w_shape, np.float32)),
               **kwargs)
    assert words in str(info.value)


def test_bad_dtypes_and_bias():
    x = tensor(np.zeros((1, 3, 5, 5), np.float32))
    w = tensor(np.zeros((4, 3, 3, 3), np.float32))
    with pytest.raises(TypeError, match="conv2d"):
        conv2d(tensor(np.zeros((1, 3, 5, 5), np.int64)), w)
    with pytest.raises(TypeError, match="conv2d"):
        conv2d(x, tensor(np.zeros((4, 3, 3, 3), np.int32)))
    with pytest.raises(ValueError, match=r"conv2d: bias of shape \(3,\)"):
        conv2d(x, w, tensor(np.zeros(3, np.float32)))


def test_module_initialisation_draws_weight_then_bias():
    m = Conv2d(4, 6, (3, 2), groups=2, seed=7)
    bound = np.float32(1.0 / np.sqrt(4 // 2 * 3 * 2))
    g = Generator(7)
    np.testing.assert_array_equal(m.weight.detach().numpy(),
                                  g.uniform(-bound, bound, (6, 2, 3, 2)).numpy())
    np.testing.assert_array_equal(m.bias.detach().numpy(), g.uniform(-bound, bound, (6,)).numpy())
    assert list(m.state_dict()) == ["weight", "bias"]
    assert Conv2d(4, 6, 3, bias=False).bias is None


def test_module_matches_torch_with_loaded_weights(assert_close, rng):
    m = Conv2d(4, 8, 3, stride=2, padding=1, dilation=1, groups=2, seed=1)
    ref = torch.nn.Conv2d(4, 8, 3, stride=2, padding=1, groups=2)
    with torch.no_grad():
        ref.weight.copy_(torch.from_numpy(m.weight.detach().numpy()))
        ref.bias.copy_(torch.from_numpy(m.bias.detach().numpy()))
    x = rng.standard_normal((3, 4, 9, 9), dtype=np.float32)
    y = m(tensor(x))
    y.backward(np.ones(y.shape, np.float32))
    expected = ref(torch.from_numpy(x))
    expected.sum().backward()
    assert_close(y.detach().numpy(), expected.detach().numpy())
    assert_close(m.weight.grad.numpy(), ref.weight.grad.numpy(), 1e-4)
    assert_close(m.bias.grad.numpy(), ref.bias.grad.numpy(), 1e-5)
    with pytest.raises(ValueError, match="Conv2d"):
        Conv2d(3, 4, 3, groups=2)


def test_threads_setting_is_used():
    # The same bits whatever onemodel.set_num_threads says (the kernels read it per call).
    rng = np.random.default_rng(3)
    x = tensor(rng.standard_normal((8, 16, 12, 12), dtype=np.float32))
    w = tensor(rng.standard_normal((16, 16, 3, 3), dtype=np.float32))
    before = onemodel.get_num_threads()
    try:
        outs = []
        for n in (1, 2, 3):
            onemodel.set_num_threads(n)
            outs.append(conv2d(x, w, padding=1).numpy().tobytes())
    finally:
        onemodel.set_num_threads(before)
    assert outs[0] == outs[1] == outs[2]


# Unit strides with as many output as input columns: the column matrix read as shifted runs of
# each plane (padding columns masked, padding rows in zero margins) or, for the weight gradient
# with 8 or more channels per group, packed tap by tap; products over batches of images; the
# input gradient summed per pixel. (N, C, H, W), (K, kh, kw), padding, dilation,
# groups.
FLAT_CASES = [
    ((13, 8, 8, 8), (16, 3, 3), 1, 1, 1),          # batches of 2 images, the last one short
    ((1, 5, 7, 9), (4, 3, 3), 1, 1, 1),            # one image
    ((3, 6, 9, 7), (6, 5, 3), (2, 1), 1, 2),       # groups, kh != kw
    ((2, 4, 9, 7), (3, 3, 3), (2, 2), 2, 1),       # dilation
    ((2, 3, 9, 7), (5, 3, 3), (0, 1), 1, 1),       # no row padding: fewer output rows
    ((2, 3, 6, 5), (4, 3, 3), (3, 1), 1, 1),       # more row padding: more output rows
    ((3, 16, 5, 6), (4, 1, 1), 0, 1, 1),           # 1x1
    ((2, 3, 4, 1), (2, 3, 1), (1, 0), 1, 1),       # one column
    ((2, 20, 6, 6), (8, 3, 3), 1, 1, 1),           # 20 channels: packs of 16 cross panels
    ((2, 2, 6, 6), (32, 3, 3), 1, 1, 1),           # fewer taps than output channels
    ((2, 8, 5, 5), (80, 3, 3), 1, 1, 1),           # the same, rows packed tap by tap
]


@pytest.mark.parametrize("xs, ws, padding, dilation, groups", FLAT_CASES)
def test_same_convolutions_match_torch_and_keep_bits(check_torch, check_exact, rng, xs, ws,
                                                      padding, dilation, groups):
    x = rng.standard_normal(xs, dtype=np.float32)
    w = rng.standard_normal((ws[0], xs[1] // groups) + ws[1:], dtype=np.float32)
    b = rng.standard_normal(ws[0], dtype=np.float32)
    args = (1, padding, dilation, groups)
    check_torch(lambda x, w, b: conv2d(x, w, b, *args), lambda x, w, b: TF.conv2d(x, w, b, *args),
                x, w, b, tol=1e-5, grad_tol=1e-4)
    check_exact(lambda x, w, b: conv2d(x, w, b, *args), x, w, b)


def test_same_convolution_special_values_keep_bits(check_exact, rng):
    # Signed zeros, denormals and huge values through the masked copies and the tap sums
    # (a masked tap reads +0, which changes no sum: the sums start at +0).
    x = rng.standard_normal((9, 3, 6, 7), dtype=np.float32)
    values = np.array([0.0, -0.0, 1e-45, -1e-40, 3e-39, 3e38, -3e38, 1e-30], np.float32)
    x.reshape(-1)[::3] = values[np.arange(x.size)[::3] % values.size]
    w = rng.standard_normal((4, 3, 3, 3), dtype=np.float32)
    w.reshape(-1)[::5] = -0.0
    check_exact(lambda x, w: conv2d(x, w, padding=1), x, w)
    x[:] = -0.0
    y = conv2d(tensor(x), tensor(w), padding=1).numpy()
    assert not np.signbit(y).any()   # every chain starts at +0: -0 products leave +0
