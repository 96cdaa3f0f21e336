"""The HTTP routes: OpenAI's ``/v1/embeddings`` and ``/v1/models``, ``/similarity``, ``/rerank`` (also at
``/v1/rerank``, Cohere's and Jina's path), ``/health`` and ``/metrics``, and text-embeddings-inference's
``/embed`` and ``/info`` (:mod:`.tei`; ``/rerank`` and ``/similarity`` take TEI's bodies too); docs/serve.md.

OpenAI's and embedlab's routes answer errors in OpenAI's shape, TEI's routes and bodies in TEI's. Every
request is judged whole before any model work (its model, its texts, the limits), so a bad one costs
nothing and disturbs nobody; the texts then go through their method's :class:`Batcher`. Answers are
serialised here, not by FastAPI's generic encoder (thousands of floats per answer).
"""

from __future__ import annotations

import base64
import json

import numpy as np
from fastapi import APIRouter, Depends, FastAPI, Request, Response

from embedlab.serve.batching import Output
from embedlab.serve.guard import Guard, install_error_handlers, key_checker
from embedlab.serve.schemas import ApiError, EmbeddingsRequest, RerankRequest, SimilarityRequest
from embedlab.serve.served import ServedMethod
from embedlab.serve.service import ServeOptions, Service, json_response, until_disconnect, usage
from embedlab.serve.tei import add_tei_routes, is_tei_rerank, is_tei_similarity, parsed, tei_rerank, tei_similarity


def _embedding(row: np.ndarray, encoding_format: str) -> list[float] | str:
    if encoding_format == "base64":  # OpenAI's: the little-endian float32 bytes
        return base64.b64encode(np.ascontiguousarray(row, dtype="<f4").tobytes()).decode("ascii")
    return row.tolist()


def _similarity_pairs(body: SimilarityRequest) -> list[tuple[str, str]]:
    """The pairs a similarity request asks for: its ``pairs``, or ``source`` beside each of ``sentences``."""
    if (body.pairs is None) == (body.source is None):
        raise ApiError(400, "give either pairs ([[text_a, text_b], ...]) or source with sentences", code="invalid_request")
    if body.pairs is not None:
        return [tuple(pair) for pair in body.pairs]
    if not body.sentences:
        raise ApiError(400, "sentences: give the texts to compare with source", code="invalid_request", param="sentences")
    return [(body.source, sentence) for sentence in body.sentences]


async def _payload(request: Request) -> object:
    """The body as JSON, for the routes that take more than one shape of body."""
    try:
        return json.loads(await request.body())
    except ValueError as error:  # JSONDecodeError, or bytes that are not UTF-8
        raise ApiError(400, f"the body is not valid JSON: {error}", code="invalid_request") from None


async def _similarity(service: Service, request: Request) -> Response:
    """``/similarity``: embedlab's body (``model`` with ``pairs``, or ``source`` and ``sentences``) or TEI's."""
    payload = await _payload(request)
    if is_tei_similarity(payload):
        request.state.tei = True
        return await tei_similarity(service, payload, request)
    body = parsed(SimilarityRequest, payload)
    entry = service.method(body.model)
    pairs = _similarity_pairs(body)
    service.check_texts([text for pair in pairs for text in pair], "pairs" if body.pairs is not None else "sentences")
    scores, tokens = await service.scores(entry, pairs, request)
    return json_response({"object": "list", "model": body.model, "scores": scores.tolist(), "usage": usage(tokens)})


async def _rerank(service: Service, request: Request) -> Response:
    """``/rerank`` and ``/v1/rerank``: Cohere's and Jina's body (``documents`` as strings or ``{"text"}``) or TEI's."""
    payload = await _payload(request)
    if is_tei_rerank(payload):
        request.state.tei = True
        return await tei_rerank(service, payload, request)
    body = parsed(RerankRequest, payload)
    entry = service.method(body.model)
    documents = body.texts
    service.check_texts([body.query], "query")
    service.check_texts(documents, "documents")
    if body.top_n is not None and body.top_n < 1:
        raise ApiError(400, f"top_n={body.top_n}: give a positive number", code="invalid_request", param="top_n")
    scores, tokens = await service.scores(entry, [(body.query, document) for document in documents], request)
    order = sorted(range(len(scores)), key=lambda index: -scores[index])[:body.top_n]  # stable: ties keep their order
    results = [{"index": index, "relevance_score": float(scores[index]),
                **({"document": {"text": documents[index]}} if body.return_documents else {})} for index in order]
    return json_response({"object": "list", "model": body.model or entry.names[0], "results": results, "usage": usage(tokens)})


def add_routes(app: FastAPI, service: Service) -> None:
    """The routes (docs/serve.md); each judges its request whole before any model work. Every route but
    ``/health`` needs the API key when there is one (a load balancer probes without it)."""
    keyed = APIRouter(dependencies=[Depends(key_checker(service.options.api_key))])

    @keyed.post("/v1/embeddings")
    async def embeddings(body: EmbeddingsRequest, request: Request) -> Response:
        entry = service.vector_method(body.model)
        texts = [body.input] if isinstance(body.input, str) else body.input
        service.check_texts(texts, "input")
        service.check_output(entry, body.dimensions)
        tokens = await service.count_tokens(entry, texts)
        # OpenAI's shortened embeddings are unit vectors again where the full ones are
        output = Output(body.dimensions, normalize=body.dimensions is not None and entry.unit_vectors)
        vectors = await until_disconnect(request, service, service.batchers[entry.spec].encode(texts, tokens, output))
        data = [{"object": "embedding", "index": index, "embedding": _embedding(row, body.encoding_format)}
                for index, row in enumerate(vectors)]
        return json_response({"object": "list", "data": data, "model": body.model, "usage": usage(sum(tokens))})

    @keyed.get("/v1/models")
    async def models() -> Response:
        data = [{"id": name, "object": "model", "created": 0, "owned_by": "embedlab", "spec": entry.spec}
                for name, entry in service.served.items()]
        return json_response({"object": "list", "data": data})

    @keyed.post("/similarity")
    async def similarity(request: Request) -> Response:
        return await _similarity(service, request)

    @keyed.post("/rerank")
    @keyed.post("/v1/rerank")
    async def rerank(request: Request) -> Response:
        return await _rerank(service, request)

    add_tei_routes(keyed, service)

    @app.get("/health")
    async def health() -> Response:
        return json_response({"status": "ok", "models": sorted(service.batchers)})

    @keyed.get("/metrics")
    async def metrics() -> Response:
        return Response(service.metrics.exposition(), media_type=service.metrics.content_type)

    app.include_router(keyed)


def create_app(served: dict[str, ServedMethod], options: ServeOptions = ServeOptions()) -> FastAPI:
    """The ASGI app serving ``served`` (from :func:`embedlab.serve.served.load_served`)."""
    service = Service(served, options)
    app = FastAPI(title="embedlab", lifespan=service.lifespan, openapi_url=None, docs_url=None, redoc_url=None)
    install_error_handlers(app, service.metrics)
    add_routes(app, service)
    app.add_middleware(Guard, metrics=service.metrics, max_body_bytes=options.max_body_bytes)
    return app
