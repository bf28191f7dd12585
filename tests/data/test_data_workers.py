"""DataLoader(num_workers > 0): worker processes that yield the batches of num_workers=0 in the
same order (random augmentations, shuffling, sharding, resume included), errors re-raised
naming the worker, timeouts, dead workers, worker_init_fn and get_worker_info, persistent
workers, and a clean shutdown when a loop breaks, an iterator is dropped or the process ends."""
import gc
import multiprocessing
import os
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import onemodel as om
from onemodel.utils import data as od


class Augmented(od.Dataset):
    """Examples with a random part drawn from the default generator, and the reading pid."""

    def __init__(self, n=23):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return {"x": om.rand(3).numpy() + i, "i": i}


def _values(loader):
    return [(b["x"].numpy().tolist(), b["i"].numpy().tolist()) for b in loader]


def _no_workers_left():
    for _ in range(50):
        if not multiprocessing.active_children():
            return True
        time.sleep(0.1)
    return False


@pytest.mark.parametrize("workers", [1, 2, 3])
def test_workers_yield_the_batches_of_no_workers(workers):
    kwargs = dict(batch_size=4, shuffle=True, seed=5)
    want = _values(od.DataLoader(Augmented(), **kwargs))
    loader = od.DataLoader(Augmented(), num_workers=workers, **kwargs)
    assert _values(loader) == want
    second = od.DataLoader(Augmented(), **kwargs)
    second.set_epoch(1)
    assert _values(loader) == _values(second) != want
    assert _no_workers_left()


def test_workers_with_arrays_shards_and_resume():
    x = np.arange(40, dtype=np.float32).reshape(20, 2)
    y = np.arange(20)
    for kwargs in (dict(batch_size=3, shuffle=True, seed=1), dict(batch_size=6),
                   dict(batch_size=3, shuffle=True, rank=1, world_size=2)):
        want = [[t.numpy().tolist() for t in b] for b in od.DataLoader((x, y), **kwargs)]
        got = [[t.numpy().tolist() for t in b]
               for b in od.DataLoader((x, y), num_workers=2, **kwargs)]
        assert got == want
    resumed = od.DataLoader(Augmented(), 4, shuffle=True, seed=5, num_workers=2,
                            prefetch_factor=1)
    resumed.load_state_dict({"epoch": 0, "position": 3})
    assert _values(resumed) == _values(od.DataLoader(Augmented(), 4, shuffle=True, seed=5))[3:]


class Failing(od.Dataset):
    def __len__(self):
        return 10

    def __getitem__(self, i):
        if i == 5:
            raise KeyError("example 5 is missing")
        return i


def test_an_error_in_a_worker_is_raised_naming_the_worker():
    loader = od.DataLoader(Failing(), 2, num_workers=2)
    with pytest.raises(KeyError, match=r"Caught KeyError in DataLoader worker process 0\.\n"
                                       r"Original Traceback(.|\n)*example 5 is missing"):
        list(loader)
    assert _no_workers_left()

    def broken_init(worker_id):
        if worker_id == 1:
            raise ValueError("no setup for worker 1")

    with pytest.raises(ValueError, match="worker process 1(.|\n)*no setup for worker 1"):
        list(od.DataLoader(Failing(), 1, num_workers=2, worker_init_fn=broken_init))


class Slow(od.Dataset):
    def __len__(self):
        return 4

    def __getitem__(self, i):
        time.sleep(3)
        return i


class Dying(od.Dataset):
    def __len__(self):
        return 4

    def __getitem__(self, i):
        os._exit(3)


def test_timeouts_and_dead_workers_raise():
    with pytest.raises(RuntimeError, match=r"DataLoader timed out after 0\.5 seconds"):
        next(iter(od.DataLoader(Slow(), 1, num_workers=1, timeout=0.5)))
    with pytest.raises(RuntimeError, match=r"DataLoader worker \(pid\(s\) \[\d+\]\) exited "
                                           "unexpectedly"):
        next(iter(od.DataLoader(Dying(), 1, num_workers=1)))
    assert _no_workers_left()


class WhoReads(od.Dataset):
    def __len__(self):
        return 8

    def __getitem__(self, i):
        info = od.get_worker_info()
        return [os.getpid(), info.id, info.num_workers, info.seed, int(os.environ["MARK"])]


def test_worker_info_init_fn_and_persistent_workers():
    def mark(worker_id):
        os.environ["MARK"] = str(100 + worker_id)

    loader = od.DataLoader(WhoReads(), 1, num_workers=2, worker_init_fn=mark,
                           persistent_workers=True, collate_fn=lambda b: b[0])
    first = list(loader)
    assert [r[1] for r in first] == [0, 1] * 4 and {r[2] for r in first} == {2}
    assert [r[4] for r in first] == [100, 101] * 4
    seeds = {r[1]: r[3] for r in first}
    assert seeds[1] == seeds[0] + 1 and os.getpid() not in {r[0] for r in first}
    pids = {r[0] for r in first}
    assert {r[0] for r in list(loader)} == pids  # the same processes serve the next epoch
    assert len(multiprocessing.active_children()) == 2
    del loader
    gc.collect()
    assert _no_workers_left()
    assert od.get_worker_info() is None


def test_workers_stop_when_the_loop_breaks_or_the_iterator_is_dropped():
    loader = od.DataLoader(Augmented(200), 2, num_workers=2)
    for i, _ in enumerate(loader):
        if i == 3:
            break
    assert _no_workers_left()
    it = iter(loader)
    next(it)
    assert multiprocessing.active_children()
    del it
    gc.collect()
    assert _no_workers_left()
    next(iter(loader))
    gc.collect()
    assert _no_workers_left()


def test_spawned_workers_give_the_same_batches():
    x = np.arange(30)
    want = [b.numpy().tolist() for b in od.DataLoader(x, 4, shuffle=True)]
    got = [b.numpy().tolist() for b in od.DataLoader(x, 4, shuffle=True, num_workers=2,
                                                     multiprocessing_context="spawn")]
    assert got == want


def test_the_process_exits_with_an_iterator_still_open(tmp_path):
    script = textwrap.dedent("""
        import numpy as np
        from onemodel.utils.data import DataLoader
        loader = DataLoader(np.arange(1000), 2, num_workers=2)
        it = iter(loader)
        print(next(it).numpy().tolist())
    """)
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "[0, 1]", done.stderr
