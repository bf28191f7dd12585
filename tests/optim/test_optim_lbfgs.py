"""LBFGS (docs/spec/optimizers.md, "LBFGS"): least squares and Rosenbrock against torch.optim.LBFGS
with and without the strong-Wolfe line search, the same bits on every ISA path and thread count,
and its arguments and limits refused by name."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import onemodel as om
from onemodel import checkpoint, nn, optim


def least_squares(seed: int = 0, rows: int = 20, cols: int = 5):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((rows, cols)).astype(np.float32),
            rng.standard_normal(rows).astype(np.float32))


def om_problem(kind: str, A=None, b=None, **settings):
    """An onemodel LBFGS on the problem, its closure and the losses the closure saw."""
    if kind == "lstsq":
        x = om.tensor(np.zeros(A.shape[1], np.float32), requires_grad=True)
        oA, ob = om.tensor(A), om.tensor(b)
    else:
        x = om.tensor(np.array([-1.5, 2.0], np.float32), requires_grad=True)
    opt = optim.LBFGS([x], **settings)
    seen: list = []

    def closure():
        opt.zero_grad()
        loss = (((oA @ x - ob) ** 2).sum() if kind == "lstsq"
                else (1 - x[0]) ** 2 + 100 * (x[1] - x[0] ** 2) ** 2)
        loss.backward()
        seen.append(loss.item())
        return loss

    return x, opt, closure, seen


def torch_problem(torch, kind: str, A=None, b=None, **settings):
    if kind == "lstsq":
        x = torch.zeros(A.shape[1], requires_grad=True)
        tA, tb = torch.tensor(A), torch.tensor(b)
    else:
        x = torch.tensor([-1.5, 2.0], requires_grad=True)
    opt = torch.optim.LBFGS([x], **settings)
    seen: list = []

    def closure():
        opt.zero_grad()
        loss = (((tA @ x - tb) ** 2).sum() if kind == "lstsq"
                else (1 - x[0]) ** 2 + 100 * (x[1] - x[0] ** 2) ** 2)
        loss.backward()
        seen.append(loss.item())
        return loss

    return x, opt, closure, seen


@pytest.mark.parametrize("line_search_fn", [None, "strong_wolfe"])
def test_least_squares_against_torch_and_lstsq(line_search_fn):
    torch = pytest.importorskip("torch")
    A, b = least_squares()
    ox, oopt, oclosure, oseen = om_problem("lstsq", A, b, max_iter=50,
                                           line_search_fn=line_search_fn)
    tx, topt, tclosure, tseen = torch_problem(torch, "lstsq", A, b, max_iter=50,
                                              line_search_fn=line_search_fn)
    for _ in range(3):
        start = len(oseen)
        first = oopt.step(oclosure)
        assert isinstance(first, om.Tensor) and first.item() == oseen[start]
        topt.step(tclosure)
    # The same iterations until float32 rounding decides when to stop.
    np.testing.assert_allclose(oseen[:6], tseen[:6], rtol=1e-5)
    exact = np.linalg.lstsq(A.astype(np.float64), b.astype(np.float64), rcond=None)[0]
    np.testing.assert_allclose(ox.detach().numpy(), exact, atol=1e-4)
    np.testing.assert_allclose(ox.detach().numpy(), tx.detach().numpy(), atol=1e-4)
    assert oopt.step_count == 3


@pytest.mark.parametrize("line_search_fn, lr", [(None, 1.0), (None, 0.1), ("strong_wolfe", 1.0)])
def test_rosenbrock_against_torch(line_search_fn, lr):
    torch = pytest.importorskip("torch")
    ox, oopt, oclosure, oseen = om_problem("rosenbrock", lr=lr, line_search_fn=line_search_fn)
    tx, topt, tclosure, tseen = torch_problem(torch, "rosenbrock", lr=lr,
                                              line_search_fn=line_search_fn)
    oopt.step(oclosure)
    topt.step(tclosure)
    assert len(oseen) == len(tseen)
    # Rosenbrock's valley amplifies rounding: the first evaluations agree closely.
    np.testing.assert_allclose(oseen[:12], tseen[:12], rtol=1e-4)
    if line_search_fn:
        for _ in range(9):
            oopt.step(oclosure)
            topt.step(tclosure)
        np.testing.assert_allclose(ox.detach().numpy(), [1.0, 1.0], atol=1e-4)
        np.testing.assert_allclose(tx.detach().numpy(), [1.0, 1.0], atol=1e-4)


def test_step_returns_the_first_loss_and_stops_at_an_optimum():
    A, b = least_squares()
    x, opt, closure, seen = om_problem("lstsq", A, b)
    loss = opt.step(closure)
    assert loss.item() == seen[0] and 1 < len(seen) <= 20  # at most max_iter evaluations
    stuck, opt, closure, seen = om_problem("lstsq", np.zeros((3, 2), np.float32),
                                           np.zeros(3, np.float32))
    assert opt.step(closure).item() == 0.0 and len(seen) == 1  # gradient 0: nothing moves
    assert (stuck.detach().numpy() == 0.0).all()


def test_same_bits_on_every_path_and_thread_count(isa, same_bits_everywhere):
    A, b = least_squares(1, rows=400, cols=300)

    def run(n):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            x, opt, closure, _ = om_problem("lstsq", A, b, max_iter=8,
                                            line_search_fn="strong_wolfe")
            opt.step(closure)
        return [x.detach().numpy()]

    same_bits_everywhere(run)


def test_arguments_refused_by_name():
    p = om.tensor(np.ones(2, np.float32), requires_grad=True)
    for settings, match in [({"lr": -1.0}, "lr"), ({"max_iter": 0}, "max_iter"),
                            ({"max_eval": 1.5}, "max_eval"),
                            ({"history_size": True}, "history_size"),
                            ({"tolerance_grad": -1.0}, "tolerance_grad"),
                            ({"tolerance_change": "x"}, "tolerance_change"),
                            ({"line_search_fn": "armijo"}, "line_search_fn")]:
        with pytest.raises(ValueError, match=f"LBFGS.*{match}"):
            optim.LBFGS([p], **settings)
    with pytest.raises(ValueError, match="LBFGS: parameter groups"):
        optim.LBFGS([{"params": [p]}])
    opt = optim.LBFGS([p])
    assert opt.param_groups[0]["max_eval"] == 25  # max_iter * 5 // 4, as torch
    with pytest.raises(TypeError, match="LBFGS.step: closure is required"):
        opt.step()
    with pytest.raises(TypeError, match="LBFGS.step: closure must be callable"):
        opt.step(1.0)
    assert opt.step_count == 0 and (p.detach().numpy() == 1.0).all()


def test_state_is_refused_by_state_dict_and_checkpoints():
    m = nn.Linear(2, 1)
    opt = optim.LBFGS(m.parameters())
    with pytest.raises(ValueError, match="LBFGS: its state"):
        opt.state_dict()
    with pytest.raises(ValueError, match="LBFGS: its state"):
        checkpoint.to_bytes(m, opt)
