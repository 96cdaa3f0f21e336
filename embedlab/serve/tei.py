"""text-embeddings-inference's routes, so that a TEI client works unchanged (docs/serve.md).

The request, answer and error shapes are TEI's own (router/src/http/types.rs and server.rs of
huggingface/text-embeddings-inference): ``POST /embed`` answers a bare list of vectors, ``POST /rerank``
with ``{"query", "texts"}`` a bare list of ``{"index", "score", "text"?}`` best first, ``POST /similarity``
with ``{"inputs": {"source_sentence", "sentences"}}`` a bare list of scores, ``GET /info`` the model's
description; errors are ``{"error", "error_type"}``. TEI's bodies name no model: the default served method
(the first spec, or ``--default``) answers them. ``/rerank`` and ``/similarity`` also take embedlab's own
bodies (:mod:`embedlab.serve.app`), told apart by their fields.
"""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, ValidationError

from embedlab.serve.batching import Output
from embedlab.serve.schemas import TeiEmbedRequest, TeiRerankRequest, TeiSimilarityRequest
from embedlab.serve.service import Service, json_response, until_disconnect
from embedlab.version import __version__


def is_tei_rerank(payload: object) -> bool:
    """TEI's rerank body has ``texts`` where Cohere's has ``documents``."""
    return isinstance(payload, dict) and "texts" in payload and "documents" not in payload


def is_tei_similarity(payload: object) -> bool:
    """TEI's similarity body nests its texts in ``inputs``."""
    return isinstance(payload, dict) and "inputs" in payload


def parsed(model: type[BaseModel], payload: object) -> BaseModel:
    """``payload`` as ``model``; a wrong body is the same 400/422 as a parameter FastAPI validates."""
    try:
        return model.model_validate(payload)
    except ValidationError as error:
        raise RequestValidationError(error.errors(), body=payload) from None


def ranked(scores: list[float], texts: list[str], return_text: bool) -> list[dict]:
    """TEI's ``Rank`` list: every text's index and score (and text), best first (ties keep their order)."""
    order = sorted(range(len(scores)), key=lambda index: -scores[index])
    return [{"index": index, **({"text": texts[index]} if return_text else {}), "score": scores[index]} for index in order]


async def tei_rerank(service: Service, payload: object, request: Request) -> Response:
    body = parsed(TeiRerankRequest, payload)
    entry = service.method(None)
    service.check_texts([body.query], "query")
    service.check_texts(body.texts, "texts")
    scores, _ = await service.scores(entry, [(body.query, text) for text in body.texts], request)
    return json_response(ranked(scores.tolist(), body.texts, body.return_text))


async def tei_similarity(service: Service, payload: object, request: Request) -> Response:
    body = parsed(TeiSimilarityRequest, payload)
    entry = service.method(None)
    prompt_name = body.parameters.prompt_name if body.parameters is not None else None
    service.check_texts([body.inputs.source_sentence], "inputs.source_sentence")
    service.check_texts(body.inputs.sentences, "inputs.sentences")
    service.check_output(entry, None, prompt_name)
    scores, _ = await service.scores(entry, [(body.inputs.source_sentence, text) for text in body.inputs.sentences], request, prompt_name)
    return json_response(scores.tolist())


def add_tei_routes(router: APIRouter, service: Service) -> None:
    """``/embed`` and ``/info`` (TEI's shapes throughout)."""

    @router.post("/embed")
    async def embed(body: TeiEmbedRequest, request: Request) -> Response:
        entry = service.vector_method(None)
        texts = [body.inputs] if isinstance(body.inputs, str) else body.inputs
        service.check_texts(texts, "inputs")
        service.check_output(entry, body.dimensions, body.prompt_name)
        tokens = await service.count_tokens(entry, texts)
        output = Output(body.dimensions, body.normalize, body.prompt_name)
        vectors = await until_disconnect(request, service, service.batchers[entry.spec].encode(texts, tokens, output))
        return json_response(vectors.tolist())

    @router.get("/info")
    async def info() -> Response:
        entry = service.default
        options = service.options
        return json_response({
            "model_id": entry.names[0], "model_sha": None, "model_dtype": "float32", "served_model_name": entry.names[0],
            "model_type": {"embedding": {"pooling": entry.spec}} if entry.vectors else {"reranker": {"id2label": {}, "label2id": {}}},
            "max_concurrent_requests": options.max_queue, "max_input_length": entry.max_input_tokens,
            "max_batch_tokens": options.max_batch_tokens, "max_batch_requests": None, "max_client_batch_size": options.max_inputs,
            "auto_truncate": False, "tokenization_workers": 1, "version": __version__, "sha": None, "docker_label": None,
            "spec": entry.spec, "dimension": entry.dimension,  # embedlab's own
        })
