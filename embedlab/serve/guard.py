"""What wraps every request: the body-size limit, the API key, the error shape, and the request metrics.

:class:`Guard` is a plain ASGI middleware around the whole app: it refuses a body over the limit (413)
before the app parses any of it, and counts every answer (route, status, latency) whatever produced it,
a refusal of its own included. It reads every body as JSON whatever its ``Content-Type`` says (curl's
``-d`` sends ``application/x-www-form-urlencoded``, some clients ``text/plain``): every route takes JSON.
The exception handlers turn every refusal into OpenAI's error shape, or TEI's on TEI's routes.
"""

from __future__ import annotations

import hmac
import ipaddress
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

ROUTES = frozenset({"/v1/embeddings", "/v1/models", "/v1/rerank", "/similarity", "/rerank", "/embed", "/info", "/health", "/metrics"})
TEI_ROUTES = frozenset({"/embed", "/info"})  # TEI's alone; /rerank and /similarity answer TEI's shape to TEI's body
RETRY_AFTER_S = 1  # a full queue drains in about a batch's time
CLIENT_CLOSED = 499  # nginx's status for a request whose client went away: only the metrics see it
_GONE = object()


def route_label(path: str) -> str:
    """The metrics label of a path: a route, or ``other`` (unknown paths must not create label values)."""
    return path if path in ROUTES else "other"


def error_response(error: ApiError, metrics: ServerMetrics, path: str, tei: bool = False) -> JSONResponse:
    """``error`` in OpenAI's shape, or TEI's (``tei``), with its headers."""
    metrics.errors.labels(route_label(path), error.code).inc()
    status, body = error.tei() if tei else (error.status, error.body())
    return JSONResponse(body, status_code=status, headers=error.headers)


def answers_tei(request: Request) -> bool:
    """Whether a request is answered in TEI's shape: a TEI route, or a shared route given TEI's body."""
    return request.url.path in TEI_ROUTES or getattr(request.state, "tei", False)


def _json_type(value: object) -> str:
    names = {type(None): "null", bool: "a boolean", int: "a number", float: "a number", dict: "an object", list: "a list"}
    return names.get(type(value), type(value).__name__)


def _input_message(field: str, given: object) -> str:
    """What is wrong with an ``input`` that is neither a string nor a list of strings; token ids named as such."""
    def is_ids(value: object) -> bool:
        return isinstance(value, list) and bool(value) and all(isinstance(item, int) and not isinstance(item, bool) for item in value)

    if is_ids(given) or (isinstance(given, list) and bool(given) and all(is_ids(item) for item in given)):
        return (f"{field} holds token ids: this server takes texts (token ids of another tokenizer, such as the tiktoken ids "
                "LangChain's OpenAIEmbeddings sends by default, are not this model's tokens). In LangChain pass "
                "OpenAIEmbeddings(..., check_embedding_ctx_length=False) to send the texts")
    if isinstance(given, list):
        index = next((index for index, item in enumerate(given) if not isinstance(item, str)), None)
        if index is not None:
            return f"{field}[{index}] is {_json_type(given[index])}, not a string: give a string or a list of strings"
    return f"{field} is {_json_type(given)}: give a string or a list of strings"


def _validation_message(error: RequestValidationError) -> tuple[str, str | None]:
    """One line for pydantic's first complaint: malformed JSON, a missing field, or a wrong type."""
    first = error.errors()[0]
    location = [str(part) for part in first.get("loc", ()) if part != "body"]
    if first.get("type") == "json_invalid":
        return f"the body is not valid JSON: {first.get('msg')}", None
    if not location:
        return f"the body must be a JSON object: {first.get('msg')}", None
    param = location[0]
    body = error.body if isinstance(error.body, dict) else {}
    union = len(location) == 1 or location[1] in ("str", "list[str]")  # pydantic names the union's branches
    if param in ("input", "inputs") and param in body and union:
        return _input_message(param, body[param]), param
    return f"{'.'.join(location)}: {first.get('msg')}", param


def install_error_handlers(app: FastAPI, metrics: ServerMetrics) -> None:
    """Every refusal in OpenAI's error shape, with the status its cause calls for."""
    def handler(convert: Callable[[Exception], ApiError]) -> Callable[[Request, Exception], Awaitable[JSONResponse]]:
        async def handle(request: Request, error: Exception) -> JSONResponse:
            return error_response(convert(error), metrics, request.url.path, answers_tei(request))
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


def check_api_key(key: str, where: str) -> str:
    """``key`` as a bearer key a client can send: not empty, no whitespace (HTTP strips it from the header's
    ends: such a key could never match), visible ASCII only."""
    if not key:
        raise InputError(f"{where} is empty: give a key, or none at all for an open server")
    if any(not ("!" <= character <= "~") for character in key):
        raise InputError(f"{where}: a key must be visible ASCII without spaces (a client could never send it as given)")
    return key


def key_checker(api_key: str | None) -> Callable[[Request], None]:
    """A dependency that refuses a request without ``Authorization: Bearer <api_key>`` (none when no key); the
    scheme's name in any case, as RFC 7235 says. A refusal carries ``WWW-Authenticate: Bearer`` (RFC 6750)."""
    expected = api_key.encode() if api_key else None

    def check(request: Request) -> None:
        if expected is None:
            return
        scheme, _, token = request.headers.get("authorization", "").strip().partition(" ")
        given = token.strip().encode("utf-8", "surrogateescape")
        # constant time: the answer's timing says nothing of the key
        if not (hmac.compare_digest(given, expected) and scheme.lower() == "bearer"):
            raise ApiError(401, "missing or wrong API key: send the header Authorization: Bearer <key>", code="invalid_api_key",
                           headers={"WWW-Authenticate": 'Bearer realm="embedlab"'})

    return check


def is_loopback(host: str) -> bool:
    """Whether ``host`` is reachable from this machine only (a loopback address, or ``localhost``)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a host name: it may resolve to any address
        return False


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
                await self.app(_as_json(scope) if body else scope, _replay(body, receive), send_and_note)
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


def _as_json(scope):
    """``scope`` with its body declared JSON (see the module docstring)."""
    headers = [(name, value) for name, value in scope["headers"] if name != b"content-type"]
    return {**scope, "headers": [*headers, (b"content-type", b"application/json")]}


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
