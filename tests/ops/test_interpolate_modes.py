"""interpolate's linear, bilinear, bicubic, trilinear and area modes (and antialias) against
PyTorch, forward and backward; gradients against float64 central differences; exact-mode bits;
the Upsample modules; and the errors for bad arguments."""
import numpy as np
import pytest

import onemodel as om
from onemodel import functional as F
from onemodel import nn

torch = pytest.importorskip("torch")
TF = torch.nn.functional

RANK = {"linear": 3, "bilinear": 4, "bicubic": 4, "trilinear": 5, "area": 4}
SPATIAL = {3: (7,), 4: (5, 6), 5: (3, 4, 5)}

# (spatial sizes -> resizing arguments): up, down, non-integer, per-axis, to size 1, recompute.
RESIZES = [
    dict(scale_factor=2),
    dict(scale_factor=0.5),
    dict(scale_factor=1.7),
    dict(scale_factor=0.65),
    dict(scale_factor=1.0),
    dict(scale_factor=1.3, recompute_scale_factor=True),
    dict(scale_factor=0.7, recompute_scale_factor=True),
    dict(size=1),
    dict(size=9),
    dict(size=3),
]
PER_AXIS = {3: [dict(size=(11,))], 4: [dict(size=(9, 4)), dict(scale_factor=(2.5, 0.6))],
            5: [dict(size=(5, 2, 7)), dict(scale_factor=(1.5, 2, 0.8))]}


