"""onemodel imported beside the other OpenMP and BLAS users a training script loads (PyTorch,
scikit-learn, numpy), in both orders: no crash, every library reports the thread count it
reports alone, and onemodel's training step gives the same bits (a wheel vendors its own
OpenMP runtime, which must live beside theirs). bench/coexist.py times the step."""
import json
import subprocess
import sys

import pytest

pytest.importorskip("torch")
pytest.importorskip("sklearn")

REPORT = """
import json, sys
for name in sys.argv[1:]:
    __import__(name)
import numpy as np
import threadpoolctl
report = {"pools": sorted({(p["internal_api"], p["num_threads"])
                           for p in threadpoolctl.threadpool_info()})}
if "onemodel" in sys.argv[1:]:
    import onemodel as om
    from onemodel.checkpoint import state_hash
    om.manual_seed(0)
    model = om.nn.Sequential(om.nn.Linear(64, 64), om.nn.ReLU(), om.nn.Linear(64, 10))
    opt = om.optim.AdamW(model.parameters(), lr=1e-3)
    x = om.tensor(np.random.default_rng(0).standard_normal((256, 64)).astype(np.float32))
    y = om.tensor(np.arange(256) % 10)
    for _ in range(3):
        opt.zero_grad()
        om.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    report["onemodel_threads"] = om.config()["num_threads"]
    report["state"] = state_hash(model, opt)
if "torch" in sys.argv[1:]:
    import torch
    report["torch_threads"] = torch.get_num_threads()
    report["torch_sum"] = float(torch.ones(1000).sum())
print(json.dumps(report))
"""


def _report(*modules: str) -> dict:
    run = subprocess.run([sys.executable, "-c", REPORT, *modules], capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 0, f"importing {modules} failed:\n{run.stderr[-2000:]}"
    return json.loads(run.stdout)


@pytest.fixture(scope="module")
def alone() -> dict:
    return {"onemodel": _report("onemodel"), "torch": _report("torch")}


@pytest.mark.slow
@pytest.mark.parametrize("order", [("onemodel", "torch", "sklearn"),
                                   ("torch", "sklearn", "onemodel")])
def test_beside_torch_and_sklearn(order, alone):
    together = _report(*order)
    assert together["state"] == alone["onemodel"]["state"]
    assert together["onemodel_threads"] == alone["onemodel"]["onemodel_threads"]
    assert together["torch_threads"] == alone["torch"]["torch_threads"]
    assert together["torch_sum"] == 1000.0
    # Every OpenMP and BLAS pool loaded keeps a count one of the libraries has alone.
    counts_alone = {n for _, n in alone["onemodel"]["pools"] + alone["torch"]["pools"]}
    assert {n for _, n in together["pools"]} <= counts_alone
