"""_ieee.quiet: numpy's floating-point warnings off inside an op, the caller's settings intact."""
import numpy as np
import pytest

from onemodel import _ieee


@pytest.mark.parametrize("quiet", [_ieee.quiet, _ieee.quiet_per_call])
def test_quiet_nests_and_restores_the_callers_settings(quiet):
    inf = np.float32(np.inf)

    @quiet
    def inner() -> np.float32:
        return inf - inf

    @quiet
    def outer() -> tuple:
        first = inner()
        return first, inf * np.float32(0), np.geterr()

    with np.errstate(all="raise"):
        first, second, inside = outer()
        assert np.isnan(first) and np.isnan(second)
        assert set(inside.values()) == {"ignore"}
        assert set(np.geterr().values()) == {"raise"}      # restored after nested calls
        with pytest.raises(FloatingPointError):
            inf - inf
