"""torch.backends and torch.accelerator as a library that runs on the CPU answers them: no
cuDNN, MPS or accelerator is ever available. cudnn's flags (`benchmark`, `deterministic`) may be
set, as reproducible PyTorch scripts do, and change nothing: onemodel's results are already the
same bits on every run and machine."""
from types import SimpleNamespace


def _no() -> bool:
    return False


cudnn = SimpleNamespace(enabled=False, benchmark=False, deterministic=True, is_available=_no)
mps = SimpleNamespace(is_available=_no, is_built=_no)
# torch.accelerator: `current_accelerator()` is None when none is available, as torch's.
accelerator = SimpleNamespace(is_available=_no, current_accelerator=lambda: None,
                              device_count=lambda: 0)


def use_deterministic_algorithms(mode: bool, *, warn_only: bool = False) -> None:
    """torch's switch to deterministic kernels: every onemodel op already is (in either mode of
    onemodel.set_mode), so there is nothing to switch; a non-bool mode is refused as torch's."""
    if not isinstance(mode, bool):
        raise TypeError(f"use_deterministic_algorithms: mode must be a bool, got {mode!r}")


def are_deterministic_algorithms_enabled() -> bool:
    """Always True: every onemodel op is deterministic
    (`torch.are_deterministic_algorithms_enabled`).
    """
    return True
