"""Tests of embedlab.neural.options: the tuned-parameter presets of §2 and Appendix G, and their checks."""

from __future__ import annotations

import pytest

from embedlab.neural.options import HEAD_VECTORS, block_vectors, check_parameters, resolve_parameter_names, tunes_last_block


def test_presets_name_the_papers_vectors() -> None:
    assert resolve_parameter_names("head", 6) == list(HEAD_VECTORS)
    assert resolve_parameter_names("block", 6) == [
        "bert.encoder.layer.5.output.LayerNorm.weight",
        "bert.encoder.layer.5.output.LayerNorm.bias",
        "bert.encoder.layer.5.output.dense.bias",
    ]
    assert resolve_parameter_names("block-dense-bias", 12) == ["bert.encoder.layer.11.output.dense.bias"]  # BERT-base's "block 11"
    assert resolve_parameter_names("bert.encoder.layer.last.output.dense.bias; cls.predictions.bias", 6) == [
        "bert.encoder.layer.5.output.dense.bias",
        "cls.predictions.bias",
    ]
    with pytest.raises(ValueError, match="names no parameter"):
        resolve_parameter_names(" ; ", 6)
    assert tunes_last_block(block_vectors(6)[2:], 6) and not tunes_last_block(HEAD_VECTORS, 6)


def test_check_parameters_rejects_repeats(masked_minilm) -> None:
    chosen = check_parameters(masked_minilm.model, HEAD_VECTORS)
    assert list(chosen) == list(HEAD_VECTORS) and all(parameter.dim() == 1 for parameter in chosen.values())
    with pytest.raises(ValueError, match="repeat"):
        check_parameters(masked_minilm.model, HEAD_VECTORS[:1] * 2)
