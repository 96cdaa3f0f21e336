"""Run an embedlab vector method through MTEB (``pip install embedlab[mteb]``).

MTEB wraps a ``SentenceTransformer`` itself; any other model must offer MTEB's encoder protocol:
``encode(DataLoader of batches, *, task_metadata, hf_split, hf_subset, prompt_type)``, ``similarity``,
``similarity_pairwise`` and ``mteb_model_meta``. :class:`MTEBEncoder` gives an embedlab method that
protocol, so ``mteb.evaluate(MTEBEncoder("minilm"), tasks)`` scores it like any MTEB model.

MTEB encodes each side of a task separately, so methods with target-fitted statistics (``idf-target``,
``post=zscore`` …) are fitted on each ``encode`` call's texts; fit them first (``method.fit(texts)``) to
use one fixed set of statistics.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from embedlab.errors import InputTypeError
from embedlab.methods.base import VectorMethod
from embedlab.registry import load


class MTEBEncoder:
    """An embedlab vector method (or a spec string) behind MTEB's encoder protocol; cosine similarity."""

    def __init__(self, method: VectorMethod | str) -> None:
        self.method = load(method) if isinstance(method, str) else method
        if not isinstance(self.method, VectorMethod):
            raise InputTypeError(f"{self.method.spec} is a pairwise method: MTEB needs one embedding per text")

    @property
    def mteb_model_meta(self) -> Any:
        """MTEB's description of the model; results are stored under ``embedlab/<spec>`` and the fingerprint."""
        from mteb.models import ModelMeta

        return ModelMeta.create_empty(
            {
                "name": f"embedlab/{self.method.spec}",
                "revision": self.method.fingerprint,
                "embed_dim": self.method.dimension,
                "similarity_fn_name": "cosine",
                "framework": ["PyTorch"],
            }
        )

    def encode(
        self,
        inputs: Any,
        *,
        task_metadata: Any = None,
        hf_split: str | None = None,
        hf_subset: str | None = None,
        prompt_type: Any = None,
        **kwargs: Any,
    ) -> np.ndarray:
        """All texts of MTEB's batches in ONE ``method.encode`` call (float32, one row per text)."""
        texts = [text for batch in inputs for text in batch["text"]]
        return self.method.encode(
            texts, batch_size=int(kwargs.get("batch_size", 32)), show_progress_bar=bool(kwargs.get("show_progress_bar", False))
        )

    def similarity(self, embeddings1: Any, embeddings2: Any) -> torch.Tensor:
        return self.method.similarity(embeddings1, embeddings2)

    def similarity_pairwise(self, embeddings1: Any, embeddings2: Any) -> torch.Tensor:
        return self.method.similarity_pairwise(embeddings1, embeddings2)
