"""The deprecated size_average / reduce arguments of the losses choose the reduction as torch's
(with its deprecation warning), in the functions and the modules."""
import itertools

import numpy as np
import pytest

import onemodel as om

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.oracle

RNG = np.random.default_rng(0)
LOGITS = RNG.standard_normal((6, 5)).astype(np.float32)
CLASSES = np.array([0, 4, 2, 1, 3, 0])
TARGET = RNG.standard_normal((6, 5)).astype(np.float32)
PROBS = (1 / (1 + np.exp(-TARGET))).astype(np.float32)

# name -> (arguments after input, as numpy), from the functional namespace
LOSSES = {
    "nll_loss": (CLASSES,), "cross_entropy": (CLASSES,), "mse_loss": (TARGET,),
    "l1_loss": (TARGET,), "smooth_l1_loss": (TARGET,), "kl_div": (TARGET,),
    "binary_cross_entropy_with_logits": (PROBS,),
}
LEGACY = [kw for kw in ({"size_average": a, "reduce": r} for a, r in itertools.product(
    (None, True, False), repeat=2)) if kw != {"size_average": None, "reduce": None}]


def _value_and_grad(lib, name, kwargs, module=False):
    x = lib.tensor(LOGITS, requires_grad=True)
    rest = [lib.tensor(a) for a in LOSSES[name]]
    if module:
        cls = {"nll_loss": "NLLLoss", "cross_entropy": "CrossEntropyLoss", "mse_loss": "MSELoss",
               "l1_loss": "L1Loss", "smooth_l1_loss": "SmoothL1Loss", "kl_div": "KLDivLoss",
               "binary_cross_entropy_with_logits": "BCEWithLogitsLoss"}[name]
        out = getattr(lib.nn, cls)(**kwargs)(x, *rest)
    else:
        out = getattr(lib.nn.functional, name)(x, *rest, **kwargs)
    out.sum().backward()
    return out.detach().numpy(), x.grad.numpy()


@pytest.mark.parametrize("module", [False, True])
@pytest.mark.parametrize("kwargs", LEGACY, ids=str)
@pytest.mark.parametrize("name", list(LOSSES))
def test_legacy_arguments_reduce_as_torchs(name, kwargs, module):
    with pytest.warns(UserWarning, match="size_average and reduce args will be deprecated"):
        ours = _value_and_grad(om, name, kwargs, module)
    with pytest.warns(UserWarning, match="size_average and reduce args will be deprecated"):
        theirs = _value_and_grad(torch, name, kwargs, module)
    for a, b in zip(ours, theirs):
        assert a.shape == b.shape
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_legacy_arguments_override_reduction_as_torchs():
    with pytest.warns(UserWarning, match="reduction='sum' instead"):
        out = om.nn.functional.mse_loss(om.tensor(LOGITS), om.tensor(TARGET),
                                        size_average=False, reduction="none")
    assert out.shape == ()
    with pytest.warns(UserWarning, match="reduction='none' instead"):
        assert om.nn.MSELoss(reduce=False).reduction == "none"
