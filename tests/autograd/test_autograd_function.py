"""autograd.Function (onemodel/_function.py): the custom-Function tutorial programs run with
`torch` replaced by `onemodel`, against torch 2.13 and central differences; ctx's API."""
import textwrap

import numpy as np
import pytest

import onemodel as om

torch = pytest.importorskip("torch")

# PyTorch's "Learning PyTorch with Examples" custom-Function programs, as written there (only
# the iteration counts are lowered, and MyReLU's data seeded); each runs as `torch` is bound.
LEGENDRE = textwrap.dedent('''
    import math


    class LegendrePolynomial3(torch.autograd.Function):
        @staticmethod
        def forward(ctx, input):
            ctx.save_for_backward(input)
            return 0.5 * (5 * input ** 3 - 3 * input)

        @staticmethod
        def backward(ctx, grad_output):
            input, = ctx.saved_tensors
            return grad_output * 1.5 * (5 * input ** 2 - 1)


    dtype = torch.float
    device = torch.device("cpu")
    x = torch.linspace(-math.pi, math.pi, 2000, device=device, dtype=dtype)
    y = torch.sin(x)
    a = torch.full((), 0.0, device=device, dtype=dtype, requires_grad=True)
    b = torch.full((), -1.0, device=device, dtype=dtype, requires_grad=True)
    c = torch.full((), 0.0, device=device, dtype=dtype, requires_grad=True)
    d = torch.full((), 0.3, device=device, dtype=dtype, requires_grad=True)
    learning_rate = 5e-6
    for t in range(300):
        P3 = LegendrePolynomial3.apply
        y_pred = a + b * P3(c + d * x)
        loss = (y_pred - y).pow(2).sum()
        if t % 100 == 99:
            print(t, loss.item())
        loss.backward()
        with torch.no_grad():
            a -= learning_rate * a.grad
            b -= learning_rate * b.grad
            c -= learning_rate * c.grad
            d -= learning_rate * d.grad
            a.grad = None
            b.grad = None
            c.grad = None
            d.grad = None
    print(f'Result: y = {a.item()} + {b.item()} * P3({c.item()} + {d.item()} x)')
''')

MY_RELU = textwrap.dedent('''
    class MyReLU(torch.autograd.Function):
        @staticmethod
        def forward(ctx, input):
            ctx.save_for_backward(input)
            return input.clamp(min=0)

        @staticmethod
        def backward(ctx, grad_output):
            input, = ctx.saved_tensors
            grad_input = grad_output.clone()
            grad_input[input < 0] = 0
            return grad_input


    dtype = torch.float
    device = torch.device("cpu")
    N, D_in, H, D_out = 64, 100, 30, 10
    x = torch.tensor(data[0], device=device, dtype=dtype)
    y = torch.tensor(data[1], device=device, dtype=dtype)
    w1 = torch.tensor(data[2], device=device, dtype=dtype, requires_grad=True)
    w2 = torch.tensor(data[3], device=device, dtype=dtype, requires_grad=True)
    learning_rate = 1e-6
    for t in range(50):
        relu = MyReLU.apply
        y_pred = relu(x.mm(w1)).mm(w2)
        loss = (y_pred - y).pow(2).sum()
        if t % 10 == 9:
            print(t, loss.item())
        loss.backward()
        with torch.no_grad():
            w1 -= learning_rate * w1.grad
            w2 -= learning_rate * w2.grad
            w1.grad.zero_()
            w2.grad.zero_()
''')


def _run(source, lib, **names):
    scope = {"torch": lib, **names}
    exec(compile(source, "<tutorial>", "exec"), scope)
    return scope


def test_legendre_tutorial_runs_unchanged_as_torch():
    ours, theirs = _run(LEGENDRE, om), _run(LEGENDRE, torch)
    for name in "abcd":
        np.testing.assert_allclose(ours[name].item(), theirs[name].item(), rtol=1e-4,
                                   atol=1e-7)
    np.testing.assert_allclose(ours["loss"].item(), theirs["loss"].item(), rtol=1e-4)


def test_my_relu_tutorial_runs_unchanged_as_torch():
    rng = np.random.default_rng(0)
    data = [rng.standard_normal(s).astype(np.float32) for s in ((64, 100), (64, 10), (100, 30),
                                                                   (30, 10))]
    ours, theirs = _run(MY_RELU, om, data=data), _run(MY_RELU, torch, data=data)
    for name in ("w1", "w2"):
        np.testing.assert_allclose(ours[name].detach().numpy(), theirs[name].detach().numpy(),
                                   rtol=1e-4, atol=1e-5)
    assert not np.array_equal(ours["w1"].detach().numpy(), data[2])  # it trained


class Cube(om.autograd.Function):
    """x³ · scale with a non-tensor argument; backward returns None for it."""

    @staticmethod
    def forward(ctx, x, scale):
        ctx.save_for_backward(x)
        ctx.scale = scale
        return x * x * x * scale

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * 3 * x * x * ctx.scale, None


