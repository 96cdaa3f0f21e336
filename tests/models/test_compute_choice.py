"""``dtype=auto`` by measurement: the decision from injected timings, kept in the cache folder, shown by ``cache info``."""

import json

import pytest
import torch

from embedlab.cli.app import main
from embedlab.models import compute_choice, precision
from embedlab.runtime.memo import clear

NATIVE_BF16_ONLY = {"bf16": None, "fp16": "no native fp16 (avx512_fp16 or amx_fp16 missing from the CPU flags)"}


@pytest.mark.parametrize(("seconds", "expected"), [
    ({"fp32": 6.33, "bf16": 8.84}, "fp32"),  # the Xeon of issue 59: bf16 0.72x its fp32
    ({"fp32": 6.71, "bf16": 4.20}, "bf16"),  # the AMD EPYC of docs/precision.md: bf16 1.60x
    ({"fp32": 1.00, "bf16": 0.97}, "fp32"),  # 3 % faster is noise on a shared machine: never risk slower than fp32
    ({"fp32": 1.00, "bf16": 0.80, "fp16": 0.50}, "fp16"),  # the fastest of those within the budget
])
def test_the_fastest_native_compute_wins_only_by_a_clear_margin(seconds, expected):
    compute, reason = compute_choice.choose_compute(seconds, NATIVE_BF16_ONLY)
    assert compute == expected
    assert f"bf16 {seconds['fp32'] / seconds['bf16']:.2f}x" in reason  # the speed ratio it decided on


def test_without_native_bf16_auto_stays_fp32_and_says_why():
    compute, reason = compute_choice.choose_compute({"fp32": float("nan")}, {"bf16": "no native bf16 (avx512_bf16 or amx_bf16 missing)", "fp16": "no native fp16"})
    assert compute == "fp32" and "no native bf16 (avx512_bf16 or amx_bf16 missing)" in reason


@pytest.fixture
def timed(isolated_cache, monkeypatch):
    """``timed(seconds)``: a CPU with native bf16 whose workload takes ``seconds`` per compute; returns the calls made."""
    calls: list[tuple[str, ...]] = []

    def pretend(seconds: dict[str, float]) -> list[tuple[str, ...]]:
        monkeypatch.setattr(compute_choice, "lower_computes", lambda device: dict(NATIVE_BF16_ONLY))

        def time_workloads(device, computes, hidden, repeats=compute_choice.REPEATS):
            calls.append(computes)
            return {compute: seconds[compute] for compute in computes}

        monkeypatch.setattr(compute_choice, "time_workloads", time_workloads)
        return calls

    return pretend


def test_auto_is_measured_once_per_machine_kept_in_the_cache_and_shown(timed, isolated_cache, capsys):
    calls = timed({"fp32": 6.33, "bf16": 8.84})
    assert compute_choice.resolve_compute("auto", "none", "cpu", hidden=384) == "fp32"
    assert calls == [("fp32", "bf16")]
    assert "dtype=auto: fp32" in capsys.readouterr().err  # printed once, when decided
    stored = json.loads(next((isolated_cache / "compute_choice").glob("*.json")).read_text())
    assert stored["compute"] == "fp32" and stored["seconds"] == {"fp32": 6.33, "bf16": 8.84} and stored["hidden"] == 384
    assert str(torch.get_num_threads()) in stored["machine"] and torch.__version__ in stored["machine"]
    clear()  # a new process: the decision is read back, not measured again
    assert compute_choice.resolve_compute("auto", "none", "cpu", hidden=384) == "fp32" and len(calls) == 1
    assert main(["cache", "info"]) == 0
    assert "dtype=auto: fp32 for width 384" in capsys.readouterr().out
    assert main(["cache", "clear"]) == 0  # cleared with the rest: the next use measures again
    clear()
    assert compute_choice.resolve_compute("auto", "none", "cpu", hidden=384) == "fp32" and len(calls) == 2


def test_auto_picks_bf16_where_the_measurement_says_it_is_faster(timed):
    calls = timed({"fp32": 6.71, "bf16": 4.20})
    assert compute_choice.resolve_compute("auto", "none", "cpu", hidden=768) == "bf16"
    assert compute_choice.resolve_compute("auto", "none", "cpu", hidden=384) == "bf16" and len(calls) == 2  # one per width


def test_the_workload_runs_in_each_compute():
    seconds = compute_choice.time_workloads(torch.device("cpu"), ("fp32",), hidden=32, repeats=2)
    assert set(seconds) == {"fp32"} and 0 < seconds["fp32"] < 5
