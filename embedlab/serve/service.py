"""What every route shares: the served methods with their batchers, the checks a request passes before any
model work (its model, its texts, the limits, its output options), scoring pairs, and ending a request
whose client went away (docs/serve.md)."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Awaitable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TypeVar

import numpy as np
from fastapi import FastAPI, Request, Response

from embedlab.data import unicode_problem
from embedlab.errors import InputError
from embedlab.methods.base import unit_rows
from embedlab.serve.batching import Batcher, Output
from embedlab.serve.guard import CLIENT_CLOSED, route_label
from embedlab.serve.metrics import ServerMetrics
from embedlab.serve.schemas import EMPTY_INPUT, ApiError
from embedlab.serve.served import ServedMethod, find_served

Result = TypeVar("Result")


@dataclass(frozen=True)
class ServeOptions:
    """Limits and batching of one server (the command's options; docs/serve.md)."""

    max_inputs: int = 2048  # OpenAI's limit on inputs per request
    max_input_chars: int = 100_000
    max_body_bytes: int = 16 * 1024 * 1024
    max_batch_tokens: int = 16_384
    max_wait_ms: float = 0.0  # a lone request starts at once: the wait only delays one client (docs/serve.md)
    max_queue: int = 1024
    batch_size: int = 32
    api_key: str | None = None
    default_model: str | None = None  # what answers a request that names no model (TEI's): the first spec unless given


class Service:
    """The served methods, their batchers, the token-counting thread and the metrics of one app."""

    def __init__(self, served: dict[str, ServedMethod], options: ServeOptions) -> None:
        self.served = served
        self.options = options
        if options.default_model is not None and options.default_model not in served:
            raise InputError(f"--default {options.default_model}: not a served name; served: {', '.join(served)}")
        self.default = served[options.default_model] if options.default_model is not None else next(iter(served.values()))
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

    def method(self, name: str | None) -> ServedMethod:
        """The served method a request names (the default one when it names none)."""
        return self.default if name is None else find_served(self.served, name)

    def vector_method(self, name: str | None) -> ServedMethod:
        entry = self.method(name)
        if not entry.vectors:
            raise ApiError(400, f"{entry.spec} is a pairwise method: it scores text pairs and has no vectors; "
                           "use /similarity or /rerank", code="invalid_request", param="model")
        return entry

    def check_texts(self, texts: Sequence[str], field: str) -> None:
        """The limits and the texts themselves: a count, no empty or blank text, no text over the limit, valid Unicode."""
        if not texts:
            raise ApiError(400, f"{field} holds no texts", code=EMPTY_INPUT, param=field)
        if len(texts) > self.options.max_inputs:
            raise ApiError(400, f"{field} holds {len(texts)} texts; at most {self.options.max_inputs} per request (--max-inputs)",
                           code="too_many_inputs", param=field)
        for index, text in enumerate(texts):
            if not text.strip():  # a blank text has no words to embed, like an empty one
                raise ApiError(400, f"{field}[{index}] is an empty string" if not text else f"{field}[{index}] holds only whitespace",
                               code=EMPTY_INPUT, param=field)
            if len(text) > self.options.max_input_chars:
                raise ApiError(400, f"{field}[{index}] has {len(text)} characters; at most {self.options.max_input_chars} "
                               "(--max-input-chars)", code="input_too_long", param=field)
            if (problem := unicode_problem(text)) is not None:
                raise ApiError(400, f"{field}[{index}] has a {problem}", code="invalid_request", param=field)

    @staticmethod
    def check_output(entry: ServedMethod, dimensions: int | None, prompt_name: str | None = None) -> None:
        """``dimensions`` (1 … the method's width, and what its precision allows) and ``prompt_name`` (one of
        the method's prompts), judged before any model work."""
        if dimensions is not None and not 1 <= dimensions <= entry.dimension:
            raise ApiError(400, f"dimensions={dimensions}: give a number from 1 to {entry.dimension} (the width of {entry.spec})",
                           code="invalid_request", param="dimensions")
        if entry.vectors:
            entry.method.output_options(None, dimensions)  # an InputError (400) where the precision forbids the width
            entry.method.prompt_text(None, prompt_name)
        elif prompt_name is not None:
            raise ApiError(400, f"{entry.spec} is a pairwise method: it takes no prompt_name", code="invalid_request", param="prompt_name")

    async def count_tokens(self, entry: ServedMethod, texts: Sequence[str]) -> list[int]:
        """Each text's tokens (on a thread of its own: the event loop keeps answering)."""
        return await asyncio.get_running_loop().run_in_executor(self._counting, entry.count_tokens, texts)

    async def scores(self, entry: ServedMethod, pairs: list[tuple[str, str]], request: Request,
                     prompt_name: str | None = None) -> tuple[np.ndarray, int]:
        """One score per pair (cosine of the vectors, or a pairwise method's own score) and the tokens read."""
        unique = list(dict.fromkeys(text for pair in pairs for text in pair))
        tokens = await self.count_tokens(entry, unique)
        batcher = self.batchers[entry.spec]
        if not entry.vectors:
            return await until_disconnect(request, self, batcher.run_on_model_thread(entry.method.similarity_pairs, pairs)), sum(tokens)
        vectors = unit_rows(await until_disconnect(request, self, batcher.encode(unique, tokens, Output(prompt_name=prompt_name))))
        row = {text: index for index, text in enumerate(unique)}  # as VectorMethod.similarity_pairs scores them
        left = vectors[[row[a] for a, _ in pairs]]
        right = vectors[[row[b] for _, b in pairs]]
        return np.einsum("ij,ij->i", left, right).astype(np.float32), sum(tokens)


async def until_disconnect(request: Request, service: Service, work: Awaitable[Result]) -> Result:
    """``work``'s result, unless the client goes away first: then the work is cancelled (its texts not yet
    encoded are dropped) and the request ends without an answer."""
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


def json_response(payload: object) -> Response:
    """``payload`` as compact JSON (serialised here, not by FastAPI's generic encoder: thousands of floats)."""
    return Response(json.dumps(payload, separators=(",", ":")), media_type="application/json")


def usage(tokens: int) -> dict[str, int]:
    return {"prompt_tokens": tokens, "total_tokens": tokens}
