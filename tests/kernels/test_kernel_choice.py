"""The bfloat16 product kernel chosen by measurement (onemodel._kernel_choice): the faster of
two kernels that give the same bits, timed in turns; the caller's own choice kept; om.config()
saying which and why."""
from __future__ import annotations

import subprocess
import sys

import pytest

import onemodel as om
from onemodel import _kernel_choice, amp
from onemodel._kernels import _gemm


def test_pick_takes_the_faster_in_turns():
    calls = []

    def timer(dot: bool) -> float:
        calls.append(dot)
        return {True: [3.0, 1.5, 2.0], False: [2.5, 2.0, 1.8]}[dot][calls.count(dot) - 1]

    assert _kernel_choice.pick(timer, rounds=3) == (True, 1.5, 1.8)
    assert calls == [True, False] * 3  # in turns: a burst of load falls on both alike
    slower_dot = _kernel_choice.pick(lambda dot: 2.0 if dot else 1.0, rounds=2)
    assert slower_dot == (False, 2.0, 1.0)


def test_measured_choice_sets_the_kernel_and_says_why(monkeypatch):
    chosen: list[bool] = []
    monkeypatch.setattr(_kernel_choice, "_reasons", {})
    monkeypatch.setattr(_gemm, "bf16_dot_available", lambda: True)
    monkeypatch.setattr(_gemm, "bf16_dot_chosen", lambda: False)
    monkeypatch.setattr(_gemm, "bf16_dot", lambda on=None: chosen.append(on) or bool(on))
    _kernel_choice.choose_bf16_dot(lambda dot: 1.31 if dot else 1.0)
    assert chosen == [False]
    reason = _kernel_choice.reasons()["bf16_dot"]
    assert reason.startswith("widening: 1.31x faster than the dot product")
    _kernel_choice.choose_bf16_dot(lambda dot: pytest.fail("measured twice"))  # once a process
    monkeypatch.setattr(_kernel_choice, "_reasons", {})
    _kernel_choice.choose_bf16_dot(lambda dot: 0.5 if dot else 1.0)
    assert chosen == [False, True]
    assert _kernel_choice.reasons()["bf16_dot"].startswith("dot product: 2.00x faster")


def test_the_callers_choice_is_kept(monkeypatch):
    monkeypatch.setattr(_kernel_choice, "_reasons", {})
    monkeypatch.setattr(_gemm, "bf16_dot_available", lambda: True)
    monkeypatch.setattr(_gemm, "bf16_dot_chosen", lambda: True)
    monkeypatch.setattr(_gemm, "bf16_dot", lambda on=None: False)
    _kernel_choice.choose_bf16_dot(lambda dot: pytest.fail("the caller chose"))
    assert _kernel_choice.reasons()["bf16_dot"] == "widening: set by the caller"


def test_a_fresh_process_reports_the_choice_after_its_first_bf16_autocast():
    code = ("import json, onemodel as om; from onemodel import amp; "
            "before = om.config()['kernel_choices']['bf16_dot']; "
            "amp.autocast('fp16').__enter__(); "
            "middle = om.config()['kernel_choices']['bf16_dot']; "
            "amp.autocast('bf16').__enter__(); "
            "print(json.dumps([before, middle, om.config()['kernel_choices']['bf16_dot'], "
            "om.config()['bf16_dot']]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    before, middle, after, runs_dot = __import__("json").loads(out)
    if not _gemm.bf16_dot_available():
        assert before == middle == after == ("widening: no AVX512_BF16 dot-product kernel on "
                                             "this CPU or build")
        assert runs_dot is False
    else:
        assert before == middle == "not measured yet (at the first bfloat16 autocast)"
        assert after.startswith("dot product: " if runs_dot else "widening: ")
        assert "measured at the first bfloat16 autocast" in after


def test_bits_do_not_depend_on_the_choice():
    # Where the CPU has the dot kernel, both settings give the product's one answer.
    if not _gemm.bf16_dot_available():
        pytest.skip("no AVX512_BF16 dot-product kernel on this CPU or build")
    import numpy as np
    rng = np.random.default_rng(1)
    a = om.tensor(rng.standard_normal((37, 70), dtype=np.float32))
    b = om.tensor(rng.standard_normal((70, 29), dtype=np.float32))
    before = _gemm.bf16_dot()
    outs = []
    try:
        for dot in (True, False):
            _gemm.bf16_dot(dot)
            with amp.autocast("bf16"):
                outs.append((a @ b).numpy())
    finally:
        _gemm.bf16_dot(before)
    assert outs[0].tobytes() == outs[1].tobytes()
