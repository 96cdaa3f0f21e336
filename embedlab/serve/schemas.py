"""What the routes accept (pydantic models: wrong types are refused before any work) and the error shapes
they answer with: OpenAI's ``{"error": {"message", "type", "param", "code"}}`` on OpenAI's and embedlab's
routes, text-embeddings-inference's ``{"error", "error_type"}`` on TEI's (``/embed``, ``/info``, and
``/rerank`` or ``/similarity`` called with TEI's body)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, StrictBool, StrictInt, StrictStr

EMPTY_INPUT = "empty_input"  # the code of an empty (or blank) text or list: TEI answers it 400 "empty", not 422


class ApiError(Exception):
    """An answer other than 200, in OpenAI's error shape (:meth:`body`) or TEI's (:meth:`tei`)."""

    def __init__(self, status: int, message: str, *, code: str, param: str | None = None,
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code
        self.param = param
        self.headers = headers or {}

    @property
    def type(self) -> str:
        if self.status == 401:
            return "authentication_error"
        return "server_error" if self.status >= 500 else "invalid_request_error"

    def body(self) -> dict[str, dict[str, str | None]]:
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}

    def tei(self) -> tuple[int, dict[str, str]]:
        """TEI's status and body (router/src/lib.rs ``ErrorType``, statuses as its http/server.rs maps them): an empty
        input 400 ``empty``, a full queue 429 ``overloaded``, a failure of the model 424 ``backend``, any other
        refusal 422 ``validation``; 401 and 413 keep their status (TEI answers them without a body)."""
        if self.status == 401:
            status, kind = 401, "unauthorized"
        elif self.status == 413:
            status, kind = 413, "validation"
        elif self.code == EMPTY_INPUT:
            status, kind = 400, "empty"
        elif self.status == 503:
            status, kind = 429, "overloaded"
        elif self.status >= 500:
            status, kind = 424, "backend"
        else:
            status, kind = 422, "validation"
        return status, {"error": self.message, "error_type": kind}


class _Request(BaseModel):
    """Unknown fields are ignored, as OpenAI's API does (clients send ``user`` and newer fields)."""

    model_config = ConfigDict(extra="ignore")
    model: StrictStr


class EmbeddingsRequest(_Request):
    """``POST /v1/embeddings``: OpenAI's request (token-id inputs are refused: each model has its own tokens)."""

    input: StrictStr | list[StrictStr]
    encoding_format: Literal["float", "base64"] = "float"
    dimensions: StrictInt | None = None
    user: StrictStr | None = None


class SimilarityRequest(_Request):
    """``POST /similarity``: either ``pairs`` of texts, or one ``source`` against several ``sentences``."""

    pairs: list[tuple[StrictStr, StrictStr]] | None = None
    source: StrictStr | None = None
    sentences: list[StrictStr] | None = None


class DocumentText(BaseModel):
    """A rerank document given as ``{"text": ...}`` (Cohere's and Jina's object form)."""

    model_config = ConfigDict(extra="ignore")
    text: StrictStr


class RerankRequest(BaseModel):
    """``POST /rerank``, ``POST /v1/rerank``: a ``query`` against ``documents`` (strings or ``{"text"}``), best
    first (Cohere's and Jina's request shape); without ``model``, the default served method answers."""

    model_config = ConfigDict(extra="ignore")
    model: StrictStr | None = None
    query: StrictStr
    documents: list[StrictStr | DocumentText]
    top_n: StrictInt | None = None
    return_documents: StrictBool = False

    @property
    def texts(self) -> list[str]:
        return [document if isinstance(document, str) else document.text for document in self.documents]


class _TeiRequest(BaseModel):
    """TEI's requests name no model (the default served method answers). ``truncate`` and
    ``truncation_direction`` are accepted and change nothing: embedlab pools a long text over all of it."""

    model_config = ConfigDict(extra="ignore")
    truncate: StrictBool | None = None
    truncation_direction: Literal["left", "right", "Left", "Right"] = "right"


class TeiEmbedRequest(_TeiRequest):
    """``POST /embed`` (TEI's ``EmbedRequest``): vectors, unit length unless ``normalize`` is false."""

    inputs: StrictStr | list[StrictStr]
    normalize: StrictBool = True
    prompt_name: StrictStr | None = None
    dimensions: StrictInt | None = None


class TeiRerankRequest(_TeiRequest):
    """``POST /rerank`` with TEI's body (``RerankRequest``); ``raw_scores`` changes nothing on cosine or matching scores."""

    query: StrictStr
    texts: list[StrictStr]
    raw_scores: StrictBool = False
    return_text: StrictBool = False


class TeiSimilarityInput(BaseModel):
    model_config = ConfigDict(extra="ignore")
    source_sentence: StrictStr
    sentences: list[StrictStr]


class TeiSimilarityParameters(_TeiRequest):
    prompt_name: StrictStr | None = None


class TeiSimilarityRequest(BaseModel):
    """``POST /similarity`` with TEI's body (``SimilarityRequest``): ``source_sentence`` against each of ``sentences``."""

    model_config = ConfigDict(extra="ignore")
    inputs: TeiSimilarityInput
    parameters: TeiSimilarityParameters | None = None
