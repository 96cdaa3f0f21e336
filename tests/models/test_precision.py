"""Compute precision: which compute a machine gets, the warning where bf16 is emulated, and int8 layers."""

import warnings

import pytest
import torch

from embedlab.models import compute_choice, precision
from embedlab.models.loading import load_model
from tests.conformance.tiny_models import build_tiny


@pytest.fixture
def cpu(monkeypatch):
    """``cpu(capability, flags)``: pretend torch's CPU capability and the CPU flags are these."""
    def pretend(capability: str, flags: set[str]) -> None:
        monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: capability)
        monkeypatch.setattr(precision, "cpu_flags", lambda: frozenset(flags))

    return pretend


@pytest.mark.parametrize(("capability", "flags", "native"), [
    ("AVX512", {"avx2", "avx512f", "avx512_bf16"}, True),
    ("AVX512_BF16_AMX", {"avx512f", "amx_bf16"}, True),
    ("AVX512", {"avx2", "avx512f", "avx512_vnni"}, False),  # AVX-512 without its BF16 extension
    ("AVX2", {"avx2", "avx512_bf16"}, False),               # torch's kernels would not use it
])
def test_auto_considers_bf16_only_where_it_is_native(cpu, capability, flags, native, isolated_cache, monkeypatch):
    cpu(capability, flags)
    timed = []
    monkeypatch.setattr(compute_choice, "time_workloads", lambda device, computes, hidden: timed.append(computes) or {c: 1.0 if c == "fp32" else 0.5 for c in computes})
    assert precision.native_bf16("cpu") is native
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # auto never warns
        assert compute_choice.resolve_compute("auto", "none", "cpu") == ("bf16" if native else "fp32")
    assert timed == ([("fp32", "bf16")] if native else [])  # an emulated bf16 is not even timed
    assert compute_choice.resolve_compute("fp32", "int8", "cpu") == "int8"


def test_explicit_bf16_without_native_support_warns_naming_the_missing_flag(cpu):
    cpu("AVX2", {"avx2", "fma"})
    with pytest.warns(RuntimeWarning, match="avx512_bf16 or amx_bf16 missing.*capability AVX2"):
        assert compute_choice.resolve_compute("bf16", "none", "cpu") == "bf16"


def test_fp32_adds_nothing_to_a_fingerprint():
    assert [precision.fingerprint_suffix(compute) for compute in precision.COMPUTES] == ["", "-bf16", "-fp16", "-int8"]


def test_int8_quantises_every_linear_layer_but_the_ffn_outputs_and_the_last_block(tmp_path):
    folder = build_tiny("BERT", tmp_path / "bert")
    exact, int8 = load_model(str(folder)), load_model(str(folder), compute="int8")
    block = int8.model.encoder.layer[0]
    for quantised in (block.attention.self.query, block.attention.output.dense, block.intermediate.dense):
        assert type(quantised).__module__.startswith("torch.ao.nn.quantized.dynamic")
    assert type(block.output.dense) is torch.nn.Linear  # the FFN output stays float
    assert type(int8.model.encoder.layer[1].attention.self.query) is torch.nn.Linear  # so does the last block
    assert int8.fingerprint == exact.fingerprint + "-int8" and int8.compute == "int8"


def test_an_unknown_compute_is_refused():
    with pytest.raises(ValueError, match="compute 'int4' is not one of fp32, bf16, fp16, int8"):
        load_model("minilm", compute="int4")
