"""What the routes accept (pydantic models: wrong types are refused before any work) and the one error
shape every route answers with, OpenAI's: ``{"error": {"message", "type", "param", "code"}}``."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, StrictBool, StrictInt, StrictStr


class ApiError(Exception):
    """An answer other than 200, in OpenAI's error shape."""

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


class RerankRequest(_Request):
    """``POST /rerank``: a ``query`` against ``documents``, best first (Cohere's and Jina's request shape)."""

    query: StrictStr
    documents: list[StrictStr]
    top_n: StrictInt | None = None
    return_documents: StrictBool = False
