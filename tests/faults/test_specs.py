"""Bad method specs fail when the spec is read, naming the option and why:
NaN, infinite or out-of-range option values would otherwise give NaN vectors or fail late inside numpy."""

from __future__ import annotations

import numpy as np
import pytest

import embedlab
from embedlab.registry import parse
from embedlab.spec import SpecError


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("random:minilm,std=nan", "option std='nan': must be a finite number"),
        ("random:minilm,std=inf", "option std='inf': must be a finite number"),
        ("random:minilm,std=-0.1", "option std='-0.1': must be positive"),
        ("random:minilm,std=0", "option std='0': must be positive"),
        ("random:minilm,seed=-1", "option seed='-1': must be at least 0"),
        ("random:minilm,seed=1.5", "option seed='1.5': must be a whole number"),
        ("bert+avg:minilm,w=nan", "option w='nan': must be a finite number"),
        ("bert+avg:minilm,w=-inf", "option w='-inf': must be a finite number"),
        ("neural:minilm,lr=nan", "option lr='nan': must be a finite number"),
        ("neural:minilm,lr=0", "option lr='0': must be positive"),
        ("neural:minilm,epochs=0", "option epochs='0': must be at least 1"),
        ("neural:minilm,seed=x", "option seed='x': must be a whole number"),
    ],
)
def test_bad_option_values_are_refused_when_read(spec: str, message: str) -> None:
    with pytest.raises(SpecError) as error:
        parse(spec)
    assert message in str(error.value)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("foo:minilm", "unknown family 'foo'"),
        ("nueral:minilm", "unknown family 'nueral' in spec 'nueral:minilm'; did you mean 'neural'?"),
        ("minilm:pol=mean", "unknown option 'pol' for family 'pooled'; did you mean 'pool'?"),
        ("minilm:pool=maen", "option pool='maen' is not valid; did you mean 'mean'?"),
        ("match:minilm,mode=bertscor", "did you mean 'bertscore'?"),
    ],
)
def test_typos_name_the_closest_valid_name(spec: str, message: str) -> None:
    with pytest.raises(SpecError) as error:
        parse(spec)
    assert message in str(error.value)


def test_valid_values_keep_their_canonical_text() -> None:
    # negative w is allowed (Eq. 10 may extrapolate); canonical floats and integers are unchanged
    assert str(parse("bert+avg:minilm,w=-1")) == "bert+avg:minilm,w=-1.0"
    assert str(parse("random:minilm,seed=3,std=0.2")) == "random:minilm,seed=3,std=0.2"
    assert str(parse("neural:minilm,lr=0.01,epochs=10")) == "neural:minilm"


def test_random_vectors_with_a_valid_std_are_finite() -> None:
    vectors = embedlab.load("random:minilm,std=0.5,seed=7").encode(["a finite vector", "another one"])
    assert np.isfinite(vectors).all() and vectors.shape == (2, 384)


def test_a_lone_surrogate_names_the_text_index() -> None:
    with pytest.raises(ValueError, match=r"text at index 1 has a lone surrogate '\\ud800' at character 4"):
        embedlab.load("minilm").encode(["fine", "bad \ud800 text"])
