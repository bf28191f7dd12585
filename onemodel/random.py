"""Generator: SplitMix64 (Steele, Lea and Flood 2014), the source of every initial weight.

Each draw adds the golden-ratio
increment to the state and returns mix(state); next_single() is float32((u >> 40) / 2^24), exact;
uniform(a, b) is a + (b - a)·u with a, b float32 and each operation one float32 IEEE operation. Bulk
draws are vectorised in numpy uint64 arithmetic, which wraps modulo 2^64 as the definition does.

`default_generator` is the process default (PyTorch's name), seeded 0 at import: modules built
without `generator=` or `seed=` draw their initial weights from it, an unseeded Dropout takes
its seed from it, and functional.dropout without `seed=` takes a fresh stream from it per call.
Its whole state is one 64-bit integer, so get_rng_state() returns it as a signed 64-bit
integer (what a checkpoint's extra integers carry) and set_rng_state() takes it back.
"""
from __future__ import annotations

import math
from typing import Any, Callable, Iterator, Optional

import numpy as np

from ._kernels import _vmath
from .autograd import no_grad
from .tensor import Tensor, check_device, is_float32
from .tensor import device as _device

GOLDEN = 0x9E3779B97F4A7C15
MASK64 = (1 << 64) - 1
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_TWO_M24 = np.float32(2.0 ** -24)


def mix(z: int) -> int:
    """The SplitMix64 output function alone, on one unsigned 64-bit integer."""
    z &= MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return z ^ (z >> 31)


def advanced(state: int, draws: int) -> int:
    """The state `draws` outputs after `state`: a SplitMix64 state moves by GOLDEN a draw."""
    return (state + draws * GOLDEN) & MASK64


_GOLDEN_INVERSE = pow(GOLDEN, -1, 1 << 64)


def draws_between(before: int, after: int) -> int:
    """The n with advanced(before, n) == after, in [0, 2^64): the draws from one to the other."""
    return ((after - before) * _GOLDEN_INVERSE) & MASK64


def mix_array(z: np.ndarray) -> np.ndarray:
    """mix() on every element of a uint64 array (overwrites and returns it)."""
    z ^= z >> np.uint64(30)
    z *= _M1
    z ^= z >> np.uint64(27)
    z *= _M2
    z ^= z >> np.uint64(31)
    return z


# Outputs are made in blocks of this many: 128 KiB of uint64 stays in cache through the
# passes of mix_array, about three times faster than one pass over a large array.
_BLOCK = 1 << 14


def splitmix_blocks(state: int, n: int) -> Iterator[tuple[int, np.ndarray]]:
    """Yields (start, bits): the outputs mix(state + k·GOLDEN), k = start+1 .. start+len(bits),
    in order, until n. `bits` is a buffer reused by the next block."""
    steps = np.arange(1, min(n, _BLOCK) + 1, dtype=np.uint64) * np.uint64(GOLDEN)
    buffer = np.empty_like(steps)
    for start in range(0, n, _BLOCK):
        z = buffer[:min(_BLOCK, n - start)]
        np.add(steps[:len(z)], np.uint64(advanced(state, start)), out=z)
        yield start, mix_array(z)


def _seed_int(seed: Any, what: str) -> int:
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise TypeError(f"{what}: seed must be an integer, got {type(seed).__name__}")
    return int(seed) & MASK64


