"""embedlab/serve/app.py (with guard.py, batching.py, metrics.py): the routes of a real uvicorn server on
127.0.0.1, through the official ``openai`` client and plain HTTP, against in-process ``encode``."""

from __future__ import annotations

import base64
import json
import threading

import httpx
import numpy as np
import openai
import pytest
from transformers import AutoTokenizer

import embedlab
from embedlab.errors import InputError
from embedlab.serve.served import load_served
from serve_helpers import TEXTS, metric, thread_server, tiny_model, wait_for  # noqa: F401 - tiny_model: a fixture
from tolerance import COSINE_FLOOR, UNIT_ATOL

KEY = "test-key-123"


@pytest.fixture(scope="module")
def spec(tiny_model) -> str:
    return str(tiny_model)


@pytest.fixture(scope="module")
def served(spec, tiny_model) -> dict:
    return load_served([spec], {"tiny": spec, "tiny-match": f"match:{tiny_model},weights=none", "tiny-unit": f"{spec}:post=normalize"})


@pytest.fixture(scope="module")
def url(served) -> str:
    with thread_server(served, max_inputs=8, max_input_chars=200, max_body_bytes=4096) as address:
        yield address


@pytest.fixture(scope="module")
def expected(spec) -> np.ndarray:
    return embedlab.load(spec).encode(TEXTS)


def post(url: str, route: str, body: object, headers: dict | None = None) -> httpx.Response:
    payload = body if isinstance(body, bytes) else json.dumps(body).encode()
    return httpx.post(f"{url}{route}", content=payload, headers={"content-type": "application/json", **(headers or {})},
                      trust_env=False, timeout=30)


@pytest.mark.crosspath
def test_the_openai_client_gets_the_in_process_vectors(url, spec, tiny_model, expected) -> None:
    client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0)
    answer = client.embeddings.create(model="tiny", input=TEXTS)  # the client asks for base64 and decodes it
    assert [item.index for item in answer.data] == list(range(len(TEXTS)))
    # served (batched with other requests) vs in-process encode: other batches, float32 rounding
    np.testing.assert_allclose(np.array([item.embedding for item in answer.data]), expected, rtol=0, atol=UNIT_ATOL)
    floats = client.embeddings.create(model=spec, input=TEXTS[1], encoding_format="float")  # the spec as typed, one string
    np.testing.assert_allclose(floats.data[0].embedding, expected[1], rtol=0, atol=UNIT_ATOL)  # one text alone: another batch
    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    assert answer.usage.prompt_tokens == answer.usage.total_tokens == sum(len(ids) for ids in tokenizer(TEXTS)["input_ids"])
    assert answer.model == "tiny"
    with pytest.raises(openai.BadRequestError, match="empty string"):  # refusals reach the client as OpenAI's do
        client.embeddings.create(model="tiny", input="")
    with pytest.raises(openai.NotFoundError, match="not served here"):
        client.embeddings.create(model="text-embedding-3-small", input="a man")


def test_base64_decodes_to_the_float_answer(url) -> None:
    as_floats = post(url, "/v1/embeddings", {"model": "tiny", "input": TEXTS[:3]}).json()["data"]
    as_base64 = post(url, "/v1/embeddings", {"model": "tiny", "input": TEXTS[:3], "encoding_format": "base64"}).json()["data"]
    for floats, encoded in zip(as_floats, as_base64):
        assert np.array_equal(np.frombuffer(base64.b64decode(encoded["embedding"]), dtype="<f4"),
                              np.asarray(floats["embedding"], dtype=np.float32))


def test_models_lists_every_name(url, spec) -> None:
    names = {model["id"] for model in httpx.get(f"{url}/v1/models", trust_env=False).json()["data"]}
    assert names == {spec, "tiny", "tiny-match", embedlab.load(f"match:{spec},weights=none").spec, "tiny-unit", f"{spec}:post=normalize"}


