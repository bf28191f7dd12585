"""batch_norm and BatchNorm1d/2d: PyTorch in training and evaluation mode (outputs, gradients,
running statistics over several steps, state names), central differences, exact-mode bits."""
import numpy as np
import pytest

from onemodel.functional.conv import batch_norm
from onemodel.nn.conv import BatchNorm1d, BatchNorm2d
from onemodel.tensor import tensor

torch = pytest.importorskip("torch")
TF = torch.nn.functional

# The kernel reads blocks of 2,048 values: whole runs (the last 3 shapes: runs of 1 and of 63,
# 32 runs to a block, the last block short) or pieces of a run longer than a block.
SHAPES = [(8, 3), (4, 5, 7), (2, 3, 5, 6), (2, 2, 1, 2), (3, 17, 4, 5), (2100, 2), (40, 3, 63),
          (2, 3, 2100)]


@pytest.mark.parametrize("shape", SHAPES)
def test_training_matches_torch(check_torch, rng, shape):
    x = (rng.standard_normal(shape) * 3 + 1).astype(np.float32)
    c = shape[1]
    w = rng.standard_normal(c, dtype=np.float32)
    b = rng.standard_normal(c, dtype=np.float32)
    check_torch(lambda x, w, b: batch_norm(x, None, None, w, b, True),
                lambda x, w, b: TF.batch_norm(x, None, None, w, b, True), x, w, b)
    check_torch(lambda x: batch_norm(x, None, None, training=True),
                lambda x: TF.batch_norm(x, None, None, training=True), x)


@pytest.mark.parametrize("shape", SHAPES)
def test_evaluation_matches_torch(check_torch, rng, shape):
    x = rng.standard_normal(shape, dtype=np.float32)
    c = shape[1]
    rm = rng.standard_normal(c, dtype=np.float32)
    rv = rng.uniform(0.5, 2.0, c).astype(np.float32)
    w = rng.standard_normal(c, dtype=np.float32)
    b = rng.standard_normal(c, dtype=np.float32)
    check_torch(lambda x, rm, rv, w, b: batch_norm(x, rm, rv, w, b, False),
                lambda x, rm, rv, w, b: TF.batch_norm(x, rm, rv, w, b, False), x, rm, rv, w, b,
                requires_grad=[True, False, False, True, True])


def _bn64(x, w, b, eps=1e-5):
    axes = (0,) + tuple(range(2, x.ndim))
    shape = (1, -1) + (1,) * (x.ndim - 2)
    m = x.mean(axis=axes, keepdims=True)
    v = ((x - m) ** 2).mean(axis=axes, keepdims=True)
    return (x - m) / np.sqrt(v + eps) * w.reshape(shape) + b.reshape(shape)


def test_central_differences(check_grad, rng):
    x = rng.standard_normal((3, 2, 2, 3), dtype=np.float32)
    w = rng.standard_normal(2, dtype=np.float32)
    b = rng.standard_normal(2, dtype=np.float32)
    check_grad(lambda x, w, b: batch_norm(x, None, None, w, b, True), x, w, b, ref64=_bn64)


@pytest.mark.parametrize("shape", [(2, 3), (5, 16, 17), (4, 7, 15, 16), (40, 3, 63)])
def test_exact_bits_every_path_and_thread_count(check_exact, rng, shape):
    x = rng.standard_normal(shape, dtype=np.float32)
    w = rng.standard_normal(shape[1], dtype=np.float32)
    b = rng.standard_normal(shape[1], dtype=np.float32)
    check_exact(lambda x, w, b: batch_norm(x, None, None, w, b, True), x, w, b)


def test_running_statistics_follow_torch_over_steps(assert_close, rng):
    ours = BatchNorm2d(4, momentum=0.3)
    ref = torch.nn.BatchNorm2d(4, momentum=0.3)
    for step in range(4):
        x = (rng.standard_normal((3, 4, 5, 5)) * (step + 1) + step).astype(np.float32)
        y = ours(tensor(x))
        expected = ref(torch.from_numpy(x))
        assert_close(y.detach().numpy(), expected.detach().numpy())
    for name in ("running_mean", "running_var"):
        assert_close(getattr(ours, name).numpy(), getattr(ref, name).numpy(), 1e-6, name)
    assert int(ours.num_batches_tracked.item()) == 4
    ours.eval()
    ref.eval()
    x = rng.standard_normal((2, 4, 3, 3), dtype=np.float32)
    assert_close(ours(tensor(x)).detach().numpy(), ref(torch.from_numpy(x)).detach().numpy())
    assert int(ours.num_batches_tracked.item()) == 4


def test_cumulative_average_and_1d_inputs(assert_close, rng):
    for shape in ((6, 3), (6, 3, 4)):
        ours = BatchNorm1d(3, momentum=None, affine=False)
        ref = torch.nn.BatchNorm1d(3, momentum=None, affine=False)
        for _ in range(3):
            x = rng.standard_normal(shape, dtype=np.float32)
            assert_close(ours(tensor(x)).numpy(), ref(torch.from_numpy(x)).detach().numpy())
        assert_close(ours.running_var.numpy(), ref.running_var.numpy(), 1e-6)
        assert_close(ours.running_mean.numpy(), ref.running_mean.numpy(), 1e-6)


