"""The graph holds no values a backward does not read: an intermediate result that only feeds
ops whose gradients need its shape alone is freed as soon as the program drops it, and each
node's saved values go as soon as the backward pass has run it (as PyTorch's graph)."""
from __future__ import annotations

import contextlib
import gc
import weakref

import numpy as np
import pytest

import onemodel as om
import onemodel.functional as F
from onemodel import amp, nn

RNG = np.random.default_rng(0)


def _leaf(*shape: int) -> om.Tensor:
    return om.from_numpy(RNG.standard_normal(shape).astype(np.float32)).requires_grad_()


def _image() -> om.Tensor:
    return _leaf(2, 3, 8, 8)


W = _leaf(5, 12)
CONV_W = _leaf(4, 3, 3, 3)
MASK = om.from_numpy(RNG.standard_normal((4, 12)).astype(np.float32))

# op, input factory: each op's backward needs none of its input's values.
SHAPE_ONLY = {
    "add": (lambda x: x + x.detach(), lambda: _leaf(4, 12)),
    "sub": (lambda x: 1.0 - x, lambda: _leaf(4, 12)),
    "neg": (lambda x: -x, lambda: _leaf(4, 12)),
    "mul by a constant": (lambda x: x * MASK, lambda: _leaf(4, 12)),
    "div by a constant": (lambda x: x / 3.0, lambda: _leaf(4, 12)),
    "sum": (lambda x: x.sum(1), lambda: _leaf(4, 12)),
    "mean": (lambda x: x.mean(), lambda: _leaf(4, 12)),
    "permute": (lambda x: x.permute(1, 0), lambda: _leaf(4, 12)),
    "cat": (lambda x: F.cat([x, x], 1), lambda: _leaf(4, 12)),
    "stack": (lambda x: F.stack([x, x]), lambda: _leaf(4, 12)),
    "index": (lambda x: x[1:3, ::2], lambda: _leaf(4, 12)),
    "pad": (lambda x: F.pad(x, (1, 2)), lambda: _leaf(4, 12)),
    "pad reflect": (lambda x: F.pad(x, (1, 1, 1, 1), mode="reflect"), _image),
    "dropout": (lambda x: F.dropout(x, 0.5, True, seed=3), lambda: _leaf(4, 12)),
    "dropout2d": (lambda x: F.dropout2d(x, 0.5, True, seed=3), _image),
    "relu": (lambda x: F.relu(x), lambda: _leaf(4, 12)),
    "exp (reads its output)": (lambda x: x.exp(), lambda: _leaf(4, 12)),
    "softmax (reads its output)": (lambda x: F.softmax(x, 1), lambda: _leaf(4, 12)),
    "log_softmax (reads its output)": (lambda x: F.log_softmax(x, 1), lambda: _leaf(4, 12)),
    "tanh (reads its output)": (lambda x: x.tanh(), lambda: _leaf(4, 12)),
    "sigmoid (reads its output)": (lambda x: x.sigmoid(), lambda: _leaf(4, 12)),
    "cross_entropy": (lambda x: F.cross_entropy(x, np.array([1, 0, 3, 11])),
                      lambda: _leaf(4, 12)),
    "transpose": (lambda x: x.transpose(0, 1), lambda: _leaf(4, 12)),
    "expand": (lambda x: x[:, :1].expand(4, 5), lambda: _leaf(4, 12)),
    "where": (lambda x: F.where(MASK._data > 0, x, 0.0), lambda: _leaf(4, 12)),
    "max_pool2d": (lambda x: F.max_pool2d(x, 2), _image),
    "avg_pool2d": (lambda x: F.avg_pool2d(x, 2), _image),
    "adaptive_avg_pool2d": (lambda x: F.adaptive_avg_pool2d(x, 1), _image),
    "linear under autocast": (lambda x: _cast(lambda: F.linear(x, W)), lambda: _leaf(4, 12)),
    "matmul under autocast": (lambda x: _cast(lambda: x @ W.T), lambda: _leaf(4, 12)),
    "conv2d under autocast": (lambda x: _cast(lambda: F.conv2d(x, CONV_W)), _image),
    "batch_norm under autocast": (
        lambda x: _cast(lambda: F.batch_norm(x, None, None, training=True)), _image),
}


