from typing import Optional

import numpy as np
import numpy.typing as npt

F32 = npt.NDArray[np.float32]
CELLS: tuple[str, str]

def set_isa(isa: int) -> None: ...
def forward(cell: str, xw: F32, w_hh: F32, bias: F32, h0: F32, c0: Optional[F32],
            lengths: npt.NDArray[np.int64], y: F32, gates: F32, cs: Optional[F32],
            hn_lin: Optional[F32], h_n: F32, c_n: Optional[F32], nthreads: int) -> None: ...
def backward(cell: str, w_hh: F32, h0: F32, c0: Optional[F32], lengths: npt.NDArray[np.int64],
             y: F32, gates: F32, cs: Optional[F32], hn_lin: Optional[F32], gy: F32, g_hn: F32,
             g_cn: Optional[F32], dgx: F32, dgh: Optional[F32], dh0: F32, dc0: Optional[F32],
             nthreads: int) -> None: ...