@pytest.mark.parametrize("body, status, param", [
    (b'{"model": "tiny", "input": ["a man"', 400, None),                    # malformed JSON
    (b'["a man"]', 400, None),                                             # not an object
    ({"input": ["a man"]}, 400, "model"),                                   # no model
    ({"model": "tiny", "input": [1, 2, 3]}, 400, "input"),                   # token ids
    ({"model": "tiny", "input": "a man", "dimensions": "8"}, 400, "dimensions"),
    ({"model": "tiny", "input": "a", "encoding_format": "int8"}, 400, "encoding_format"),
    ({"model": "nobody", "input": "a man"}, 404, "model"),
    ({"model": "tiny", "input": ""}, 400, "input"),
    ({"model": "tiny", "input": ["a man", ""]}, 400, "input"),
    ({"model": "tiny", "input": []}, 400, "input"),
    ({"model": "tiny", "input": ["a"] * 9}, 400, "input"),                   # over --max-inputs 8
    ({"model": "tiny", "input": ["a" * 201]}, 400, "input"),                # over --max-input-chars 200
    ({"model": "tiny", "input": "a man", "user": "u" * 5000}, 413, None),  # body over --max-body-bytes 4096
    (b'{"model": "tiny", "input": "a \\ud800 b"}', 400, "input"),             # a lone surrogate
    ({"model": "tiny", "input": "a man", "dimensions": 0}, 400, "dimensions"),
    ({"model": "tiny", "input": "a man", "dimensions": 33}, 400, "dimensions"),  # wider than the model (32)
    ({"model": "tiny-match", "input": "a man"}, 400, "model"),              # a pairwise method has no vectors
])
@pytest.mark.crosspath
def test_each_bad_request_gets_its_status_in_openai_shape_and_the_server_keeps_serving(url, expected, body, status, param) -> None:
    answer = post(url, "/v1/embeddings", body)
    assert answer.status_code == status, answer.text
    error = answer.json()["error"]
    assert set(error) == {"message", "type", "param", "code"} and error["message"] and error["type"] == "invalid_request_error"
    assert error["param"] == param
    good = post(url, "/v1/embeddings", {"model": "tiny", "input": TEXTS[0], "encoding_format": "float"})
    np.testing.assert_allclose(good.json()["data"][0]["embedding"], expected[0], rtol=0, atol=UNIT_ATOL)  # another batch


@pytest.mark.crosspath
def test_dimensions_are_truncate_dim_or_a_400_while_encode_refuses_it(url, spec) -> None:
    method = embedlab.load(spec)
    answer = post(url, "/v1/embeddings", {"model": "tiny", "input": TEXTS[:2], "dimensions": 8, "encoding_format": "float"})
    try:
        truncated = method.encode(TEXTS[:2], truncate_dim=8)
    except InputError as refusal:
        assert answer.status_code == 400 and "truncate_dim" in str(refusal)
        assert answer.json()["error"]["code"] == "invalid_request"
    else:  # once encode implements truncate_dim, the server passes it through
        assert answer.status_code == 200
        np.testing.assert_allclose([item["embedding"] for item in answer.json()["data"]], truncated, rtol=0, atol=UNIT_ATOL)


@pytest.mark.crosspath
def test_similarity_and_rerank_equal_in_process_scores(url, spec, tiny_model) -> None:
    pairs = [(TEXTS[0], TEXTS[1]), (TEXTS[2], TEXTS[2]), (TEXTS[3], TEXTS[0])]
    scores = post(url, "/similarity", {"model": "tiny", "pairs": pairs}).json()["scores"]
    # cosines of vectors encoded in other batches: float32 rounding
    np.testing.assert_allclose(scores, embedlab.load(spec).similarity_pairs(pairs), rtol=0, atol=UNIT_ATOL)
    assert scores[1] >= COSINE_FLOOR  # a text against itself
    against = post(url, "/similarity", {"model": "tiny", "source": TEXTS[0], "sentences": TEXTS[1:]}).json()["scores"]
    np.testing.assert_allclose(against, embedlab.load(spec).similarity_pairs([(TEXTS[0], text) for text in TEXTS[1:]]), atol=UNIT_ATOL)
    assert post(url, "/similarity", {"model": "tiny", "pairs": pairs, "source": "a"}).status_code == 400  # one shape or the other

    match_spec = f"match:{tiny_model},weights=none"
    match = embedlab.load(match_spec).similarity_pairs([(TEXTS[0], text) for text in TEXTS])
    answer = post(url, "/rerank", {"model": "tiny-match", "query": TEXTS[0], "documents": TEXTS, "top_n": 3, "return_documents": True}).json()
    assert [result["index"] for result in answer["results"]] == list(np.argsort(-match, kind="stable")[:3])
    np.testing.assert_allclose([result["relevance_score"] for result in answer["results"]], np.sort(match)[::-1][:3], atol=UNIT_ATOL)
    assert [result["document"]["text"] for result in answer["results"]] == [TEXTS[result["index"]] for result in answer["results"]]
    cosine = post(url, "/rerank", {"model": "tiny", "query": TEXTS[0], "documents": TEXTS}).json()["results"]
    assert cosine[0] == {"index": 0, "relevance_score": pytest.approx(1.0, abs=1e-6)}  # the query itself first, no text


def test_metrics_count_requests_errors_and_batches(url) -> None:
    before = metric(url, "embedlab_requests_total", route="/v1/embeddings", status="404")
    post(url, "/v1/embeddings", {"model": "nobody", "input": "a"})
    assert metric(url, "embedlab_requests_total", route="/v1/embeddings", status="404") == before + 1
    assert metric(url, "embedlab_request_errors_total", route="/v1/embeddings", code="model_not_found") >= 1
    assert metric(url, "embedlab_batch_texts_count") >= 1 and metric(url, "embedlab_request_duration_seconds_count") >= 1
    assert metric(url, "embedlab_queue_depth") == 0  # nothing waits now
    assert httpx.get(f"{url}/health", trust_env=False).json()["status"] == "ok"