class MulAdd(om.autograd.Function):
    """(a·b, a + b) in torch 2's style: forward without ctx, setup_context."""

    @staticmethod
    def forward(a, b):
        return a * b, a + b

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(*inputs)

    @staticmethod
    def backward(ctx, g_prod, g_sum):
        a, b = ctx.saved_tensors
        return g_prod * b + g_sum, g_prod * a + g_sum


def test_custom_functions_against_finite_differences(check_grad):
    check_grad(lambda x: Cube.apply(x, 0.5), np.linspace(-1, 1, 7, dtype=np.float32),
               ref64=lambda x: x ** 3 * 0.5)
    check_grad(lambda a, b: MulAdd.apply(a, b)[0] * 2 + MulAdd.apply(a, b)[1],
               np.float32([0.5, -1.0, 2.0]), np.float32([1.5, 0.25, -0.75]),
               ref64=lambda a, b: a * b * 2 + a + b)


def test_multiple_outputs_and_setup_context_against_torch():
    results = []
    for L, base in ((om, om.autograd.Function), (torch, torch.autograd.Function)):
        fn = type("MulAdd", (base,), {k: MulAdd.__dict__[k]
                                     for k in ("forward", "setup_context", "backward")})
        a = L.tensor(np.float32([0.5, -1.0, 2.0]), requires_grad=True)
        b = L.tensor(np.float32([1.5, 0.25, -0.75]), requires_grad=True)
        p, s = fn.apply(a, b)
        (p.exp() * 2 + s * s).sum().backward()
        results.append((a.grad.numpy(), b.grad.numpy(), p.grad_fn is not None))
    np.testing.assert_allclose(results[0][0], results[1][0], rtol=1e-6)
    np.testing.assert_allclose(results[0][1], results[1][1], rtol=1e-6)
    assert results[0][2] and results[1][2]


def test_unused_output_gets_zeros_or_none_with_materialize_off():
    for materialize in (True, False):
        seen = []

        class Pair(om.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.set_materialize_grads(materialize)
                return x * 2, x * 3

            @staticmethod
            def backward(ctx, g1, g2):
                seen.append(g2)
                return g1 * 2 + (0 if g2 is None else g2 * 3)

        x = om.tensor([1.0, 2.0], requires_grad=True)
        first, _ = Pair.apply(x)
        first.sum().backward()
        np.testing.assert_array_equal(x.grad.numpy(), [2.0, 2.0])
        if materialize:
            np.testing.assert_array_equal(seen[0].numpy(), [0.0, 0.0])
        else:
            assert seen == [None]


def test_needs_input_grad_and_non_differentiable_outputs():
    seen = {}

    class ArgMaxAndDouble(om.autograd.Function):
        @staticmethod
        def forward(ctx, x, y, k):
            seen["needs"] = ctx.needs_input_grad
            idx = x.argmax()
            ctx.mark_non_differentiable(idx)
            return x * y * k, idx

        @staticmethod
        def backward(ctx, g, g_idx):
            seen["g_idx"] = g_idx
            return g * 2, None, None

    x = om.tensor([1.0, 3.0], requires_grad=True)
    out, idx = ArgMaxAndDouble.apply(x, om.tensor([1.0, 1.0]), 2)
    assert seen["needs"] == (True, False, False)
    assert not idx.requires_grad and out.requires_grad
    out.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 2.0])
    np.testing.assert_array_equal(seen["g_idx"].numpy(), 0)


def test_no_graph_when_no_input_needs_grad():
    y = Cube.apply(om.tensor([1.0, 2.0]), 2.0)
    assert not y.requires_grad and y.grad_fn is None
    x = om.tensor([1.0, 2.0], requires_grad=True)
    with om.no_grad():
        assert not Cube.apply(x, 2.0).requires_grad


def test_saved_tensor_modified_in_place_refused_as_torch():
    x = om.tensor([1.0, 2.0], requires_grad=True)
    h = x * 1
    y = Cube.apply(h, 1.0)
    h.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()


def test_wrong_gradient_count_and_shape_refused_as_torch():
    class TooFew(om.autograd.Function):
        @staticmethod
        def forward(ctx, x, y):
            return x * y

        @staticmethod
        def backward(ctx, g):
            return (g,)

    class BadShape(om.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return om.ones(5)

    x = om.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(RuntimeError, match=r"function TooFewBackward returned an incorrect "
                                           r"number of gradients \(expected 2, got 1\)"):
        TooFew.apply(x, x).sum().backward()
    with pytest.raises(RuntimeError, match="function BadShapeBackward returned an invalid "
                                           "gradient at index 0"):
        BadShape.apply(x).sum().backward()


def test_second_backward_needs_retain_graph():
    x = om.tensor([1.0, 2.0], requires_grad=True)
    y = Cube.apply(x, 1.0).sum()
    y.backward(retain_graph=True)
    y.backward()
    np.testing.assert_array_equal(x.grad.numpy(), [6.0, 24.0])
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        y.backward()
