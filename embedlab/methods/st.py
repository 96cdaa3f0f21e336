"""The ``st`` family: sentence-transformers' own ``encode``, the baseline every pooled result is compared with."""

from __future__ import annotations

import numpy as np

from embedlab.methods.base import Family, VectorMethod
from embedlab.methods.precision import COMPUTE_OPTIONS, OUTPUT_OPTIONS, compute_of
from embedlab.models.loading import load_model
from embedlab.models.precision import TORCH_DTYPES, fingerprint_suffix, quantize_linear_int8
from embedlab.runtime.memo import memo

_SENTENCE_TRANSFORMERS = memo("sentence-transformers models", maxsize=2)


class SentenceTransformerMethod(VectorMethod):
    """The baseline: ``SentenceTransformer(model).encode`` exactly as that library does it, in the compute
    the spec asks for (``model_kwargs={"dtype": ...}`` for bf16/fp16, the same int8 linear layers as
    embedlab's own families for ``quantize=int8``)."""

    def __init__(self, spec) -> None:
        super().__init__(spec)
        self.compute = compute_of(spec)  # refuses dtype with quantize before anything is loaded

    @property
    def sentence_transformer(self):
        """The sentence-transformers model of this spec's model folder, loaded once per process and compute."""
        from sentence_transformers import SentenceTransformer

        loaded = load_model(self.parsed.model)
        path, compute = str(loaded.path), self.compute

        def build():
            if compute == "int8":
                return quantize_linear_int8(SentenceTransformer(path, device="cpu"))
            return SentenceTransformer(path, device=str(loaded.device), model_kwargs={"dtype": TORCH_DTYPES[compute]})

        return _SENTENCE_TRANSFORMERS.get((path, compute), build)

    @property
    def fingerprint(self) -> str:
        return load_model(self.parsed.model).fingerprint + fingerprint_suffix(self.compute)

    @property
    def parameter_count(self) -> int:
        return load_model(self.parsed.model).parameter_count

    @property
    def dimension(self) -> int:
        model = self.sentence_transformer
        # sentence-transformers 5.x renamed the method; older releases only have the long name
        dimension = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
        return int(dimension())

    def _encode(self, texts: list[str], batch_size: int, show_progress_bar: bool | None) -> np.ndarray:
        vectors = self.sentence_transformer.encode(texts, batch_size=batch_size, show_progress_bar=bool(show_progress_bar), convert_to_numpy=True)
        return vectors.astype(np.float32, copy=False)  # a bf16 model's vectors come back in its dtype

    @property
    def prompts(self) -> dict[str, str]:
        """The prompts the model folder's sentence-transformers configuration names (often none)."""
        return dict(self.sentence_transformer.prompts or {})

    def _encode_prompted(self, texts: list[str], batch_size: int, show_progress_bar: bool | None, prompt: str) -> np.ndarray:
        return self.sentence_transformer.encode(texts, prompt=prompt, batch_size=batch_size, show_progress_bar=bool(show_progress_bar),
                                                convert_to_numpy=True)


ST_FAMILY = Family("st", {**COMPUTE_OPTIONS, **OUTPUT_OPTIONS}, SentenceTransformerMethod, "sentence-transformers' own encode (baseline)")
