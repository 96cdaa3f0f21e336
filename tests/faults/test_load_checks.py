"""Values a model cannot take are refused when the method is built (``embedlab.load``), from the model's
config and tokenizer files, before any weights are read or any text is encoded: a layer the model does not
have, a cut beyond its input length, a mask pooling without a template that marks tokens. Each error names
the value, the model's limit and what to use instead."""

from __future__ import annotations

import pytest

import embedlab
from embedlab.models import loading
from embedlab.registry import parse


@pytest.fixture
def no_weights(monkeypatch):
    """Building the method must not load the model: a check that needs the weights would be too late."""
    def refuse(*args, **kwargs):
        raise AssertionError("the model's weights were loaded before the spec was checked")

    monkeypatch.setattr(loading, "load_model", refuse)  # a late import inside a function
    monkeypatch.setattr("embedlab.methods.pooled.load_model", refuse)


@pytest.mark.parametrize(("spec", "named"), [
    ("minilm:layers=99", ["layers=99", "layer 99", "6 layers", "-1 to 6", "last"]),
    ("minilm:layers=1+7", ["layer 7", "6 layers", "-1 to 6"]),
    ("avg:minilm,layers=99", ["layer 99", "6 layers"]),
    ("bert+avg:minilm,layers=0+99", ["layer 99", "6 layers"]),
    ("match:minilm,layers=8", ["layer 8", "6 layers"]),
])
def test_a_layer_the_model_does_not_have_is_refused_by_load(no_weights, spec, named):
    with pytest.raises(ValueError) as error:
        embedlab.load(spec)
    for text in named:
        assert text in str(error.value)


def test_a_cut_beyond_the_models_input_is_refused_by_load(no_weights):
    with pytest.raises(ValueError) as error:
        embedlab.load("minilm:truncate=100000")
    message = str(error.value)
    # all-MiniLM-L6-v2 reads 256 tokens (sentence-transformers' max_seq_length)
    for text in ("truncate=100000", "256", "truncate=1", "without truncate"):
        assert text in message


def test_mask_pooling_without_a_marking_template_is_refused_by_load(no_weights):
    with pytest.raises(ValueError, match=r"pool=mask averages the tokens a template marks, and template=none marks none; "
                                         r"use a T0–T4 template"):
        embedlab.load("minilm:pool=mask")


def test_values_within_the_models_limits_still_load(no_weights):
    for spec in ("minilm:layers=-1+0+6", "minilm:layers=last,truncate=256", "minilm:template=T0,pool=mask"):
        assert embedlab.load(spec).spec == str(parse(spec))
