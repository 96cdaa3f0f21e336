"""The HTTP routes: OpenAI's ``/v1/embeddings`` and ``/v1/models``, ``/similarity``, ``/rerank``,
``/health`` and ``/metrics`` (docs/serve.md).

Every request is judged whole before any model work (its model, its texts, the limits), so a bad one
costs nothing and disturbs nobody; the texts then go through their method's :class:`Batcher`. Answers
are serialised here, not by FastAPI's generic encoder (thousands of floats per answer).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
from collections.abc import Awaitable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TypeVar

import numpy as np
from fastapi import APIRouter, Depends, FastAPI, Request, Response

from embedlab.data import unicode_problem
from embedlab.methods.base import unit_rows
from embedlab.serve.batching import Batcher
from embedlab.serve.guard import CLIENT_CLOSED, Guard, install_error_handlers, key_checker, route_label
from embedlab.serve.metrics import ServerMetrics
from embedlab.serve.schemas import ApiError, EmbeddingsRequest, RerankRequest, SimilarityRequest
from embedlab.serve.served import ServedMethod, find_served

Result = TypeVar("Result")


@dataclass(frozen=True)
class ServeOptions:
    """Limits and batching of one server (the command's options; docs/serve.md)."""

    max_inputs: int = 2048  # OpenAI's limit on inputs per request
    max_input_chars: int = 100_000
    max_body_bytes: int = 16 * 1024 * 1024
    max_batch_tokens: int = 16_384
    max_wait_ms: float = 5.0
    max_queue: int = 1024
    batch_size: int = 32
    api_key: str | None = None


class Service:
    """The served methods, their batchers, the token-counting thread and the metrics of one app."""

    def __init__(self, served: dict[str, ServedMethod], options: ServeOptions) -> None:
        self.served = served
        self.options = options
        self.metrics = ServerMetrics()
        unique = {id(entry): entry for entry in served.values()}.values()
        self.batchers = {entry.spec: Batcher(entry, self.metrics, max_batch_tokens=options.max_batch_tokens,
                                             max_wait_s=options.max_wait_ms / 1000, max_queue=options.max_queue,
                                             batch_size=options.batch_size) for entry in unique}
        self._counting = ThreadPoolExecutor(max_workers=1, thread_name_prefix="embedlab-serve-tokens")

    @contextlib.asynccontextmanager
    async def lifespan(self, app: FastAPI):
        for batcher in self.batchers.values():
            batcher.start()
        yield
        for batcher in self.batchers.values():  # the server has drained: no request waits any more
            await batcher.stop()
        self._counting.shutdown(wait=True)

    def check_texts(self, texts: Sequence[str], field: str) -> None:
        """The limits and the texts themselves: a count, no empty text, no text over the limit, valid Unicode."""
        if not texts:
            raise ApiError(400, f"{field} holds no texts", code="invalid_request", param=field)
        if len(texts) > self.options.max_inputs:
            raise ApiError(400, f"{field} holds {len(texts)} texts; at most {self.options.max_inputs} per request (--max-inputs)",
                           code="too_many_inputs", param=field)
        for index, text in enumerate(texts):
            if not text:
                raise ApiError(400, f"{field}[{index}] is an empty string", code="invalid_request", param=field)
            if len(text) > self.options.max_input_chars:
                raise ApiError(400, f"{field}[{index}] has {len(text)} characters; at most {self.options.max_input_chars} "
                               "(--max-input-chars)", code="input_too_long", param=field)
            if (problem := unicode_problem(text)) is not None:
                raise ApiError(400, f"{field}[{index}] has a {problem}", code="invalid_request", param=field)

    async def count_tokens(self, entry: ServedMethod, texts: Sequence[str]) -> int:
        counts = await asyncio.get_running_loop().run_in_executor(self._counting, entry.count_tokens, texts)
        return sum(counts)

    async def scores(self, entry: ServedMethod, pairs: list[tuple[str, str]], request: Request) -> tuple[np.ndarray, int]:
        """One score per pair (cosine of the vectors, or a pairwise method's own score) and the tokens read."""
        unique = list(dict.fromkeys(text for pair in pairs for text in pair))
        tokens = await self.count_tokens(entry, unique)
        batcher = self.batchers[entry.spec]
        if not entry.vectors:
            return await until_disconnect(request, self, batcher.run_on_model_thread(entry.method.similarity_pairs, pairs)), tokens
        vectors = unit_rows(await until_disconnect(request, self, batcher.encode(unique, tokens)))
        row = {text: index for index, text in enumerate(unique)}  # as VectorMethod.similarity_pairs scores them
        left = vectors[[row[a] for a, _ in pairs]]
        right = vectors[[row[b] for _, b in pairs]]
        return np.einsum("ij,ij->i", left, right).astype(np.float32), tokens


async def until_disconnect(request: Request, service: Service, work: Awaitable[Result]) -> Result:
    """``work``'s result, unless the client goes away first: then the work is cancelled (a batch not yet
    started drops its texts) and the request ends without an answer."""
    task = asyncio.ensure_future(work)
    watcher = asyncio.ensure_future(_disconnected(request))
    done, _ = await asyncio.wait({task, watcher}, return_when=asyncio.FIRST_COMPLETED)
    if task in done:
        watcher.cancel()
        return task.result()
    task.cancel()
    service.metrics.disconnects.labels(route_label(request.url.path)).inc()
    raise ApiError(CLIENT_CLOSED, "the client closed the connection before the answer", code="client_closed")


async def _disconnected(request: Request) -> None:
    while (await request.receive())["type"] != "http.disconnect":
        pass


def _json(payload: object) -> Response:
    return Response(json.dumps(payload, separators=(",", ":")), media_type="application/json")


def _usage(tokens: int) -> dict[str, int]:
    return {"prompt_tokens": tokens, "total_tokens": tokens}


def _embedding(row: np.ndarray, encoding_format: str) -> list[float] | str:
    if encoding_format == "base64":  # OpenAI's: the little-endian float32 bytes
        return base64.b64encode(np.ascontiguousarray(row, dtype="<f4").tobytes()).decode("ascii")
    return row.tolist()


def _vector_method(service: Service, name: str) -> ServedMethod:
    entry = find_served(service.served, name)
    if not entry.vectors:
        raise ApiError(400, f"{entry.spec} is a pairwise method: it scores text pairs and has no vectors; "
                       "use /similarity or /rerank", code="invalid_request", param="model")
    return entry


def _check_dimensions(entry: ServedMethod, dimensions: int | None) -> None:
    if dimensions is not None and not 1 <= dimensions <= entry.dimension:
        raise ApiError(400, f"dimensions={dimensions}: give a number from 1 to {entry.dimension} (the width of {entry.spec})",
                       code="invalid_request", param="dimensions")


def _similarity_pairs(body: SimilarityRequest) -> list[tuple[str, str]]:
    """The pairs a similarity request asks for: its ``pairs``, or ``source`` beside each of ``sentences``."""
    if (body.pairs is None) == (body.source is None):
        raise ApiError(400, "give either pairs ([[text_a, text_b], ...]) or source with sentences", code="invalid_request")
    if body.pairs is not None:
        return [tuple(pair) for pair in body.pairs]
    if not body.sentences:
        raise ApiError(400, "sentences: give the texts to compare with source", code="invalid_request", param="sentences")
    return [(body.source, sentence) for sentence in body.sentences]


def add_routes(app: FastAPI, service: Service) -> None:
    """The six routes (docs/serve.md); each judges its request whole before any model work. Every route
    but ``/health`` needs the API key when there is one (a load balancer probes without it)."""
    keyed = APIRouter(dependencies=[Depends(key_checker(service.options.api_key))])

    @keyed.post("/v1/embeddings")
    async def embeddings(body: EmbeddingsRequest, request: Request) -> Response:
        entry = _vector_method(service, body.model)
        texts = [body.input] if isinstance(body.input, str) else body.input
        service.check_texts(texts, "input")
        _check_dimensions(entry, body.dimensions)
        tokens = await service.count_tokens(entry, texts)
        vectors = await until_disconnect(request, service, service.batchers[entry.spec].encode(texts, tokens, body.dimensions))
        data = [{"object": "embedding", "index": index, "embedding": _embedding(row, body.encoding_format)}
                for index, row in enumerate(vectors)]
        return _json({"object": "list", "data": data, "model": body.model, "usage": _usage(tokens)})

    @keyed.get("/v1/models")
    async def models() -> Response:
        data = [{"id": name, "object": "model", "created": 0, "owned_by": "embedlab", "spec": entry.spec}
                for name, entry in service.served.items()]
        return _json({"object": "list", "data": data})

    @keyed.post("/similarity")
    async def similarity(body: SimilarityRequest, request: Request) -> Response:
        entry = find_served(service.served, body.model)
        pairs = _similarity_pairs(body)
        service.check_texts([text for pair in pairs for text in pair], "pairs" if body.pairs is not None else "sentences")
        scores, tokens = await service.scores(entry, pairs, request)
        return _json({"object": "list", "model": body.model, "scores": scores.tolist(), "usage": _usage(tokens)})

    @keyed.post("/rerank")
    async def rerank(body: RerankRequest, request: Request) -> Response:
        entry = find_served(service.served, body.model)
        service.check_texts([body.query], "query")
        service.check_texts(body.documents, "documents")
        if body.top_n is not None and body.top_n < 1:
            raise ApiError(400, f"top_n={body.top_n}: give a positive number", code="invalid_request", param="top_n")
        scores, tokens = await service.scores(entry, [(body.query, document) for document in body.documents], request)
        order = sorted(range(len(scores)), key=lambda index: -scores[index])[:body.top_n]  # stable: ties keep their order
        results = [{"index": index, "relevance_score": float(scores[index]),
                    **({"document": {"text": body.documents[index]}} if body.return_documents else {})} for index in order]
        return _json({"object": "list", "model": body.model, "results": results, "usage": _usage(tokens)})

    @app.get("/health")
    async def health() -> Response:
        return _json({"status": "ok", "models": sorted(service.batchers)})

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