def _cast(fn):
    with amp.autocast("bf16"):
        return fn()


@pytest.mark.parametrize("name", SHAPE_ONLY)
def test_an_input_whose_values_no_gradient_reads_is_freed(name: str) -> None:
    op, make = SHAPE_ONLY[name]
    leaf = make()
    x = leaf * 2.0                       # an intermediate, with values of its own
    values = weakref.ref(x._data)
    y = op(x)
    del x
    gc.collect()
    assert values() is None, f"{name}: the graph keeps its input's values alive"
    y.sum().backward()
    assert leaf.grad is not None and leaf.grad.shape == leaf.shape


def test_a_large_relu_keeps_a_mask_not_its_output() -> None:
    """From 2^16 elements relu's backward reads a one-byte mask: its float32 output goes once
    the program and the next op are done with it, and the gradient is the same."""
    leaf = _leaf(256, 512)
    y = F.relu(leaf * 2.0)
    values = weakref.ref(y._data)
    z = y * 3.0
    del y
    gc.collect()
    assert values() is None
    z.sum().backward()
    np.testing.assert_array_equal(leaf.grad.numpy(),
                                  np.where(leaf.detach().numpy() > 0, np.float32(6), np.float32(0)))


def test_a_large_relus_backward_widens_its_mask_a_block_at_a_time() -> None:
    """Its peak is dx and a block, not dx and a float32 copy of the whole mask."""
    import tracemalloc
    leaf = _leaf(1024, 1024)
    y = F.relu(leaf)
    g = om.from_numpy(RNG.standard_normal((1024, 1024)).astype(np.float32))
    gc.collect()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    y.backward(g)
    peak = tracemalloc.get_traced_memory()[1] - base
    tracemalloc.stop()
    assert peak < 1.25 * leaf.numel() * 4, f"relu backward's peak {peak / 2**20:.2f} MiB"


def test_a_large_relu_gives_the_kernels_gradient_bits_on_special_values() -> None:
    """The mask path (2^16 elements and more) against the small path's kernel rule, y <= 0 ? +0
    : g, element by element: NaN passes the gradient, -0 and +0 stop it, also for inf or NaN
    gradients, in every block of the mask's widening (the last one short)."""
    n = 3 * (1 << 16) + 40
    x = RNG.standard_normal(n).astype(np.float32)
    x[:8] = [np.nan, -0.0, 0.0, np.inf, -np.inf, 1e-45, -1e-45, 3.0]
    g = RNG.standard_normal(n).astype(np.float32)
    g[8:16] = [np.nan, np.inf, -np.inf, -0.0, 0.0, np.nan, -1.0, 2.0]
    g[16:24] = g[8:16]
    x[16:24] = x[:8]
    for start in ((1 << 16) - 4, n - 8):
        g[start:start + 8], x[start:start + 8] = g[8:16], x[:8]
    leaf = om.from_numpy(x).requires_grad_()
    y = F.relu(leaf)
    y.backward(om.from_numpy(g))
    out = y.detach().numpy()
    want = np.where(out <= 0, np.float32(0), g)
    np.testing.assert_array_equal(leaf.grad.numpy().view(np.uint32), want.view(np.uint32))
    small = om.from_numpy(x[:1024]).requires_grad_()  # the kernel's own backward
    F.relu(small).backward(om.from_numpy(g[:1024]))
    np.testing.assert_array_equal(small.grad.numpy().view(np.uint32),
                                  leaf.grad.numpy()[:1024].view(np.uint32))


def test_gradients_are_unchanged_by_what_the_graph_keeps() -> None:
    """The same gradients whether the program holds the intermediates or drops them."""
    leaf = _leaf(4, 12)

    def run(keep: bool) -> np.ndarray:
        leaf.grad = None
        h = leaf * 2.0
        kept = [h]
        out = F.dropout(F.relu(h), 0.3, True, seed=5)
        kept.append(out)
        if not keep:
            kept.clear()
            del h
        (out * out).sum().backward()
        return leaf.grad.numpy().copy()

    np.testing.assert_array_equal(run(True), run(False))


