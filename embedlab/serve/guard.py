"""What wraps every request: the body-size limit, the API key, the error shape, and the request metrics.

:class:`Guard` is a plain ASGI middleware around the whole app: it refuses a body over the limit (413)
before the app parses any of it, and counts every answer (route, status, latency) whatever produced it,
a refusal of its own included. The exception handlers turn every refusal into OpenAI's error shape.
"""

from __future__ import annotations

import hmac
import time
from collections.abc import Awaitable, Callable

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from embedlab.errors import InputError, UnknownNameError
from embedlab.serve.batching import QueueFull
from embedlab.serve.metrics import ServerMetrics
from embedlab.serve.schemas import ApiError

ROUTES = frozenset({"/v1/embeddings", "/v1/models", "/similarity", "/rerank", "/health", "/metrics"})
RETRY_AFTER_S = 1  # a full queue drains in about a batch's time
CLIENT_CLOSED = 499  # nginx's status for a request whose client went away: only the metrics see it
_GONE = object()


def route_label(path: str) -> str:
    """The metrics label of a path: a route, or ``other`` (unknown paths must not create label values)."""
    return path if path in ROUTES else "other"


def error_response(error: ApiError, metrics: ServerMetrics, path: str) -> JSONResponse:
    metrics.errors.labels(route_label(path), error.code).inc()
    return JSONResponse(error.body(), status_code=error.status, headers=error.headers)


def _validation_message(error: RequestValidationError) -> tuple[str, str | None]:
    """One line for pydantic's first complaint: malformed JSON, a missing field, or a wrong type."""
    first = error.errors()[0]
    location = [str(part) for part in first.get("loc", ()) if part != "body"]
    if first.get("type") == "json_invalid":
        return f"the body is not valid JSON: {first.get('msg')}", None
    if not location:
        return f"the body must be a JSON object: {first.get('msg')}", None
    param = location[0]
    if param == "input":  # a union of str and list[str]: pydantic's complaint names the union's branches
        return "input must be a string or a list of strings (token-id arrays are not accepted)", param
    return f"{'.'.join(location)}: {first.get('msg')}", param


def install_error_handlers(app: FastAPI, metrics: ServerMetrics) -> None:
    """Every refusal in OpenAI's error shape, with the status its cause calls for."""
    def handler(convert: Callable[[Exception], ApiError]) -> Callable[[Request, Exception], Awaitable[JSONResponse]]:
        async def handle(request: Request, error: Exception) -> JSONResponse:
            return error_response(convert(error), metrics, request.url.path)
        return handle

    def validation(error: RequestValidationError) -> ApiError:
        message, param = _validation_message(error)
        return ApiError(400, message, code="invalid_request", param=param)

    app.add_exception_handler(ApiError, handler(lambda error: error))
    app.add_exception_handler(RequestValidationError, handler(validation))
    app.add_exception_handler(UnknownNameError, handler(lambda error: ApiError(404, str(error), code="model_not_found", param="model")))
    app.add_exception_handler(InputError, handler(lambda error: ApiError(400, str(error), code="invalid_request")))
    app.add_exception_handler(QueueFull, handler(lambda error: ApiError(
        503, f"{error}; retry later", code="overloaded", headers={"Retry-After": str(RETRY_AFTER_S)})))
    app.add_exception_handler(HTTPException, handler(lambda error: ApiError(
        error.status_code, str(error.detail), code="not_found" if error.status_code == 404 else "invalid_request")))
    app.add_exception_handler(Exception, handler(lambda error: ApiError(
        500, f"internal error: {type(error).__name__}: {error}", code="internal_error")))


def key_checker(api_key: str | None) -> Callable[[Request], None]:
    """A dependency that refuses a request without ``Authorization: Bearer <api_key>`` (none when no key)."""
    expected = f"Bearer {api_key}".encode() if api_key else None

    def check(request: Request) -> None:
        if expected is None:
            return
        given = request.headers.get("authorization", "").encode("utf-8", "surrogateescape")
        if not hmac.compare_digest(given, expected):  # constant time: the answer's timing says nothing of the key
            raise ApiError(401, "missing or wrong API key: send the header Authorization: Bearer <key>", code="invalid_api_key")

    return check


class Guard:
    """The ASGI middleware of the module docstring."""

    def __init__(self, app, metrics: ServerMetrics, max_body_bytes: int) -> None:
        self.app = app
        self.metrics = metrics
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        route = route_label(scope["path"])
        started = time.perf_counter()
        status = [500]

        async def send_and_note(message) -> None:
            if message["type"] == "http.response.start":
                status[0] = message["status"]
            await send(message)

        try:
            body = await self._body(scope, receive)
            if body is _GONE:  # the client left before its body was all sent: no one to answer
                status[0] = CLIENT_CLOSED
            elif body is None:
                await self._refuse(scope, receive, send_and_note)
            else:
                await self.app(scope, _replay(body, receive), send_and_note)
        finally:
            self.metrics.requests.labels(route, str(status[0])).inc()
            self.metrics.latency.labels(route).observe(time.perf_counter() - started)

    async def _body(self, scope, receive) -> bytes | object | None:
        """The whole body; None once it is over the limit (by its Content-Length, or as it arrives); or
        ``_GONE`` when the client disconnected before sending all of it."""
        declared = dict(scope["headers"]).get(b"content-length", b"0")
        if declared.isdigit() and int(declared) > self.max_body_bytes:
            return None
        chunks, size = [], 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return _GONE
            chunks.append(message.get("body", b""))
            size += len(chunks[-1])
            if size > self.max_body_bytes:
                return None
            if not message.get("more_body", False):
                break
        return b"".join(chunks)

    async def _refuse(self, scope, receive, send) -> None:
        error = ApiError(413, f"the request body is over {self.max_body_bytes} bytes (--max-body-bytes)", code="request_too_large")
        response = error_response(error, self.metrics, scope["path"])
        response.headers["connection"] = "close"  # the rest of the body is not read: this connection ends here
        await response(scope, receive, send)

def _replay(body: bytes, receive):
    """A ``receive`` that hands the app the body already read, then what the client sends next (a disconnect)."""
    delivered = False

    async def replay():
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay
