import numpy as np
import numpy.typing as npt

CELLS: tuple[str, str]
DIRECTIONS_MAX: int

def forward(cell: str, dirs: list[dict[str, npt.NDArray[np.float32]]],
            lengths: npt.NDArray[np.int64], nthreads: int, half: int = 0) -> None: ...
def backward(cell: str, dirs: list[dict[str, npt.NDArray[np.float32]]],
             lengths: npt.NDArray[np.int64], nthreads: int, half: int = 0) -> None: ...