def test_saved_values_go_as_soon_as_their_node_has_run() -> None:
    """During backward, the values saved by a node already run are no longer held: the
    second linear's saved input is gone before the first linear's backward runs."""
    model = nn.Sequential(nn.Linear(12, 16), nn.ReLU(), nn.Linear(16, 3))
    x = _leaf(4, 12)
    h = model[1](model[0](x))
    saved = weakref.ref(h._data)
    out = model[2](h)
    del h
    alive_when_first_ran = []
    first = model[0].weight
    first.register_post_accumulate_grad_hook(lambda _: alive_when_first_ran.append(
        saved() is not None))
    out.sum().backward()
    assert alive_when_first_ran == [False]


def test_a_weight_gradient_goes_into_grad_as_soon_as_it_is_complete() -> None:
    """As PyTorch's AccumulateGrad: backward does not hold every weight's gradient until it
    ends. Over four 512 x 512 layers (1 MiB of gradient each) on a batch of 8, accumulating
    into existing .grad, one weight gradient at a time is alive beside them."""
    import tracemalloc
    model = nn.Sequential(*[nn.Linear(512, 512, bias=False) for _ in range(4)])
    x = _leaf(8, 512)
    model(x).sum().backward()
    first = [p.grad.numpy().copy() for p in model.parameters()]
    gc.collect()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    model(x).sum().backward()
    peak = tracemalloc.get_traced_memory()[1] - base
    tracemalloc.stop()
    assert peak < 1.5 * 2**20, f"backward's peak {peak / 2**20:.2f} MiB"
    for p, g in zip(model.parameters(), first):
        np.testing.assert_array_equal(p.grad.numpy(), 2 * g)


def test_a_retained_graph_runs_twice_and_a_released_one_refuses() -> None:
    leaf = _leaf(4, 12)
    y = F.relu(leaf * 2.0).sum()
    y.backward(retain_graph=True)
    first = leaf.grad.numpy().copy()
    y.backward()
    np.testing.assert_array_equal(leaf.grad.numpy(), 2 * first)
    with pytest.raises(RuntimeError, match="second time"):
        y.backward()


def test_a_feed_forward_block_frees_each_stage_once_the_next_has_it(monkeypatch) -> None:
    """In a transformer layer's feed-forward block the activation (ReLU keeps a mask) is dead
    when ff2 runs, and ff2's input (dropout keeps a mask) is dead when the last dropout runs: no
    4 x d_model activation is alive beside the next one (under autocast, beside its 2-byte
    copy)."""
    layer = nn.TransformerEncoderLayer(8, 2, 32, dropout=0.1, batch_first=True, seed=0)
    x = _leaf(2, 5, 8)
    dropped: list = []
    alive: dict[str, bool] = {}
    ff2_forward, drop_forward = layer.ff2.forward, layer.dropout2.forward

    def ff2(h: om.Tensor) -> om.Tensor:
        dropped.append(weakref.ref(h))
        gc.collect()
        alive["activation in ff2"] = activation() is not None
        return ff2_forward(h)

    def drop(h: om.Tensor) -> om.Tensor:
        gc.collect()
        alive["ff2's input in the dropout"] = dropped[0]() is not None
        return drop_forward(h)

    relu_of = F.relu

    def relu(h: om.Tensor) -> om.Tensor:
        nonlocal activation
        out = relu_of(h)
        activation = weakref.ref(out)
        return out

    activation = None
    layer.ff2.forward, layer.dropout2.forward = ff2, drop
    monkeypatch.setattr(F, "relu", relu)
    with amp.autocast("bf16"):
        layer(x).sum().backward()
    assert alive == {"activation in ff2": False, "ff2's input in the dropout": False}


def _peak_of(fn) -> int:
    """tracemalloc's peak while fn runs, above what was allocated before it."""
    import tracemalloc
    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        fn()
        return tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()


def _two_steps_then_sum(model: nn.Module, run) -> list[np.ndarray]:
    """The .grad of two backward passes accumulated, after checking it against each pass's
    gradient made alone and added with numpy (the order and rounding of .grad + g)."""
    alone = []
    for step in (0, 1):
        model.zero_grad()
        run(step)
        alone.append([p.grad.numpy().copy() for p in model.parameters()])
    model.zero_grad()
    run(0)
    run(1)
    got = [p.grad.numpy().copy() for p in model.parameters()]
    for g, g0, g1 in zip(got, *alone):
        np.testing.assert_array_equal(g.view(np.uint32), (g0 + g1).view(np.uint32))
    return got