class Generator:
    """SplitMix64 generator; the seed is taken modulo 2^64 (so -1 is 2^64 - 1)."""

    def __init__(self, seed: Any = 0, *, device: Any = None) -> None:
        # torch's Generator takes only a device (Generator("cpu"), Generator(device="cpu")).
        if isinstance(seed, (str, _device)):
            if device is not None:
                raise TypeError("Generator: got a device both positionally and as device=")
            seed, device = 0, seed
        check_device(device, "Generator")
        self._state = _seed_int(seed, "Generator")

    @property
    def device(self) -> _device:
        return _device("cpu")

    def manual_seed(self, seed: int) -> "Generator":
        """Restarts the stream as Generator(seed) would; returns self (as PyTorch)."""
        self._state = _seed_int(seed, "manual_seed")
        return self

    @property
    def state(self) -> int:
        """The 64-bit state; setting it resumes the stream from that point."""
        return self._state

    @state.setter
    def state(self, value: int) -> None:
        self._state = _seed_int(value, "Generator.state")

    def next_u64(self) -> int:
        self._state = advanced(self._state, 1)
        return mix(self._state)

    def next_single(self) -> float:
        """The next draw as a float32 in [0, 1), returned as the Python float of that value."""
        return float(np.float32(self.next_u64() >> 40) * _TWO_M24)

    def uniform(self, a: float, b: float, shape: Any = ()) -> Tensor:
        """A float32 tensor of the given shape filled in row-major order with a + (b - a)·u."""
        shape = (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(
            int(s) for s in shape)
        if any(s < 0 for s in shape):
            raise ValueError(f"Generator.uniform: negative dimension in shape {shape}")
        n = int(np.prod(shape, dtype=np.int64))
        lo, hi = np.float32(a), np.float32(b)
        span = hi - lo
        out = np.empty(n, np.float32)
        for start, bits in splitmix_blocks(self._state, n):
            o = out[start:start + len(bits)]
            np.right_shift(bits, np.uint64(40), out=bits)
            o[...] = bits  # 24-bit integers: exact in float32
            # u = k·2^-24 is exact; then one float32 multiply and one add, never fused.
            o *= _TWO_M24
            o *= span
            o += lo
        self._state = advanced(self._state, n)
        return Tensor._wrap(out.reshape(shape))

    def __repr__(self) -> str:
        return f"Generator(state=0x{self._state:016x})"


default_generator = Generator(0)


def _size(size: tuple, op: str, keyword: Any = None) -> tuple[int, ...]:
    """PyTorch's size arguments: rand(2, 3), rand((2, 3)) or rand(size=(2, 3))."""
    if keyword is not None:
        if size:
            raise TypeError(f"{op}: got the size both as arguments {size!r} and as "
                            f"size={keyword!r}")
        size = (keyword,)
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = tuple(size[0])
    if not all(isinstance(s, (int, np.integer)) and not isinstance(s, bool) for s in size):
        raise TypeError(f"{op}: size must be integers, got {size!r}")
    if any(s < 0 for s in size):
        raise ValueError(f"{op}: negative dimension in size {tuple(size)}")
    return tuple(int(s) for s in size)


def _draw_u64(generator: Optional[Generator], n: int) -> np.ndarray:
    """The generator's next n outputs (advancing it past them)."""
    g = default_generator if generator is None else generator
    out = np.empty(n, np.uint64)
    for start, bits in splitmix_blocks(g.state, n):
        out[start:start + len(bits)] = bits
    g.state = advanced(g.state, n)
    return out


_NORMAL_BATCH = 1 << 12  # pairs tried per pass of the polar method


def standard_normals(generator: Generator, n: int,
                      keep: Optional[Callable[[np.ndarray], np.ndarray]] = None) -> np.ndarray:
    """The first n accepted N(0, 1) draws in float32, by Marsaglia's polar method.

    Pairs (u, v) of Uniform(−1, 1) with 0 < s = u² + v² < 1 give u·f and v·f, f = √(−2 ln s / s),
    in that order; `keep` may reject values further (truncation). Only + − × ÷, IEEE sqrt and
    the exact log kernel are used, so the values are the same on every platform; the generator
    advances past the last pair used, exactly as a one-pair-at-a-time loop would.
    """
    start = generator.state
    found: list[np.ndarray] = []
    have = pairs = 0
    while have < n:
        g = Generator()
        g.state = advanced(start, 2 * pairs)
        uv = g.uniform(-1.0, 1.0, (_NORMAL_BATCH, 2))._data
        s = uv[:, 0] * uv[:, 0] + uv[:, 1] * uv[:, 1]
        inside = (s > 0) & (s < 1)
        s = np.where(inside, s, np.float32(0.5))
        log_s = np.empty_like(s)
        _vmath.unary("log", s, log_s, 1)  # the exact kernel: F.log's bits
        f = np.sqrt(np.float32(-2) * log_s / s)
        z = uv * f[:, None]
        ok = np.repeat(inside[:, None], 2, axis=1) & (keep(z) if keep else True)
        index = np.nonzero(ok.ravel())[0]
        found.append(np.stack([z.ravel()[index], pairs + index // 2]))
        have += len(index)
        pairs += _NORMAL_BATCH
    values, pair_of = np.concatenate(found, axis=1)[:, :n]
    used = int(pair_of[-1]) + 1 if n else 0
    generator.state = advanced(start, 2 * used)
    return values.astype(np.float32)


def resolve_generator(generator: Optional[Generator], seed: Optional[int] = None) -> Generator:
    """`generator` itself when given, else Generator(seed), else the default generator."""
    if generator is None:
        return default_generator if seed is None else Generator(seed)
    if not isinstance(generator, Generator):
        raise TypeError(f"generator must be an onemodel.Generator, got "
                        f"{type(generator).__name__}")
    return generator


# -- in place: torch.nn.init's uniform_ and normal_, which Tensor.uniform_ and Tensor.normal_
# call too. Each fills an existing tensor under no_grad (identity, optimizer references and the
# graph stay valid), as PyTorch's do, and returns it.

def _fill(tensor: Tensor, values: Any) -> Tensor:
    with no_grad():
        tensor.copy_(values)
    return tensor


def _check_tensor(tensor: Any, op: str) -> None:
    if not isinstance(tensor, Tensor):
        raise TypeError(f"{op}: tensor must be an onemodel Tensor, got {type(tensor).__name__}")


def _float_target(tensor: Any, op: str) -> tuple:
    _check_tensor(tensor, op)
    if tensor.dtype != np.float32:
        raise TypeError(f"{op}: tensor must be float32, got {tensor.dtype} (shape "
                        f"{tuple(tensor.shape)})")
    return tuple(tensor.shape)


def uniform_(tensor: Tensor, a: float = 0.0, b: float = 1.0,
             generator: Optional[Generator] = None) -> Tensor:
    """Fills tensor with Uniform(a, b) = a + (b − a)·u in float32, row-major."""
    shape = _float_target(tensor, "uniform_")
    if not a <= b:
        raise ValueError(f"uniform_: a must be <= b, got a={a}, b={b}")
    return _fill(tensor, resolve_generator(generator).uniform(a, b, shape))


def _check_std(std: float, op: str) -> None:
    if not std >= 0:
        raise ValueError(f"{op}: std must be >= 0, got {std}")


def normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0,
            generator: Optional[Generator] = None) -> Tensor:
    """Fills tensor with N(mean, std²): mean + std·z in float32, z from the polar method."""
    shape = _float_target(tensor, "normal_")
    _check_std(std, "normal_")
    z = standard_normals(resolve_generator(generator), math.prod(shape))
    return _fill(tensor, (np.float32(mean) + np.float32(std) * z).reshape(shape))


def _float32_draws(dtype: Any, op: str) -> None:
    if dtype is not None and not is_float32(dtype):
        raise TypeError(f"{op}: the draws are float32, got dtype={dtype!r}")


def rand(*shape: Any, generator: Optional[Generator] = None, requires_grad: bool = False,
         device: Any = None, size: Any = None, dtype: Any = None) -> Tensor:
    """Uniform [0, 1) float32 draws (Generator.uniform), from the default generator unless
    `generator` is given."""
    check_device(device, "rand")
    _float32_draws(dtype, "rand")
    g = default_generator if generator is None else generator
    return g.uniform(0.0, 1.0, _size(shape, "rand", size))._set_requires_grad(requires_grad)


def randn(*shape: Any, generator: Optional[Generator] = None, requires_grad: bool = False,
          device: Any = None, size: Any = None, dtype: Any = None) -> Tensor:
    """Standard normal float32 draws (Marsaglia's polar method: standard_normals)."""
    check_device(device, "randn")
    _float32_draws(dtype, "randn")
    shape = _size(shape, "randn", size)
    g = default_generator if generator is None else generator
    z = standard_normals(g, int(np.prod(shape, dtype=np.int64))).reshape(shape)
    return Tensor._wrap(z)._set_requires_grad(requires_grad)


def rand_like(input: Tensor, *, dtype: Any = None, generator: Optional[Generator] = None,
              requires_grad: bool = False, device: Any = None) -> Tensor:
    """rand of input's shape; the draws are float32, so input (or dtype) must be too."""
    return rand(_float_shape(input, dtype, "rand_like"), generator=generator,
                requires_grad=requires_grad, device=device)


def randn_like(input: Tensor, *, dtype: Any = None, generator: Optional[Generator] = None,
               requires_grad: bool = False, device: Any = None) -> Tensor:
    """Standard normal draws of the input's shape, as `torch.randn_like`; the draws are
    float32, so the input (or `dtype`) must be too.

    Parameters
    ----------
    input : Tensor
        Gives the shape.
    dtype : dtype, optional
        float32 only.
    generator : Generator, optional
        The stream to draw from (default `om.default_generator`).
    requires_grad : bool, optional
        Record operations on the result (default False).
    device : str or device, optional
        Only the CPU is accepted.
    """
    return randn(_float_shape(input, dtype, "randn_like"), generator=generator,
                 requires_grad=requires_grad, device=device)


def _float_shape(input: Any, dtype: Any, op: str) -> tuple:
    if not isinstance(input, Tensor):
        raise TypeError(f"{op}: expected a Tensor, got {type(input).__name__}")
    wanted = input.dtype if dtype is None else dtype
    if not is_float32(wanted):
        raise TypeError(f"{op}: the draws are float32, got dtype {wanted} (a tensor of shape "
                        f"{tuple(input.shape)}); randint draws integers")
    return tuple(input.shape)


def randint(low: int, high: Optional[int] = None, size: Any = (),
            generator: Optional[Generator] = None, *, device: Any = None) -> Tensor:
    """int64 draws in [low, high) (PyTorch's randint(high, size) and randint(low, high, size)):
    floor(u * (high - low)) + low with u = the top 53 bits of a draw / 2^53."""
    check_device(device, "randint")
    if high is None or (size == () and isinstance(high, (tuple, list))):
        low, high, size = 0, low, (() if high is None else high)
    for name, value in (("low", low), ("high", high)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise TypeError(f"randint: {name} must be an integer, got {value!r}")
    if not low < high:
        raise ValueError(f"randint: low must be < high, got low={low}, high={high}")
    if high - low > 2 ** 53:
        raise ValueError(f"randint: the range [{low}, {high}) is wider than 2^53")
    shape = _size(tuple(size) if isinstance(size, (tuple, list)) else (size,), "randint")
    bits = _draw_u64(generator, int(np.prod(shape, dtype=np.int64)))
    u = (bits >> np.uint64(11)).astype(np.float64) * 2.0 ** -53
    values = np.floor(u * float(high - low)).astype(np.int64) + np.int64(low)
    return Tensor._wrap(values.reshape(shape))


def randperm(n: int, generator: Optional[Generator] = None, *, device: Any = None) -> Tensor:
    """A permutation of 0 .. n-1 (int64): the stable order of n draws, as the DataLoader's."""
    check_device(device, "randperm")
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
        raise ValueError(f"randperm: n must be an integer >= 0, got {n!r}")
    return Tensor._wrap(np.argsort(_draw_u64(generator, int(n)), kind="stable").astype(np.int64))


def manual_seed(seed: int) -> Generator:
    """Reseeds `default_generator` in place (held references stay valid); returns it."""
    return default_generator.manual_seed(seed)


_INT64_MIN = -(1 << 63)


def get_rng_state() -> int:
    """The state of `default_generator` as a signed 64-bit integer (the two's-complement
    reading of its 64 bits), so it fits a checkpoint's extra integers and numpy int64."""
    state = default_generator.state
    return state - (1 << 64) if state >> 63 else state


def set_rng_state(state: int) -> None:
    """Restores `default_generator` to a state from get_rng_state().

    Either reading of the 64 bits is accepted: signed [-2^63, 2^63) or unsigned [0, 2^64),
    as a Python or numpy integer; anything else raises before the generator changes.
    """
    if isinstance(state, bool) or not isinstance(state, (int, np.integer)):
        raise TypeError(f"set_rng_state: state must be an integer (from get_rng_state()), "
                        f"got {type(state).__name__}")
    if not _INT64_MIN <= int(state) <= MASK64:
        raise ValueError(f"set_rng_state: state {int(state)} is outside the 64-bit range "
                         f"[-2^63, 2^64)")
    default_generator.state = int(state)


def multinomial(input: Tensor, num_samples: int, replacement: bool = False,
                generator: Optional[Generator] = None) -> Tensor:
    """int64 category indices drawn with the weights `input` ((C,) or (rows, C), not
    necessarily normalised), as torch.multinomial; from the default generator unless
    `generator` is given.

    Each draw takes the generator's next output as u = top 53 bits / 2^53 and picks the first
    category whose running weight sum (float64, in order) exceeds u · total. Without
    replacement a drawn category's weight becomes 0 for that row's later draws. Draws are taken
    row by row, so a row's samples do not depend on the rows after it.
    """
    op = "multinomial"
    weights = input._data if isinstance(input, Tensor) else np.asarray(input)
    if weights.dtype.kind != "f" or weights.ndim not in (1, 2) or weights.shape[-1] == 0:
        raise ValueError(f"{op}: input must be a non-empty 1-D or 2-D floating-point tensor of "
                         f"weights, got {weights.dtype} of shape {weights.shape}")
    if isinstance(num_samples, bool) or not isinstance(num_samples, (int, np.integer)) or (
            num_samples < 1):
        raise ValueError(f"{op}: num_samples must be a positive integer, got {num_samples!r}")
    w = np.atleast_2d(weights).astype(np.float64)
    if not np.isfinite(w).all() or (w < 0).any():
        raise ValueError(f"{op}: weights must be finite and >= 0 (input of shape "
                         f"{weights.shape})")
    available = np.count_nonzero(w, axis=1)
    if (available == 0).any():
        raise ValueError(f"{op}: a row of input (shape {weights.shape}) has no positive weight")
    if not replacement and num_samples > available.min():
        raise ValueError(f"{op}: cannot draw {num_samples} samples without replacement from a "
                         f"row with {int(available.min())} positive weights (input of shape "
                         f"{weights.shape})")
    rows, n = w.shape[0], int(num_samples)
    u = (_draw_u64(generator, rows * n) >> np.uint64(11)).astype(np.float64) * 2.0 ** -53
    u = u.reshape(rows, n)
    out = np.empty((rows, n), np.int64)
    for j in range(n):
        running = np.cumsum(w, axis=1)
        picked = (running <= (u[:, j] * running[:, -1])[:, None]).sum(axis=1)
        # u · total can round up to the total: keep to the last category with weight.
        last = w.shape[1] - 1 - np.argmax(w[:, ::-1] > 0, axis=1)
        out[:, j] = np.minimum(picked, last)
        if not replacement:
            w[np.arange(rows), out[:, j]] = 0.0
    return Tensor._wrap(out if weights.ndim == 2 else out[0])
