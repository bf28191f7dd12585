import numpy as np
import numpy.typing as npt

F32 = npt.NDArray[np.float32]
I64 = npt.NDArray[np.int64]

def forward(log_probs: F32, targets: I64, offsets: I64, input_lengths: I64,
            target_lengths: I64, blank: int, alpha: F32, nll: F32, nthreads: int) -> None: ...
def backward(log_probs: F32, targets: I64, offsets: I64, input_lengths: I64,
             target_lengths: I64, blank: int, alpha: F32, nll: F32, scale: F32,
             zero_infinity: bool, grad: F32, nthreads: int) -> None: ...
