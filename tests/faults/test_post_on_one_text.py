"""A post-processing step fitted on the texts being encoded (no ``@ref``) has nothing to learn from one
text: whitening found no direction and returned a (1, 0) array, z-score a vector of zeros. Such a fit is
refused with the step and what to do instead; a fitted method (or ``@ref``) encodes one text as usual."""

from __future__ import annotations

import numpy as np
import pytest

import embedlab
from embedlab.pooling.postprocess import Whitening, fit_chain, parse_chain
from tolerance import UNIT_ATOL

TEXTS = ["A man plays a guitar.", "A woman reads a book.", "Two dogs run in a field.", "The market fell today."]


@pytest.mark.parametrize("post", ["whiten", "zscore", "quantile-u", "abtt-1", "normalize+whiten"])
def test_a_step_fitted_on_one_text_is_refused_with_what_to_do(post):
    method = embedlab.load(f"random:minilm,post={post}")
    step = post.split("+")[-1]
    with pytest.raises(ValueError) as error:
        method.encode(["A single text."])
    message = str(error.value)
    for text in (f"post={step} is fitted on the texts being encoded", "needs at least", "this call has 1 distinct",
                 "fit(texts)", "@ref"):
        assert text in message
    with pytest.raises(ValueError, match="this call has 1 distinct"):
        method.encode("A single text.")  # one string: the same fit on one text
    with pytest.raises(ValueError, match=f"'{step}'.*1 vector.*at least 2.*fit\\(texts\\).*{step}@ref"):
        method.fit(["A single text."])  # an explicit fit on one text: the step's own refusal


@pytest.mark.crosspath
def test_a_fitted_method_encodes_one_text():
    method = embedlab.load("random:minilm,post=whiten").fit(TEXTS)
    one = method.encode(["A single text."])
    assert one.shape == (1, 3)  # 4 texts span 3 directions; whitening keeps those
    np.testing.assert_allclose(one, method.encode(["A single text.", TEXTS[0]])[:1], atol=UNIT_ATOL)  # alone vs in a batch of two


def test_whitening_identical_vectors_is_refused_not_a_zero_width_array():
    vectors = np.ones((5, 4))
    with pytest.raises(ValueError, match="'whiten'.*no spread"):
        Whitening().fit(vectors)


def test_two_texts_are_enough_for_a_target_fitted_step():
    vectors = np.array([[0.0, 1.0, 2.0], [2.0, 1.0, 0.0]])
    _, whitened = fit_chain(parse_chain("whiten"), vectors, lambda: vectors)
    assert whitened.shape == (2, 1)
    # zero mean and unit (sample) variance along the one direction the two vectors span: ±1/√2
    np.testing.assert_allclose(np.abs(whitened), np.sqrt(0.5), atol=1e-6)
    assert abs(whitened.sum()) < 1e-6
