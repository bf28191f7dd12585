"""Fit the polynomial of the exact-mode log (onemodel/_kernels/csrc/vmath.h, OM_LOG_P*).

log(1+f) = f + f^2 (f P(f) - 1/2) on the reduced range f in [sqrt(2)/2 - 1, sqrt(2) - 1], so
P approximates g(f) = (log(1+f) - f + f^2/2) / f^3. The fit is minimax (Lawson's iteratively
reweighted least squares on a dense grid, float64) for the relative error of log(1+f), i.e.
weighted by |f^3 / log(1+f)|. The coefficients are rounded to float32 one at a time from P0
up, the higher ones refitted after each rounding. Prints the float32 coefficients and the
approximation error before float32 evaluation (the sweep, tools/ulp_sweep.py, measures the rest).

    python tools/fit_log.py [--degree 7]
"""
from __future__ import annotations

import argparse

import numpy as np

LO, HI = np.sqrt(0.5) - 1.0, np.sqrt(2.0) - 1.0


def target(f: np.ndarray) -> np.ndarray:
    """(log1p(f) - f + f^2/2) / f^3, by its series where the formula would cancel."""
    small = np.abs(f) < 0.02
    fs = f[small]
    series = sum((-1.0) ** (k + 1) * fs ** (k - 3) / k for k in range(3, 20))
    out = np.empty_like(f)
    out[small] = series
    fb = f[~small]
    out[~small] = (np.log1p(fb) - fb + fb * fb / 2) / fb ** 3
    return out


def fit(f: np.ndarray, g: np.ndarray, w: np.ndarray, fixed: list[float], degree: int,
        iterations: int = 300) -> np.ndarray:
    """Coefficients degree len(fixed)..degree, minimax of w (P - g) with the lower ones fixed."""
    powers = np.arange(len(fixed), degree + 1)
    rest = g - sum(c * f ** j for j, c in enumerate(fixed))
    basis = f[:, None] ** powers[None, :]
    lawson = np.full(f.size, 1.0 / f.size)
    for _ in range(iterations):
        sw = np.sqrt(lawson) * w
        coef = np.linalg.lstsq(basis * sw[:, None], rest * sw, rcond=None)[0]
        err = np.abs(w * (basis @ coef - rest))
        lawson *= err
        lawson /= lawson.sum()
    return coef


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--degree", type=int, default=7)
    args = parser.parse_args()
    n = 20000
    f = (LO + HI) / 2 + (HI - LO) / 2 * np.cos(np.pi * (np.arange(n) + 0.5) / n)
    g = target(f)
    w = np.abs(f ** 3 / np.log1p(f))
    fixed: list[float] = []
    for _ in range(args.degree + 1):
        coef = fit(f, g, w, fixed, args.degree)
        fixed.append(float(np.float32(coef[0])))
    p = sum(c * f ** j for j, c in enumerate(fixed))
    err = np.max(np.abs(w * (p - g)))
    for j, c in enumerate(fixed):
        print(f"#define OM_LOG_P{j} {np.format_float_positional(np.float32(c))}f")
    print(f"max relative error of log(1+f): 2^{np.log2(err):.1f}")


if __name__ == "__main__":
    main()