@pytest.mark.crosspath
def test_key_batching_and_a_full_queue(served, expected) -> None:
    """With --api-key every route but /health needs it; requests that wait together share one encode call;
    past --max-queue a request gets 503 with Retry-After, and the queued ones still get their answers."""
    with thread_server(served, api_key=KEY, max_queue=3, max_wait_ms=400) as url:
        key = {"authorization": f"Bearer {KEY}"}
        assert httpx.get(f"{url}/health", trust_env=False).status_code == 200
        assert httpx.get(f"{url}/v1/models", trust_env=False).status_code == 401
        wrong = post(url, "/v1/embeddings", {"model": "tiny", "input": "a"}, {"authorization": "Bearer nope"})
        assert wrong.status_code == 401 and wrong.json()["error"]["code"] == "invalid_api_key"
        answers: list[httpx.Response | None] = [None] * 3

        def send(index: int) -> None:
            answers[index] = post(url, "/v1/embeddings", {"model": "tiny", "input": TEXTS[index:index + 2], "encoding_format": "float"}, key)

        threads = [threading.Thread(target=send, args=(index,)) for index in range(3)]
        for thread in threads:
            thread.start()
        wait_for(lambda: metric(url, "embedlab_queue_depth", key) == 3)
        full = post(url, "/v1/embeddings", {"model": "tiny", "input": "a"}, key)
        assert full.status_code == 503 and full.headers["retry-after"] == "1" and full.json()["error"]["type"] == "server_error"
        for thread in threads:
            thread.join(timeout=30)
        for index, answer in enumerate(answers):
            np.testing.assert_allclose([item["embedding"] for item in answer.json()["data"]], expected[index:index + 2], atol=UNIT_ATOL)
        assert metric(url, "embedlab_batch_requests_count", key) == 1 and metric(url, "embedlab_batch_requests_sum", key) == 3


def test_dimensions_renormalise_unit_vectors_as_openai_does(url, spec) -> None:
    """A method whose full vectors are unit length (post=normalize) gets its cut vectors renormalised (OpenAI's
    shortened embeddings); the raw spec's cut stays a plain cut (test above)."""
    full = embedlab.load(f"{spec}:post=normalize").encode(TEXTS[:3])
    answer = post(url, "/v1/embeddings", {"model": "tiny-unit", "input": TEXTS[:3], "dimensions": 8, "encoding_format": "float"})
    vectors = np.array([item["embedding"] for item in answer.json()["data"]])
    cut = full[:, :8]
    # float32 rows of unit scale: the server's renormalisation and numpy's differ only by rounding
    np.testing.assert_allclose(vectors, cut / np.linalg.norm(cut, axis=1, keepdims=True), rtol=0, atol=1e-6)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-6)
    assert np.linalg.norm(cut, axis=1).max() < 0.99  # a plain cut would not be unit length


@pytest.mark.parametrize("given, message", [
    ([[1, 2, 3], [4, 5]], "check_embedding_ctx_length=False"),  # what LangChain's OpenAIEmbeddings sends by default
    ([101, 2023], "check_embedding_ctx_length=False"),
    (["a man", None], "input[1] is null, not a string"),
    (["a man", {"text": "b"}], "input[1] is an object, not a string"),
    ("   ", "input[0] holds only whitespace"),
    (["a man", " \n\t"], "input[1] holds only whitespace"),
])
def test_inputs_that_are_not_texts_are_named_for_what_they_are(url, given, message) -> None:
    answer = post(url, "/v1/embeddings", {"model": "tiny", "input": given})
    assert answer.status_code == 400 and message in answer.json()["error"]["message"]
    assert answer.json()["error"]["param"] == "input"


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", None])  # None: curl -d with -H ''
def test_a_json_body_is_read_whatever_its_content_type(url, expected, content_type) -> None:
    headers = {"content-type": content_type} if content_type else {}
    answer = httpx.post(f"{url}/v1/embeddings", content=json.dumps({"model": "tiny", "input": TEXTS[0], "encoding_format": "float"}),
                        headers=headers, trust_env=False, timeout=30)
    assert answer.status_code == 200, answer.text
    np.testing.assert_allclose(answer.json()["data"][0]["embedding"], expected[0], rtol=0, atol=1e-6)


def test_the_bearer_scheme_is_case_insensitive_and_a_401_says_how_to_authenticate(served) -> None:
    with thread_server(served, api_key=KEY) as url:
        for scheme in ("bearer", "BEARER", "Bearer"):
            assert httpx.get(f"{url}/v1/models", headers={"authorization": f"{scheme} {KEY}"}, trust_env=False).status_code == 200
        for header in ({}, {"authorization": f"Basic {KEY}"}, {"authorization": f"bearer {KEY}x"}):
            refused = httpx.get(f"{url}/v1/models", headers=header, trust_env=False)
            assert refused.status_code == 401 and refused.headers["www-authenticate"].startswith("Bearer")
