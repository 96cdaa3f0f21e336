"""BERTScore parity up to the package's limit (issue 49, item 4): pairs of 257–510 word pieces, and a text
past 512 that both cut, give the ``bert-score`` package's P, R, F1 through ``embedlab.bertscore``, the CLI's
default and ``match:…,mode=bertscore``; ``long_texts="chunk"`` stays as embedlab's extension."""

from __future__ import annotations

import numpy as np
import pytest

import embedlab
from embedlab.models.loading import resolve_model_path

bert_score = pytest.importorskip("bert_score")
TOLERANCE = 1e-4


@pytest.fixture(scope="module")
def long_pairs(sts_test_rows, minilm) -> tuple[list[str], list[str]]:
    sentences = [a for _, a, _ in sts_test_rows]

    def text(start: int, pieces: int) -> str:
        words, end = [], start
        while len(minilm.tokenizer(" ".join(words))["input_ids"]) < pieces:
            words.append(sentences[end])
            end += 1
        return " ".join(words)

    cands = [text(0, 300), text(100, 560)]  # 257–510 word pieces; and past 512, where both cut
    refs = ["A man is playing a guitar.", text(300, 300)]
    lengths = [len(minilm.tokenizer(t)["input_ids"]) for t in (*cands, *refs)]
    assert minilm.max_length < lengths[0] <= 512 < lengths[1] and minilm.max_length < lengths[3] <= 512
    return cands, refs


@pytest.fixture(scope="module")
def package(long_pairs) -> np.ndarray:
    cands, refs = long_pairs
    scores = bert_score.score(cands, refs, model_type=str(resolve_model_path("minilm")), num_layers=6, nthreads=0)
    return np.stack([part.numpy() for part in scores])


@pytest.mark.crosspath
def test_pairs_beyond_the_models_own_input_equal_the_package(long_pairs, package):
    ours = np.stack(embedlab.bertscore(*long_pairs, model="minilm"))
    assert np.abs(ours - package).max() <= TOLERANCE


@pytest.mark.crosspath
def test_the_match_spec_equals_the_package_f1(long_pairs, package):
    got = embedlab.load("match:minilm,mode=bertscore,weights=none").similarity_pairs(list(zip(*long_pairs)))
    assert np.abs(got - package[2]).max() <= TOLERANCE


def test_chunking_is_kept_as_an_option(long_pairs, package):
    chunked = np.stack(embedlab.bertscore(*long_pairs, model="minilm", long_texts="chunk"))
    assert np.abs(chunked - package).max() > 0.01  # every token matched: not the package's numbers
    with pytest.raises(ValueError, match="long_texts must be one of truncate, chunk"):
        embedlab.bertscore(*long_pairs, long_texts="cut")
