import numpy as np
import numpy.typing as npt

def bf16_dot_available() -> bool: ...
def bf16_dot(on: bool | None = None) -> bool: ...
def bf16_dot_chosen() -> bool: ...
HALF_NAMES: tuple[None | str, ...]
KC: int

def gemm(a: npt.NDArray[np.float32 | np.uint16], b: npt.NDArray[np.float32 | np.uint16],
         out: npt.NDArray[np.float32], trans_a: bool, trans_b: bool, nthreads: int,
         bias: npt.NDArray[np.float32] | None = None, half: int = 0,
         save_a: npt.NDArray[np.uint16] | None = None,
         save_b: npt.NDArray[np.uint16] | None = None, add: bool = False) -> None: ...
