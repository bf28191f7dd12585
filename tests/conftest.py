"""Shared checks for op tests: PyTorch comparison, finite differences, exact-mode bit identity.

Each check is a fixture returning a plain function, so test files need no imports from here:

    def test_add(check_torch, check_grad, check_exact, rng):
        a, b = rng.standard_normal((3, 4), np.float32), rng.standard_normal((4,), np.float32)
        check_torch(F.add, torch.add, a, b)                     # forward + backward vs PyTorch
        check_grad(F.add, a, b, ref64=np.add)                   # backward vs central differences
        check_exact(F.add, a, b)                                # same bits: every ISA, 1-3 threads

Inputs are numpy arrays or Python scalars. Float32 arrays become tensors that require gradients
(unless `requires_grad` says otherwise, one bool per input); integer and bool arrays become
tensors without; scalars are passed through unchanged. An op may return a Tensor or a tuple of
them (the first one is differentiated). The upstream gradient is a fixed random array.

A kernel test that runs on every ISA path takes the `isa` fixture: it runs once per path the
machine has, with that path selected, and `same_bits_everywhere` checks that a run gives the
scalar path's bits at 1-3 threads.
"""
from __future__ import annotations

import contextlib
import copy
from typing import Any, Callable, Iterator, Optional, Sequence

import numpy as np
import pytest

import onemodel
from onemodel import _config, _kernels, interop
from onemodel.tensor import tensor as om_tensor

THREAD_COUNTS = (1, 2, 3)


def scaled_error(actual: np.ndarray, expected: np.ndarray) -> float:
    """max|actual - expected| / max|expected| over the finite entries of expected (0/0 -> 0)."""
    a = np.asarray(actual, np.float64)
    e = np.asarray(expected, np.float64)
    finite = np.isfinite(e)
    if not finite.any():
        return 0.0
    diff = float(np.max(np.abs(a[finite] - e[finite])))
    scale = float(np.max(np.abs(e[finite])))
    return diff / scale if scale > 0 else diff


def assert_close(actual: Any, expected: Any, tol: float = 1e-5, name: str = "value") -> None:
    """Same shape, NaN and ±inf in the same places, scaled error of the rest <= tol."""
    a = np.asarray(actual)
    e = np.asarray(expected)
    assert a.shape == e.shape, f"{name}: shape {a.shape} != expected {e.shape}"
    if e.dtype.kind in "biu":
        np.testing.assert_array_equal(a, e, err_msg=name)
        return
    a64, e64 = a.astype(np.float64), e.astype(np.float64)
    nan = np.isnan(e64)
    np.testing.assert_array_equal(np.isnan(a64), nan, err_msg=f"{name}: NaN positions differ")
    inf = np.isinf(e64)
    np.testing.assert_array_equal(a64[inf], e64[inf], err_msg=f"{name}: infinities differ")
    err = scaled_error(a64, e64)
    assert err <= tol, f"{name}: scaled error {err:.3g} > {tol:.3g}"


def _arrays(inputs: Sequence[Any]) -> list[Any]:
    """numpy scalars become 0-d arrays; everything else is left as given."""
    return [np.asarray(x) if isinstance(x, np.generic) else x for x in inputs]


def _flags(inputs: Sequence[Any], requires_grad: Optional[Sequence[bool]]) -> list[bool]:
    if requires_grad is not None:
        return list(requires_grad)
    return [isinstance(x, np.ndarray) and x.dtype == np.float32 for x in inputs]


def _om_inputs(inputs: Sequence[Any], flags: Sequence[bool]) -> list[Any]:
    return [om_tensor(x, requires_grad=f) if isinstance(x, np.ndarray) else x
            for x, f in zip(inputs, flags)]


def _outputs(out: Any) -> list[Any]:
    return list(out) if isinstance(out, tuple) else [out]


