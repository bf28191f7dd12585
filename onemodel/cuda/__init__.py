"""torch.cuda's questions, which ported scripts ask to choose their device, answered for a
library that runs on the CPU: `om.device("cuda" if om.cuda.is_available() else "cpu")`. The
calls scripts make unguarded do what they mean here: seeding CUDA's generators, waiting for
its queue and emptying its cache have nothing to act on (torch's seeding calls do nothing
without CUDA either; its synchronize() raises on a CPU-only build, ours returns, since there is
no queue to wait for)."""
from . import amp

__all__ = ["amp", "device_count", "empty_cache", "is_available", "manual_seed",
           "manual_seed_all", "synchronize"]


def is_available() -> bool:
    return False


def device_count() -> int:
    return 0


def _seed(seed: int, op: str) -> None:
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"{op}: seed must be an integer, got {seed!r}")


def manual_seed(seed: int) -> None:
    _seed(seed, "cuda.manual_seed")


def manual_seed_all(seed: int) -> None:
    _seed(seed, "cuda.manual_seed_all")


def synchronize(device: object = None) -> None:
    """Every onemodel op has finished when it returns."""


def empty_cache() -> None:
    """onemodel keeps no allocator cache."""
