"""Batch norm's running statistics under mpiexec: a Trainer step leaves them as one process
running its M micro-batches in order (nn.running_stats), so the state, the evaluation and the
best checkpoint are the same for every worker count."""
import json
import textwrap

import pytest
from test_distributed import _mpirun, needs_mpi

# BatchNorm1d and Dropout; 62 samples in micro-batches of 5, the last of 2 (ragged, and still
# two values per channel); M = 12 micro-batches a step, so steps span epochs.
RUN = textwrap.dedent("""
    import hashlib, json, sys
    import numpy as np
    import onemodel as om
    import onemodel.functional as F
    from onemodel import checkpoint, distributed, nn
    from onemodel.data import DataLoader
    from onemodel.optim import AdamW
    from onemodel.train import Trainer

    out, folder = sys.argv[1], sys.argv[2]
    g = om.Generator(3)
    x = g.uniform(-1.0, 1.0, (62, 7)).numpy() * 3.0 + 0.5
    y = (x[:, 0] * x[:, 3] > 0.2).astype(np.int64)
    model = nn.Sequential(nn.Linear(7, 12, generator=g), nn.BatchNorm1d(12), nn.Tanh(),
                          nn.Dropout(0.3, seed=5), nn.Linear(12, 6, generator=g),
                          nn.BatchNorm1d(6, momentum=None), nn.Linear(6, 2, generator=g))
    opt = AdamW(model.parameters(), lr=5e-3, weight_decay=0.01)
    seen = {"steps": [], "evals": []}
    def record(info):
        if info["event"] == "step":
            seen["steps"].append(checkpoint.state_hash(model, opt))
        elif info["event"] == "eval":
            seen["evals"].append(info["loss"].hex())
    t = Trainer(model, F.cross_entropy, opt, DataLoader((x, y), 5, seed=8, shuffle=True),
                micro_batches=12, eval_loader=DataLoader((x[:23], y[:23]), 4),
                eval_every=2, checkpoint_dir=folder, checkpoint_every=2, best_metric="loss",
                callback=record, progress=False)
    t.fit(6)
    seen["world"] = distributed.world_size()
    seen["tracked"] = int(model[1].num_batches_tracked)
    if distributed.rank() == 0:  # the best checkpoint's metric and bytes
        best = open(f"{folder}/best.ckpt", "rb").read()
        seen["best"] = [t.manager.best_metric.hex(), hashlib.sha256(best).hexdigest()]
    with open(f"{out}.{distributed.rank()}", "w") as f:
        json.dump(seen, f)
""")


@pytest.mark.slow
@needs_mpi
def test_every_worker_count_gives_one_state_and_one_evaluation(tmp_path):
    pytest.importorskip("mpi4py")
    found = []
    for world in (1, 2, 3, 4):
        out, folder = tmp_path / f"out{world}", tmp_path / f"ckpt{world}"
        run = _mpirun(tmp_path, world, RUN, str(out), str(folder))
        assert run.returncode == 0, run.stderr[-3000:]
        for rank in range(world):
            seen = json.loads(open(f"{out}.{rank}").read())
            assert seen["world"] == world and len(seen["steps"]) == 6
            assert seen["tracked"] == 6 * 12  # every micro-batch of every worker counted
            found.append(seen)
    assert len({json.dumps(seen["steps"]) for seen in found}) == 1
    assert len({json.dumps(seen["evals"]) for seen in found}) == 1
    assert len({json.dumps(seen.get("best")) for seen in found if "best" in seen}) == 1