def _upstream(shape: tuple, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _torch():
    return pytest.importorskip("torch")


def check_torch(om_fn: Callable, torch_fn: Callable, *inputs: Any, tol: float = 1e-5,
                grad_tol: Optional[float] = None,
                requires_grad: Optional[Sequence[bool]] = None, seed: int = 0) -> None:
    """Runs the op in onemodel and PyTorch on the same inputs; compares outputs and gradients."""
    torch = _torch()
    inputs = _arrays(inputs)
    flags = _flags(inputs, requires_grad)
    om_in = _om_inputs(inputs, flags)
    th_in = [torch.from_numpy(np.array(x)).requires_grad_(f) if isinstance(x, np.ndarray) else x
             for x, f in zip(inputs, flags)]
    om_out = _outputs(om_fn(*om_in))
    th_out = _outputs(torch_fn(*th_in))
    assert len(om_out) == len(th_out), f"{len(om_out)} outputs, PyTorch gives {len(th_out)}"
    for i, (o, t) in enumerate(zip(om_out, th_out)):
        assert_close(o.detach().numpy(), t.detach().numpy(), tol, f"output {i}")
    if not any(flags) or not th_out[0].requires_grad:
        return
    g = _upstream(tuple(th_out[0].shape), seed)
    om_out[0].backward(g)
    th_out[0].backward(torch.from_numpy(g))
    for i, (o, t, f) in enumerate(zip(om_in, th_in, flags)):
        if not f:
            continue
        expected = np.zeros(t.shape, np.float32) if t.grad is None else t.grad.numpy()
        actual = np.zeros(t.shape, np.float32) if o.grad is None else o.grad.numpy()
        assert_close(actual, expected, tol if grad_tol is None else grad_tol, f"grad {i}")


def check_grad(fn: Callable, *inputs: Any, ref64: Optional[Callable] = None,
               step: Optional[float] = None, tol: Optional[float] = None,
               requires_grad: Optional[Sequence[bool]] = None, seed: int = 0) -> None:
    """Analytic gradient of sum(fn(x)·r) against central differences.

    With `ref64` (the same formula in float64 numpy, taking numpy arrays) the differences are
    taken on it in float64 with a small step and the tolerance is tight; without, they are taken
    on `fn` itself (float32 values, float64 sums) with a coarse step, so keep inputs
    well-conditioned. Inputs should be small: one pair of evaluations per element.
    """
    inputs = _arrays(inputs)
    flags = _flags(inputs, requires_grad)
    om_in = _om_inputs(inputs, flags)
    out = _outputs(fn(*om_in))[0]
    r = _upstream(out.shape, seed)
    out.backward(r)
    r64 = r.astype(np.float64)
    if step is None:
        step = 1e-6 if ref64 is not None else 1e-2
    if tol is None:
        tol = 1e-4 if ref64 is not None else 2e-2

    def objective(values: list[Any]) -> float:
        if ref64 is not None:
            y = np.asarray(_outputs(ref64(*values))[0], np.float64)
        else:
            with onemodel.autograd.no_grad():
                out = _outputs(fn(*_om_inputs(values, [False] * len(values))))[0]
                y = out.detach().numpy()
        return float(np.sum(y.astype(np.float64) * r64))

    for k, (x, f) in enumerate(zip(inputs, flags)):
        if not f:
            continue
        dtype = np.float64 if ref64 is not None else np.float32
        values = [v.astype(dtype) if isinstance(v, np.ndarray) and v.dtype == np.float32 else v
                  for v in inputs]
        base = values[k]
        numeric = np.zeros(x.shape, np.float64)
        for i in np.ndindex(*x.shape):
            plus, minus = base.copy(), base.copy()
            plus[i] = base[i] + step
            minus[i] = base[i] - step
            # The step actually taken, after rounding to the input's precision.
            width = float(plus[i]) - float(minus[i])
            values[k] = plus
            hi = objective(values)
            values[k] = minus
            lo = objective(values)
            numeric[i] = (hi - lo) / width
        values[k] = base
        actual = np.zeros(x.shape, np.float32) if om_in[k].grad is None else om_in[k].grad.numpy()
        assert_close(actual, numeric, tol, f"grad {k} vs central differences")


def param_grads_match_torch(m: Any, t: Any, assert_close: Callable, tol: float) -> None:
    """onemodel module m's parameter gradients, under PyTorch's names (through interop), are
    those of torch module t: the same names, each within tol."""
    twin = copy.deepcopy(m)
    state = m.state_dict()
    for name, p in m.named_parameters():
        state[name] = p.grad.numpy()
    twin.load_state_dict(state)
    theirs = dict(t.named_parameters())
    grads = interop.to_torch_arrays(twin)
    assert set(grads) == set(theirs)
    for name, g in grads.items():
        assert_close(g, theirs[name].grad.numpy(), tol, f"grad {name}")

@contextlib.contextmanager
def _restore_settings() -> Iterator[None]:
    isa, threads = _kernels.selected_isa(), _config.get_num_threads()
    try:
        yield
    finally:
        _kernels.select_isa(isa)
        _config.set_num_threads(threads)


@contextlib.contextmanager
def isa_path(name: str) -> Iterator[None]:
    """Runs the block on one ISA path, then restores the path selected before it."""
    with _restore_settings():
        _kernels.select_isa(name)
        yield


def same_bits_everywhere(run: Callable[[int], Sequence[Any]],
                         threads: Sequence[int] = THREAD_COUNTS) -> list[np.ndarray]:
    """In exact mode, run(n), with n threads set, gives the same bits on the selected path at
    every thread count as on the scalar path at one thread (copies are taken at once, so a run
    may reuse its buffers). Returns the selected path's result at the first thread count."""
    def bits(n: int) -> list[np.ndarray]:
        _config.set_num_threads(n)
        return [np.array(r, copy=True) for r in run(n)]

    with _restore_settings(), _config.mode("exact"):
        results = {(_kernels.selected_isa(), n): bits(n) for n in threads}
        with isa_path("scalar"):
            reference = bits(1)
    for key, arrays in results.items():
        assert len(arrays) == len(reference), (
            f"{key}: {len(arrays)} results, the scalar path gives {len(reference)}")
        for i, (a, b) in enumerate(zip(arrays, reference)):
            assert a.shape == b.shape and a.tobytes() == b.tobytes(), (
                f"result {i}: {key[0]} path at {key[1]} threads differs from scalar at 1 thread")
    return next(iter(results.values()))


def check_exact(fn: Callable, *inputs: Any, requires_grad: Optional[Sequence[bool]] = None,
                threads: Sequence[int] = THREAD_COUNTS, seed: int = 0) -> None:
    """In exact mode, every available ISA path at every thread count gives the same bits,
    forward and backward."""
    inputs = _arrays(inputs)
    flags = _flags(inputs, requires_grad)
    results = {}
    with _restore_settings(), _config.mode("exact"):
        for isa in _kernels.available_isas():
            _kernels.select_isa(isa)
            for n in threads:
                _config.set_num_threads(n)
                om_in = _om_inputs(inputs, flags)
                outs = _outputs(fn(*om_in))
                blobs = [o.detach().numpy().tobytes() for o in outs]
                if outs[0].requires_grad:
                    outs[0].backward(_upstream(outs[0].shape, seed))
                    blobs += [t.grad.numpy().tobytes() for t, f in zip(om_in, flags)
                              if f and t.grad is not None]
                results[(isa, n)] = blobs
    reference_key = next(iter(results))
    for key, blobs in results.items():
        assert blobs == results[reference_key], (
            f"exact mode: {key[0]} at {key[1]} threads differs from "
            f"{reference_key[0]} at {reference_key[1]} threads")


def special_values() -> np.ndarray:
    """±0, ±inf, NaN, denormals, the smallest normal, huge and ordinary magnitudes (float32)."""
    tiny = np.finfo(np.float32).tiny
    return np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 1e-40, -3e-39, tiny,
                     -tiny, 1e-30, 3e38, -3e38, np.finfo(np.float32).max, 1e10, -1e10, 88.7,
                     -88.7, 104.0, -104.0, 20.0, -20.0, 1.0, -1.0, 0.5, -0.5, 2.0, 3.0,
                     1e-7, -1e-7], np.float32)


