"""embedlab/serve/tei.py (with the shared /rerank and /similarity of app.py): text-embeddings-inference's routes,
bodies, answers and error shapes on a real uvicorn server, against in-process ``encode``; Cohere's and Jina's
``/v1/rerank``. The expected shapes are TEI's own (router/src/http/types.rs, server.rs, docs/openapi.json)."""

from __future__ import annotations

import json

import httpx
import numpy as np
import pytest

import embedlab
from embedlab.serve.schemas import EMPTY_INPUT, ApiError
from embedlab.serve.served import load_served
from serve_helpers import TEXTS, thread_server, tiny_model  # noqa: F401 - tiny_model: a fixture


@pytest.fixture(scope="module")
def spec(tiny_model) -> str:
    return str(tiny_model)


@pytest.fixture(scope="module")
def url(spec, tiny_model) -> str:
    # TEI's bodies name no model: the first spec answers them (a second one is served to show which does)
    served = load_served([spec, f"match:{tiny_model},weights=none"], {"tiny": spec})
    with thread_server(served, max_inputs=8) as address:
        yield address


def post(url: str, route: str, body: object) -> httpx.Response:
    return httpx.post(f"{url}{route}", content=json.dumps(body).encode(), headers={"content-type": "application/json"},
                      trust_env=False, timeout=30)


def test_embed_answers_a_bare_list_of_unit_vectors_unless_normalize_is_false(url, spec) -> None:
    method = embedlab.load(spec)
    normalized = post(url, "/embed", {"inputs": TEXTS[:3]}).json()
    # float32 rows of unit scale through the same encode: equal but for rounding
    np.testing.assert_allclose(normalized, method.encode(TEXTS[:3], normalize_embeddings=True), rtol=0, atol=1e-6)
    raw = post(url, "/embed", {"inputs": TEXTS[:3], "normalize": False, "truncate": True, "truncation_direction": "Left"}).json()
    np.testing.assert_allclose(raw, method.encode(TEXTS[:3]), rtol=0, atol=1e-6)
    single = post(url, "/embed", {"inputs": TEXTS[3], "dimensions": 8}).json()  # one string: still a list of vectors
    np.testing.assert_allclose(single, method.encode(TEXTS[3:4], truncate_dim=8, normalize_embeddings=True), rtol=0, atol=1e-6)


@pytest.mark.parametrize("body, status, error_type, words", [
    ({"inputs": ""}, 400, "empty", "empty string"),
    ({"inputs": []}, 400, "empty", "holds no texts"),
    ({"inputs": [[101, 2023]]}, 422, "validation", "token ids"),
    ({"inputs": "a man", "normalize": "yes"}, 422, "validation", "normalize"),
    ({"inputs": "a man", "dimensions": 99}, 422, "validation", "dimensions=99"),
    ({"inputs": ["a"] * 9}, 422, "validation", "--max-inputs"),
    ({"texts": ["a"]}, 422, "validation", "inputs"),
])
def test_embed_errors_have_tei_shape(url, body, status, error_type, words) -> None:
    answer = post(url, "/embed", body)
    assert answer.status_code == status, answer.text
    assert set(answer.json()) == {"error", "error_type"} and answer.json()["error_type"] == error_type
    assert words in answer.json()["error"]


def test_info_describes_the_default_method_with_tei_field_names(url, spec) -> None:
    info = httpx.get(f"{url}/info", trust_env=False).json()
    assert info["model_id"] == spec and info["spec"] == spec and info["dimension"] == 32
    assert info["max_client_batch_size"] == 8 and info["max_batch_tokens"] == 16_384 and info["model_dtype"] == "float32"
    assert isinstance(info["max_input_length"], int) and info["version"] == embedlab.__version__
    assert "embedding" in info["model_type"]