def _x(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


def _cases(mode):
    rank = RANK[mode]
    return RESIZES + PER_AXIS[rank]


@pytest.mark.parametrize("mode, align_corners, kwargs", [
    (mode, corners, kwargs)
    for mode in ("linear", "bilinear", "bicubic", "trilinear")
    for corners in (False, True)
    for kwargs in _cases(mode)] + [("area", None, kwargs) for kwargs in _cases("area")])
def test_matches_torch(mode, align_corners, kwargs, rng, check_torch):
    shape = (2, 3) + SPATIAL[RANK[mode]]
    check_torch(lambda a: F.interpolate(a, mode=mode, align_corners=align_corners, **kwargs),
                lambda a: TF.interpolate(a, mode=mode, align_corners=align_corners, **kwargs),
                _x(rng, *shape), tol=1e-6, grad_tol=1e-5)


@pytest.mark.parametrize("shape", [(1, 1, 3), (1, 2, 4, 5), (1, 1, 2, 3, 4)])
@pytest.mark.parametrize("kwargs", [dict(scale_factor=1.6), dict(size=2)])
def test_area_every_rank(shape, kwargs, rng, check_torch):
    if "size" in kwargs:
        kwargs = dict(size=(2,) * (len(shape) - 2))
    check_torch(lambda a: F.interpolate(a, mode="area", **kwargs),
                lambda a: TF.interpolate(a, mode="area", **kwargs), _x(rng, *shape), tol=1e-6,
                grad_tol=1e-6)


@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("kwargs", [dict(scale_factor=0.3), dict(size=(3, 7)),
                                    dict(scale_factor=(0.45, 2.2)), dict(size=(5, 6)),
                                    dict(scale_factor=1.5)])
def test_antialias_matches_torch(mode, align_corners, kwargs, rng, check_torch):
    check_torch(lambda a: F.interpolate(a, mode=mode, align_corners=align_corners,
                                        antialias=True, **kwargs),
                lambda a: TF.interpolate(a, mode=mode, align_corners=align_corners,
                                         antialias=True, **kwargs),
                _x(rng, 2, 2, 11, 9), tol=1e-6, grad_tol=1e-5)


def _torch64(**kwargs):
    return lambda a: TF.interpolate(torch.from_numpy(a), **kwargs).numpy()


@pytest.mark.parametrize("kwargs", [
    dict(mode="linear", scale_factor=1.5),
    dict(mode="linear", size=3, align_corners=True),
    dict(mode="bilinear", size=(3, 5)),
    dict(mode="bilinear", scale_factor=1.7, align_corners=True),
    dict(mode="bicubic", size=(4, 2)),
    dict(mode="bicubic", scale_factor=1.4, align_corners=True),
    dict(mode="bicubic", size=(2, 5), antialias=True),
    dict(mode="bilinear", scale_factor=0.6, antialias=True),
    dict(mode="trilinear", size=(3, 2, 4)),
    dict(mode="area", size=(2, 3)),
])
def test_gradient_central_differences(kwargs, rng, check_grad):
    rank = 5 if kwargs["mode"] == "trilinear" else 3 if kwargs["mode"] == "linear" else 4
    shape = {3: (1, 2, 4), 4: (1, 2, 3, 4), 5: (1, 1, 2, 3, 3)}[rank]
    check_grad(lambda a: F.interpolate(a, **kwargs), _x(rng, *shape), ref64=_torch64(**kwargs))


@pytest.mark.parametrize("kwargs", [
    dict(mode="linear", scale_factor=2.5),
    dict(mode="bilinear", size=(13, 9), align_corners=True),
    dict(mode="bicubic", scale_factor=1.7),
    dict(mode="bicubic", scale_factor=0.4, antialias=True),
    dict(mode="trilinear", size=(5, 6, 3)),
    dict(mode="area", size=(3, 4)),
])
def test_exact_mode_bits(kwargs, rng, check_exact):
    rank = 5 if kwargs["mode"] == "trilinear" else 3 if kwargs["mode"] == "linear" else 4
    shape = (2, 3) + SPATIAL[rank]
    check_exact(lambda a: F.interpolate(a, **kwargs), _x(rng, *shape))


def test_values_at_the_borders_and_specials(rng, assert_close):
    # bicubic reads clamped neighbours outside the input; inf and NaN spread as in PyTorch.
    x = _x(rng, 1, 1, 4, 4)
    x[0, 0, 1, 2], x[0, 0, 3, 0] = np.inf, np.nan
    for mode in ("bilinear", "bicubic"):
        got = F.interpolate(om.tensor(x), scale_factor=2.5, mode=mode).numpy()
        want = TF.interpolate(torch.from_numpy(x), scale_factor=2.5, mode=mode).numpy()
        assert_close(got, want, 1e-6)


@pytest.mark.parametrize("make", [
    lambda m: m.Upsample(scale_factor=2, mode="bilinear"),
    lambda m: m.Upsample(size=(7, 3), mode="bicubic", align_corners=True),
    lambda m: m.Upsample(scale_factor=1.5, mode="area"),
    lambda m: m.UpsamplingBilinear2d(scale_factor=2),
    lambda m: m.UpsamplingBilinear2d(size=(3, 9)),
    lambda m: m.UpsamplingNearest2d(scale_factor=3),
])
def test_upsample_modules(make, rng, check_torch):
    ours, theirs = make(nn), make(torch.nn)
    assert repr(ours) == repr(theirs)
    check_torch(ours, theirs, _x(rng, 2, 3, 4, 5), tol=1e-6, grad_tol=1e-5)


def test_upsample_trilinear_module(rng, check_torch):
    ours = nn.Upsample(scale_factor=(2, 1.5, 0.5), mode="trilinear")
    theirs = torch.nn.Upsample(scale_factor=(2, 1.5, 0.5), mode="trilinear")
    check_torch(ours, theirs, _x(rng, 1, 2, 3, 4, 6), tol=1e-6, grad_tol=1e-5)


@pytest.mark.parametrize("shape, kwargs, error, message", [
    ((1, 2, 4, 4), dict(mode="linear", scale_factor=2), ValueError,
     r"mode 'linear' needs a 3-D input, got shape \(1, 2, 4, 4\)"),
    ((1, 2, 4), dict(mode="bilinear", scale_factor=2), ValueError,
     r"mode 'bilinear' needs a 4-D input"),
    ((1, 2, 4, 4), dict(mode="trilinear", scale_factor=2), ValueError,
     r"mode 'trilinear' needs a 5-D input"),
    ((1, 2, 4, 4, 4), dict(mode="bicubic", scale_factor=2), ValueError,
     r"mode 'bicubic' needs a 4-D input"),
    ((1, 2, 4, 4), dict(mode="area", size=2, align_corners=True), ValueError,
     "align_corners applies only to the interpolating modes"),
    ((1, 2, 4), dict(mode="linear", size=2, antialias=True), ValueError,
     "antialias applies only to modes 'bilinear' and 'bicubic'"),
    ((1, 2, 4, 4), dict(mode="bilinear", size=2, recompute_scale_factor=True), ValueError,
     "recompute_scale_factor applies only with scale_factor"),
    ((1, 2, 4, 4), dict(mode="bicubic", scale_factor=(2, 2, 2)), TypeError,
     "scale_factor must be one number or 2"),
    ((1, 2, 4, 4), dict(mode="bilinear", scale_factor=0.2), ValueError,
     r"output size \(0, 0\) must be positive"),
    ((1, 2, 0, 4), dict(mode="bilinear", size=3), ValueError, r"input \(1, 2, 0, 4\)"),
    ((1, 2, 4, 4), dict(mode="lanczos", size=3), ValueError, "mode must be one of"),
])
def test_bad_input(shape, kwargs, error, message, rng):
    with pytest.raises(error, match="interpolate: " + message):
        F.interpolate(om.tensor(np.ones(shape, np.float32)), **kwargs)
