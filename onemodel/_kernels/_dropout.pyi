import numpy as np
import numpy.typing as npt

def forward(stream: int, threshold: int, scale: float, x: npt.NDArray[np.float32],
            y: npt.NDArray[np.float32], keep: npt.NDArray[np.uint8 | np.bool_],
            nthreads: int) -> None: ...
def backward(keep: npt.NDArray[np.uint8 | np.bool_], scale: float, g: npt.NDArray[np.float32],
             out: npt.NDArray[np.float32], nthreads: int) -> None: ...