@pytest.fixture(autouse=True)
def _fresh_process_state(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test starts as a fresh process would: the default generator at seed 0 (an unseeded
    layer draws the same weights whichever tests ran before), and a working folder of its own,
    so that a Python subprocess (`python -c`) imports the installed package even when the suite
    runs from the root of a clone, whose onemodel/ has no compiled kernels."""
    onemodel.manual_seed(0)
    monkeypatch.chdir(tmp_path)


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(1234)


@pytest.fixture(name="assert_close")
def _assert_close_fixture() -> Callable:
    return assert_close


@pytest.fixture(name="check_torch")
def _check_torch_fixture() -> Callable:
    return check_torch


@pytest.fixture(name="check_grad")
def _check_grad_fixture() -> Callable:
    return check_grad


@pytest.fixture(name="check_exact")
def _check_exact_fixture() -> Callable:
    return check_exact


@pytest.fixture(params=_kernels.available_isas())
def isa(request: pytest.FixtureRequest) -> Iterator[str]:
    """The test runs once per ISA path the machine has, on that path; the previous path is
    restored afterwards (in a forced-ISA job, the forced one)."""
    with isa_path(request.param):
        yield request.param


@pytest.fixture(name="same_bits_everywhere")
def _same_bits_everywhere_fixture() -> Callable:
    return same_bits_everywhere


@pytest.fixture(name="special_values")
def _special_values_fixture() -> np.ndarray:
    return special_values()