def test_state_names_and_dtypes_are_torch_s():
    m = BatchNorm2d(5)
    sd = m.state_dict()
    assert list(sd) == list(torch.nn.BatchNorm2d(5).state_dict())
    assert sd["num_batches_tracked"].dtype == np.int64 and sd["num_batches_tracked"].shape == ()
    assert [n for n, _ in m.named_parameters()] == ["weight", "bias"]
    untracked = BatchNorm1d(3, track_running_stats=False)
    assert list(untracked.state_dict()) == ["weight", "bias"]
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    untracked.eval()  # without running statistics, evaluation uses the batch's
    np.testing.assert_allclose(untracked(tensor(x)).detach().numpy(),
                               torch.nn.BatchNorm1d(3, track_running_stats=False).eval()(
                                   torch.from_numpy(x)).detach().numpy(), atol=1e-6)


def test_parameter_gradients_through_module(assert_close, rng):
    ours, ref = BatchNorm2d(3), torch.nn.BatchNorm2d(3)
    x = rng.standard_normal((4, 3, 2, 2), dtype=np.float32)
    g = rng.standard_normal(x.shape, dtype=np.float32)
    ours(tensor(x)).backward(g)
    ref(torch.from_numpy(x)).backward(torch.from_numpy(g))
    assert_close(ours.weight.grad.numpy(), ref.weight.grad.numpy())
    assert_close(ours.bias.grad.numpy(), ref.bias.grad.numpy())


@pytest.mark.parametrize("ours, theirs, shape", [(BatchNorm1d, "BatchNorm1d", (5, 3, 4)),
                                                 (BatchNorm2d, "BatchNorm2d", (4, 3, 2, 2))])
def test_without_bias_as_torch(assert_close, rng, ours, theirs, shape):
    ours, ref = ours(3, bias=False), getattr(torch.nn, theirs)(3, bias=False)
    assert ours.bias is None and list(ours.state_dict()) == list(ref.state_dict())
    with torch.no_grad():
        ref.weight.uniform_(0.5, 1.5)
    ours.load_state_dict({k: v.numpy().copy() for k, v in ref.state_dict().items()})
    x = rng.standard_normal(shape, dtype=np.float32)
    g = rng.standard_normal(shape, dtype=np.float32)
    xo, xt = tensor(x, requires_grad=True), torch.from_numpy(x).requires_grad_()
    yo, yt = ours(xo), ref(xt)
    assert_close(yo.detach().numpy(), yt.detach().numpy())
    yo.backward(g)
    yt.backward(torch.from_numpy(g))
    assert_close(xo.grad.numpy(), xt.grad.numpy())
    assert_close(ours.weight.grad.numpy(), ref.weight.grad.numpy())
    assert_close(ours.running_var.numpy(), ref.running_var.numpy())


@pytest.mark.parametrize("layer, shape", [(BatchNorm1d, (0, 3)), (BatchNorm1d, (0, 3, 4)),
                                           (BatchNorm2d, (0, 3, 2, 2)),
                                           (BatchNorm2d, (2, 3, 0, 4))])
def test_empty_batch_in_training_gives_the_empty_result_as_torch(layer, shape):
    ours, ref = layer(3), getattr(torch.nn, layer.__name__)(3)
    x = tensor(np.zeros(shape, np.float32), requires_grad=True)
    xt = torch.zeros(shape, requires_grad=True)
    y, yt = ours(x), ref(xt)
    assert y.shape == tuple(yt.shape)
    y.sum().backward()
    yt.sum().backward()
    assert x.grad.shape == shape
    for name, value in ours.state_dict().items():
        np.testing.assert_array_equal(value, ref.state_dict()[name].numpy(), err_msg=name)
    np.testing.assert_array_equal(ours.weight.grad.numpy(), ref.weight.grad.numpy())
    np.testing.assert_array_equal(ours.bias.grad.numpy(), ref.bias.grad.numpy())


def test_bad_inputs_raise():
    x = tensor(np.zeros((4, 3, 2, 2), np.float32))
    with pytest.raises(ValueError, match="batch_norm: weight has shape"):
        batch_norm(x, None, None, tensor(np.ones(2, np.float32)), None, True)
    with pytest.raises(ValueError, match="more than 1 value per channel"):
        batch_norm(tensor(np.zeros((1, 3), np.float32)), None, None, training=True)
    with pytest.raises(ValueError, match="evaluation mode needs"):
        batch_norm(x, None, None, training=False)
    with pytest.raises(TypeError, match="batch_norm: input must be float32"):
        batch_norm(tensor(np.zeros((4, 3), np.int64)), None, None, training=True)
    with pytest.raises(ValueError, match="BatchNorm2d: expected a 4-D input"):
        BatchNorm2d(3)(tensor(np.zeros((4, 3), np.float32)))
    with pytest.raises(ValueError, match="BatchNorm1d: expected a 2 or 3-D input"):
        BatchNorm1d(3)(x)
