"""The sentence-transformers contract of every vector method: code written for a ``SentenceTransformer``
runs unchanged with an embedlab method in its place and gives the same numbers."""

import numpy as np
import pytest
import torch
from sentence_transformers import SentenceTransformer, util

import embedlab
from embedlab.errors import InputTypeError
from embedlab.models.loading import resolve_model_path


def sentence_transformers_usage(model):
    """sentence-transformers' README usage and semantic-search snippets, unchanged but for returning values."""
    sentences = [
        "The weather is lovely today.",
        "It's so sunny outside!",
        "He drove to the stadium.",
    ]
    embeddings = model.encode(sentences)
    similarities = model.similarity(embeddings, embeddings)

    query_embedding = model.encode("How big is London", normalize_embeddings=True)
    passage_embeddings = model.encode([
        "London has 9,787,426 inhabitants at the 2011 census",
        "London is known for its finacial district",
    ], normalize_embeddings=True)
    query_similarity = model.similarity(query_embedding, passage_embeddings)

    corpus_embeddings = model.encode(sentences, convert_to_tensor=True)
    hits = util.semantic_search(model.encode(["A sunny day"], convert_to_tensor=True), corpus_embeddings, top_k=2)
    return embeddings, similarities, query_embedding, passage_embeddings, query_similarity, hits


@pytest.mark.crosspath
def test_an_unchanged_sentence_transformers_snippet_gives_the_same_results():
    reference = sentence_transformers_usage(SentenceTransformer(str(resolve_model_path("minilm"))))
    # all-MiniLM-L6-v2's pipeline ends in Normalize, so its drop-in is minilm:post=normalize (raw minilm differs
    # in vector length only: every cosine is the same)
    ours = sentence_transformers_usage(embedlab.load("minilm:post=normalize"))
    raw = sentence_transformers_usage(embedlab.load("minilm"))
    embeddings, similarities, query, passages, query_similarity, hits = ours
    assert isinstance(embeddings, np.ndarray) and embeddings.shape == (3, 384) and embeddings.dtype == np.float32
    assert isinstance(similarities, torch.Tensor) and similarities.shape == (3, 3)
    assert query.shape == (384,) and abs(np.linalg.norm(query) - 1) < 1e-5
    assert query_similarity.shape == (1, 2)
    for got, expected in zip(ours[:5], reference[:5]):
        np.testing.assert_allclose(np.asarray(got), np.asarray(expected), atol=1e-5)
    assert [hit["corpus_id"] for hit in hits[0]] == [hit["corpus_id"] for hit in reference[5][0]]
    np.testing.assert_allclose(raw[1].numpy(), reference[1].numpy(), atol=1e-5)


@pytest.mark.crosspath
def test_result_types_follow_sentence_transformers():
    method = embedlab.load("random:minilm")
    texts = ["one text", "another text"]
    vectors = method.encode(texts, device="cpu", show_progress_bar=False)
    assert vectors.flags.c_contiguous and vectors.dtype == np.float32
    listed = method.encode(texts, convert_to_numpy=False)
    assert isinstance(listed, list) and len(listed) == 2 and listed[0].shape == (method.dimension,)
    np.testing.assert_allclose(np.linalg.norm(method.encode(texts, normalize_embeddings=True), axis=1), 1.0, rtol=1e-6)
    with pytest.raises(InputTypeError, match="unsupported keyword.*normalize"):  # embedlab's old alias; sentence-transformers has none
        method.encode(texts, normalize=True)
    np.testing.assert_array_equal(method.encode("one text"), vectors[0])
    np.testing.assert_allclose(method.similarity(vectors[0], vectors).numpy(), [[1.0, method.similarity_pairs([tuple(texts)])[0]]], atol=1e-6)
    assert method.similarity(np.zeros(method.dimension), vectors).abs().max() == 0  # a zero vector has cosine 0
    np.testing.assert_allclose(method.similarity_pairwise(vectors, vectors[::-1]).numpy(), np.diag(method.similarity(vectors, vectors[::-1]).numpy()), atol=1e-6)


@pytest.mark.parametrize(
    ("keywords", "error", "message"),
    [
        ({"prompt": "query: "}, ValueError, "prompts need a transformer's contextual token states"),  # random vectors: no context
        ({"prompt_name": "query"}, ValueError, "prompt_name='query' is not one of this method's prompts"),
        ({"precision": "int4"}, ValueError, "precision='int4' is not one of"),
        ({"output_value": "token_embeddings"}, ValueError, "output_value='token_embeddings'"),
        ({"truncate_dim": 1000}, ValueError, "truncate_dim=1000 is larger than the vectors' width 384"),
        ({"max_length": 8}, TypeError, "unsupported keyword.*max_length"),
    ],
)
def test_keywords_that_would_change_the_result_are_refused(keywords, error, message):
    with pytest.raises(error, match=message):
        embedlab.load("random:minilm").encode(["a text"], **keywords)


def test_text_pairs_are_scored_by_similarity_pairs_not_similarity():
    method = embedlab.load("random:minilm")
    with pytest.raises(TypeError, match="similarity_pairs"):
        method.similarity([("a", "b")])
    with pytest.raises(TypeError, match="similarity_pairs"):
        method.similarity([("a", "b")], [("c", "d")])
    with pytest.raises(TypeError, match="similarity_pairs"):
        embedlab.load("match:minilm").similarity(np.ones((1, 3)), np.ones((1, 3)))


def test_unit_vectors_is_what_the_spec_declares_and_what_encode_gives(tmp_path):
    """A method says whether its vectors have unit length by its spec (a final normalize, an st: model ending in
    Normalize, a concatenation); where it says so, every vector encode gives has norm 1."""
    from conformance.tiny_models import build_tiny

    tiny = build_tiny("BERT", tmp_path / "model")
    texts = ["a man plays a guitar", "two dogs run through snow"]
    declared = {f"{tiny}": False, f"{tiny}:post=normalize": True, f"{tiny}:post=normalize,truncate_dim=8": True,
                f"{tiny}+{tiny}:pool=cls": True, f"st:{tiny}": False, "st:minilm": True}
    for spec, unit in declared.items():
        method = embedlab.load(spec)
        assert method.unit_vectors is unit, spec
        full = method.encode(texts, truncate_dim=method.dimension)  # the full width, whatever the spec cuts
        norms = np.linalg.norm(full, axis=1)
        assert np.allclose(norms, 1.0, atol=1e-6) is unit, (spec, norms)  # float32 unit rows: 1 up to rounding