@pytest.mark.parametrize("cast", [None, "bf16", "fp16"])
def test_a_weight_gradient_added_by_the_product_has_the_bits_of_adding_it_made(cast) -> None:
    """Backward has linear's and matmul's weight gradients added into an existing .grad by the
    product itself (depth, the batch, within one K block): .grad + g to the bit, on every path
    at 1-3 threads, under autocast too; past one K block (300 rows), a weight used twice and a
    2-D operand that is not a leaf take the gradient made whole, with the same bits."""
    from onemodel import _config, _kernels
    isa, threads = _kernels.selected_isa(), _config.get_num_threads()
    try:
        _weight_grads_on_every_path(cast)
    finally:  # the path and thread count the suite had
        _kernels.select_isa(isa)
        _config.set_num_threads(threads)


def _weight_grads_on_every_path(cast) -> None:
    from onemodel import _config, _kernels
    rng = np.random.default_rng(7)
    w_shared = nn.Linear(24, 24, bias=False)
    model = nn.ModuleList([nn.Linear(40, 24), w_shared])
    w2 = om.from_numpy(rng.standard_normal((24, 9)).astype(np.float32))
    model.register_parameter("w2", nn.Parameter(w2))
    w2 = model.w2
    results = {}
    for rows in (64, 300):
        xs = [om.from_numpy(rng.standard_normal((rows, 40)).astype(np.float32)) for _ in (0, 1)]

        def run(step: int) -> None:
            with amp.autocast(cast) if cast else contextlib.nullcontext():
                h = F.relu(model[0](xs[step]))
                h = model[1](model[1](h))                 # one weight, two feeds
                loss = ((h @ w2) @ (w2.detach() * 1.0).T).sum()
            loss.backward()

        for isa in _kernels.available_isas():
            _kernels.select_isa(isa)
            for threads in (1, 2, 3):
                _config.set_num_threads(threads)
                results[(rows, isa, threads)] = _two_steps_then_sum(model, run)
        first = results[(rows, _kernels.available_isas()[0], 1)]
        for key, got in results.items():
            if key[0] == rows:
                for g, want in zip(got, first):
                    np.testing.assert_array_equal(g.view(np.uint32), want.view(np.uint32),
                                                  err_msg=str(key))


def test_a_weight_gradient_added_by_the_product_needs_no_array_of_its_size() -> None:
    """With .grad there to add into, a 1024 x 1024 layer's backward holds no 4 MiB weight
    gradient beside it: the second step's peak is under one weight's size, and the hook after
    accumulation sees the finished .grad once per step."""
    model = nn.Sequential(nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 1024))
    x = _leaf(32, 1024).detach()
    seen = []
    model[2].weight.register_post_accumulate_grad_hook(
        lambda p: seen.append(float(p.grad.numpy()[0, 0])))
    model(x).sum().backward()
    first = model[2].weight.grad.numpy().copy()
    peak = _peak_of(lambda: model(x).sum().backward())
    assert peak < 2**20, f"the second backward's peak {peak / 2**20:.2f} MiB"
    np.testing.assert_array_equal(model[2].weight.grad.numpy(), 2 * first)
    assert seen == [first[0, 0], 2 * first[0, 0]]


