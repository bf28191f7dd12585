"""Three models written once against a namespace (onemodel.examples.models), built in PyTorch and
in onemodel from the same weights, compared in forward, backward and five AdamW steps."""
import numpy as np
import pytest

import onemodel as om
import onemodel.functional as F
from onemodel import interop, nn, optim
from onemodel.examples import models

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.oracle


def _groups(params, decay):
    """Decay on matrices only, as docs/spec/pipeline.txt advises (nanoGPT's split)."""
    params = list(params)
    return [{"params": [p for p in params if p.ndim > 1], "weight_decay": decay},
            {"params": [p for p in params if p.ndim <= 1], "weight_decay": 0.0}]


def _compare(build, inputs, target_of, loss_name, steps=5, tol=1e-5):
    """Builds both models, loads torch's weights into ours, trains both for `steps` AdamW steps
    on the same batches; returns the scaled errors of the first gradients and of the losses."""
    from conftest import scaled_error

    torch.manual_seed(0)
    theirs = build(torch.nn, torch.nn.functional)
    ours = build(nn, F)
    interop.load_torch_state_dict(ours, theirs.state_dict())
    opt_t = torch.optim.AdamW(_groups(theirs.parameters(), 0.1), lr=3e-3)
    opt_o = optim.AdamW(_groups(ours.parameters(), 0.1), lr=3e-3)
    loss_t_fn = getattr(torch.nn.functional, loss_name)
    loss_o_fn = getattr(F, loss_name)
    losses = []
    for step in range(steps):
        batch = inputs(step)
        target = target_of(step)
        opt_t.zero_grad()
        out_t = theirs(*[torch.from_numpy(a) for a in batch])
        loss_t = loss_t_fn(out_t.reshape(-1, out_t.shape[-1]), torch.from_numpy(target))
        loss_t.backward()
        opt_o.zero_grad()
        out_o = ours(*[om.from_numpy(a) for a in batch])
        loss_o = loss_o_fn(out_o.reshape(-1, out_o.shape[-1]), target)
        loss_o.backward()
        if step == 0:
            grads = dict(theirs.named_parameters())
            for name, p in ours.named_parameters():
                err = scaled_error(p.grad.numpy(), grads[name].grad.numpy())
                assert err <= tol, f"{name}: gradient scaled error {err:.2e}"
        losses.append((loss_o.item(), loss_t.item()))
        opt_t.step()
        opt_o.step()
    ours_l, theirs_l = np.array(losses).T
    return float(np.max(np.abs(ours_l - theirs_l) / np.abs(theirs_l)))


def test_resnet_matches_pytorch():
    rng = np.random.default_rng(0)
    x = [rng.standard_normal((8, 3, 16, 16)).astype(np.float32) for _ in range(5)]
    y = [rng.integers(0, 10, 8) for _ in range(5)]
    error = _compare(models.build_resnet, lambda s: (x[s],), lambda s: y[s], "cross_entropy",
                     tol=2e-5)
    assert error < 1e-5
def test_gpt_matches_pytorch():
    rng = np.random.default_rng(1)
    tokens = [rng.integers(0, 50, (4, 17)) for _ in range(5)]
    positions = np.arange(16)
    error = _compare(lambda nn_, F_: models.build_gpt(nn_, F_, vocab=50, block=16),
                     lambda s: (tokens[s][:, :-1], positions), lambda s: tokens[s][:, 1:].ravel(),
                     "cross_entropy")
    assert error < 1e-5


def test_gpt_ties_the_output_layer_to_the_embedding():
    model = models.build_gpt(nn, F, vocab=30, block=8)
    names = [n for n, _ in model.named_parameters()]
    assert "wte.weight" in names and "lm_head.weight" not in names
    assert model.lm_head.weight is model.wte.weight


def test_sequence_classifier_matches_pytorch():
    rng = np.random.default_rng(2)
    tokens = [rng.integers(0, 40, (6, 24)) for _ in range(5)]
    labels = [rng.integers(0, 4, 6) for _ in range(5)]
    error = _compare(lambda nn_, F_: models.build_sequence_classifier(nn_, F_, vocab=40),
                     lambda s: (tokens[s],), lambda s: labels[s], "cross_entropy")
    assert error < 1e-5
