from typing import Optional

import numpy as np
import numpy.typing as npt

F32 = npt.NDArray[np.float32]
I64 = npt.NDArray[np.int64]

def conv2d_forward(x: F32 | npt.NDArray[np.uint16], w: F32, b: Optional[F32], y: F32,
                   stride: tuple[int, int], padding: tuple[int, int],
                   dilation: tuple[int, int], groups: int, nthreads: int, half: int = 0,
                   save_x: Optional[npt.NDArray[np.uint16]] = None) -> None: ...
def conv2d_backward(x: F32 | npt.NDArray[np.uint16], w: F32, gy: F32, gx: Optional[F32],
                    gw: Optional[F32], gb: Optional[F32], stride: tuple[int, int],
                    padding: tuple[int, int], dilation: tuple[int, int], groups: int,
                    nthreads: int, half: int = 0) -> None: ...
def max_pool2d(x: F32, y: F32, idx: I64, hs: I64, he: I64, ws: I64, we: I64, sh: int, sw: int,
               nthreads: int) -> None: ...
def max_pool2d_backward(gy: F32, idx: I64, gx: F32, hs: I64, he: I64, ws: I64, we: I64,
                        nthreads: int) -> None: ...
def avg_pool2d(x: F32, y: F32, hs: I64, he: I64, ws: I64, we: I64, dh: I64, dw: I64,
               nthreads: int) -> None: ...
def avg_pool2d_backward(gy: F32, gx: F32, hs: I64, he: I64, ws: I64, we: I64, dh: I64,
                        dw: I64, nthreads: int) -> None: ...
def batch_norm_stats(x: F32 | npt.NDArray[np.uint16], eps: float, mean: F32, var: F32,
                     var_unbiased: F32, invstd: F32, nthreads: int, half: int = 0,
                     save: Optional[npt.NDArray[np.uint16]] = None) -> None: ...
def batch_norm_apply(x: F32 | npt.NDArray[np.uint16], mean: F32, invstd: F32, w: F32, b: F32,
                     y: F32, nthreads: int, half: int = 0,
                     save: Optional[npt.NDArray[np.uint16]] = None) -> None: ...
def batch_norm_backward(x: F32 | npt.NDArray[np.uint16], gy: F32, mean: F32, invstd: F32,
                        w: F32, gx: Optional[F32], gw: Optional[F32], gb: Optional[F32],
                        batch_stats: bool, nthreads: int, half: int = 0) -> None: ...