def test_relus_backward_writes_into_a_gradient_only_it_holds() -> None:
    """relu's backward writes its result into the gradient handed to it when nothing else
    refers to that array: the peak of a chain's backward is one gradient less; the caller's
    gradient and one handed to two inputs (add's) are left alone, and the results are the
    same."""
    leaf = _leaf(512, 512)
    g = RNG.standard_normal((512, 512)).astype(np.float32)
    g_copy = g.copy()
    y = F.relu(leaf)
    y.backward(om.from_numpy(g))
    np.testing.assert_array_equal(g, g_copy)
    want = np.where(y.detach().numpy() > 0, g, np.float32(0))
    np.testing.assert_array_equal(leaf.grad.numpy(), want)

    leaf.grad = None
    (F.relu(leaf * 2.0) + F.relu(leaf * -3.0)).backward(om.from_numpy(g))
    x = leaf.detach().numpy()
    both = np.where(x * 2 > 0, g * np.float32(2), 0) + np.where(x * -3 > 0, g * np.float32(-3), 0)
    np.testing.assert_array_equal(leaf.grad.numpy(), both.astype(np.float32))
    np.testing.assert_array_equal(g, g_copy)

    size = leaf.numel() * 4
    leaf.grad = None
    z, root = F.relu(leaf) * 3.0, om.from_numpy(g)
    peak = _peak_of(lambda: z.backward(root))    # g * 3, then relu's result in its place
    assert peak < 1.5 * size, f"the chain's backward peak {peak / size:.2f} gradients"
    np.testing.assert_array_equal(leaf.grad.numpy(), np.where(x > 0, g * np.float32(3), 0))


def test_a_max_pool_keeps_its_indices_in_two_bytes() -> None:
    """What max_pool2d's node keeps is 2 bytes an output (not int64), and its gradient has the
    bits of the int64 indices' (return_indices), also over several blocks of planes, on ties
    (the first maximum) and a plane of 2^16 elements (the largest 2-byte offsets)."""
    x = RNG.standard_normal((8, 40, 32, 32)).astype(np.float32)
    x[:, :, :2] = 1.0                               # ties: the gradient goes to the first
    g = RNG.standard_normal((8, 40, 16, 16)).astype(np.float32)
    leaf = om.from_numpy(x).requires_grad_()
    import tracemalloc
    gc.collect()
    tracemalloc.start()
    out = F.max_pool2d(leaf, 2)
    held = tracemalloc.get_traced_memory()[0] - out.numel() * 4
    tracemalloc.stop()
    assert held < out.numel() * 2.1, f"max_pool2d keeps {held / out.numel():.2f} bytes an output"
    out.backward(om.from_numpy(g))
    indexed = om.from_numpy(x).requires_grad_()
    out64, idx = F.max_pool2d(indexed, 2, return_indices=True)
    out64.backward(om.from_numpy(g))
    assert idx.numpy().dtype == np.int64
    np.testing.assert_array_equal(out.detach().numpy(), out64.detach().numpy())
    np.testing.assert_array_equal(leaf.grad.numpy().view(np.uint32),
                                  indexed.grad.numpy().view(np.uint32))
    wide = _leaf(1, 2, 256, 256)
    F.max_pool2d(wide, 2, stride=1).sum().backward()
    wide64 = om.from_numpy(wide.detach().numpy()).requires_grad_()
    F.max_pool2d(wide64, 2, stride=1, return_indices=True)[0].sum().backward()
    np.testing.assert_array_equal(wide.grad.numpy(), wide64.grad.numpy())


def test_a_weight_gradient_goes_into_a_grad_the_kernel_cannot_write_to_as_numpy_would() -> None:
    """A .grad that is not C-contiguous, or that is the layer's own input, takes the gradient
    made whole and added (what the kernel's add would give where it can write)."""
    lin = nn.Linear(5, 5, bias=False)
    x = _leaf(5, 5).detach()
    g = RNG.standard_normal((5, 5)).astype(np.float32)
    lin(x).backward(om.from_numpy(g))
    made = lin.weight.grad.numpy().copy()             # gᵀ·x from no .grad
    start = RNG.standard_normal((5, 5)).astype(np.float32)
    lin.weight.grad = om.Tensor._wrap(np.ascontiguousarray(start.T).T)
    assert not lin.weight.grad._data.flags.c_contiguous
    lin(x).backward(om.from_numpy(g))
    np.testing.assert_array_equal(lin.weight.grad.numpy(), start + made)

    own = om.from_numpy(start)                        # the input is the weight's .grad
    lin.weight.grad = own
    lin(own).backward(om.from_numpy(g))
    lin.weight.grad = None
    lin(om.from_numpy(start)).backward(om.from_numpy(g))
    np.testing.assert_array_equal(own.numpy(), start + lin.weight.grad.numpy())
