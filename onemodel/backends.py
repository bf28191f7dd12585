"""torch.backends and torch.accelerator as a library that runs on the CPU answers them: no
cuDNN, MPS or accelerator is ever available. cudnn's flags (`benchmark`, `deterministic`,
`allow_tf32`), CUDA's matmul flags and the float32 matmul precision may be set, as PyTorch
scripts do, and change nothing: onemodel's float32 products are always float32's, the same bits
on every run and machine. torch.compile is the model itself."""
import warnings
from types import SimpleNamespace
from typing import Any, Callable


def _no() -> bool:
    return False


cudnn = SimpleNamespace(enabled=False, benchmark=False, deterministic=True, allow_tf32=True,
                        is_available=_no)
# torch.backends.cuda: its defaults, which only CUDA's kernels would read
cuda = SimpleNamespace(is_built=_no, matmul=SimpleNamespace(
    allow_tf32=False, allow_fp16_reduced_precision_reduction=True,
    allow_bf16_reduced_precision_reduction=True))
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


_PRECISIONS = ("highest", "high", "medium")
_matmul_precision = "highest"


def set_float32_matmul_precision(precision: str) -> None:
    """Recorded for get_float32_matmul_precision; onemodel's products stay float32 (TF32 and
    bfloat16 passes are CUDA's and oneDNN's). An unknown name warns and changes nothing, as
    torch's."""
    global _matmul_precision
    if precision not in _PRECISIONS:
        warnings.warn(f"{precision} is not one of 'highest', 'high', or 'medium'; the current "
                      "set_float32_matmul_precision call has no effect.", UserWarning,
                      stacklevel=2)
        return
    _matmul_precision = precision


def get_float32_matmul_precision() -> str:
    return _matmul_precision


def compile(model: Any = None, *, fullgraph: bool = False, dynamic: Any = None,
            backend: Any = "inductor", mode: Any = None, options: Any = None,
            disable: bool = False) -> Any:
    """torch.compile: the model (or function) itself, which already runs onemodel's kernels;
    with no model, a decorator that returns what it decorates."""
    if model is None:
        def decorate(fn: Callable) -> Callable:
            return fn
        return decorate
    if not callable(model):
        raise TypeError(f"compile: expected a Module or a function, got {type(model).__name__}")
    return model
