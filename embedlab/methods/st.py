"""The ``st`` family: sentence-transformers' own ``encode``, the baseline every pooled result is compared with."""

from __future__ import annotations

import numpy as np

from embedlab.methods.base import Family, VectorMethod
from embedlab.models import load_model
from embedlab.runtime import memo

_SENTENCE_TRANSFORMERS = memo("sentence-transformers models", maxsize=2)


class SentenceTransformerMethod(VectorMethod):
    """The baseline: ``SentenceTransformer(model).encode`` exactly as that library does it."""

    @property
    def sentence_transformer(self):
        """The sentence-transformers model of this spec's model folder, loaded once per process."""
        from sentence_transformers import SentenceTransformer

        loaded = load_model(self.parsed.model)
        path = str(loaded.path)
        return _SENTENCE_TRANSFORMERS.get(path, lambda: SentenceTransformer(path, device=str(loaded.device)))

    @property
    def fingerprint(self) -> str:
        return load_model(self.parsed.model).fingerprint

    @property
    def dimension(self) -> int:
        model = self.sentence_transformer
        # sentence-transformers 5.x renamed the method; older releases only have the long name
        dimension = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
        return int(dimension())

    def _encode(self, texts: list[str], batch_size: int, show_progress_bar: bool | None) -> np.ndarray:
        return self.sentence_transformer.encode(texts, batch_size=batch_size, show_progress_bar=bool(show_progress_bar), convert_to_numpy=True)

    @property
    def prompts(self) -> dict[str, str]:
        """The prompts the model folder's sentence-transformers configuration names (often none)."""
        return dict(self.sentence_transformer.prompts or {})

    def _encode_prompted(self, texts: list[str], batch_size: int, show_progress_bar: bool | None, prompt: str) -> np.ndarray:
        return self.sentence_transformer.encode(texts, prompt=prompt, batch_size=batch_size, show_progress_bar=bool(show_progress_bar),
                                                convert_to_numpy=True)


ST_FAMILY = Family("st", {}, SentenceTransformerMethod, "sentence-transformers' own encode (baseline)")