def test_tei_rerank_and_similarity_bodies_answer_tei_shapes(url, spec) -> None:
    method = embedlab.load(spec)
    cosines = method.similarity_pairs([(TEXTS[0], text) for text in TEXTS])
    ranks = post(url, "/rerank", {"query": TEXTS[0], "texts": TEXTS, "raw_scores": True, "return_text": True}).json()
    assert [rank["index"] for rank in ranks] == list(np.argsort(-cosines, kind="stable"))  # every text, best first
    np.testing.assert_allclose([rank["score"] for rank in ranks], np.sort(cosines)[::-1], rtol=0, atol=1e-6)
    assert [rank["text"] for rank in ranks] == [TEXTS[rank["index"]] for rank in ranks]
    assert "text" not in post(url, "/rerank", {"query": TEXTS[0], "texts": TEXTS[:2]}).json()[0]
    empty = post(url, "/rerank", {"query": TEXTS[0], "texts": []})
    assert empty.status_code == 400 and empty.json()["error_type"] == "empty"

    scores = post(url, "/similarity", {"inputs": {"source_sentence": TEXTS[0], "sentences": TEXTS[1:]}}).json()
    np.testing.assert_allclose(scores, cosines[1:], rtol=0, atol=1e-6)
    wrong = post(url, "/similarity", {"inputs": {"source_sentence": TEXTS[0]}})
    assert wrong.status_code == 422 and wrong.json()["error_type"] == "validation" and "sentences" in wrong.json()["error"]


def test_v1_rerank_takes_documents_as_strings_or_text_objects(url, spec) -> None:
    cosines = embedlab.load(spec).similarity_pairs([(TEXTS[1], text) for text in TEXTS])
    documents = [text if index % 2 else {"text": text} for index, text in enumerate(TEXTS)]
    answer = post(url, "/v1/rerank", {"model": "tiny", "query": TEXTS[1], "documents": documents, "top_n": 2, "return_documents": True})
    results = answer.json()["results"]
    assert [result["index"] for result in results] == list(np.argsort(-cosines, kind="stable")[:2]) and results[0]["index"] == 1
    assert results[0]["document"] == {"text": TEXTS[1]}
    assert post(url, "/rerank", {"query": TEXTS[1], "documents": TEXTS}).json()["results"] == \
        post(url, "/v1/rerank", {"query": TEXTS[1], "documents": TEXTS}).json()["results"]  # no model: the default method
    wrong = post(url, "/v1/rerank", {"model": "tiny", "query": "a", "documents": [{"body": "b"}]})
    assert wrong.status_code == 400 and set(wrong.json()["error"]) == {"message", "type", "param", "code"}  # OpenAI's shape


@pytest.mark.parametrize("error, status, error_type", [
    (ApiError(400, "x", code=EMPTY_INPUT), 400, "empty"),
    (ApiError(400, "x", code="invalid_request"), 422, "validation"),
    (ApiError(404, "x", code="model_not_found"), 422, "validation"),
    (ApiError(503, "x", code="overloaded"), 429, "overloaded"),
    (ApiError(500, "x", code="internal_error"), 424, "backend"),
    (ApiError(413, "x", code="request_too_large"), 413, "validation"),
])
def test_tei_statuses_follow_tei_error_types(error, status, error_type) -> None:
    assert error.tei() == (status, {"error": "x", "error_type": error_type})


def test_default_names_the_method_that_answers_tei_bodies(spec, tiny_model) -> None:
    from embedlab.errors import InputError
    from embedlab.serve.service import ServeOptions, Service

    served = load_served([spec, f"match:{tiny_model},weights=none"], {"tiny": spec, "pairs": f"match:{tiny_model},weights=none"})
    assert Service(served, ServeOptions()).default is served["tiny"]  # the first spec
    assert Service(served, ServeOptions(default_model="pairs")).default is served["pairs"]
    with pytest.raises(InputError, match="--default nobody: not a served name"):
        Service(served, ServeOptions(default_model="nobody"))
