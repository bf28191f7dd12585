from typing import Literal

import numpy as np
import numpy.typing as npt

Op = Literal["exp", "log", "tanh", "sigmoid", "erf", "softplus", "gelu", "gelu_tanh",
             "relu", "sin", "cos", "expm1", "log1p"]
OPS: tuple[Op, ...]

def saves_output(op: Op) -> bool: ...
def unary(op: Op, x: npt.NDArray[np.float32], out: npt.NDArray[np.float32],
          nthreads: int) -> None: ...
def unary_backward(op: Op, saved: npt.NDArray[np.float32], grad: npt.NDArray[np.float32],
                   out: npt.NDArray[np.float32], nthreads: int) -> None: ...
def ulp_sweep(op: Op, start: int, stop: int, nthreads: int) -> tuple[float, int, int]: ...
