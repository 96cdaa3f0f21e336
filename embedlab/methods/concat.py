"""Concatenation (``a+b`` in a spec): several methods' unit vectors side by side (neural paper, Appendix H)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from embedlab.errors import InputError
from embedlab.methods.base import EmbeddingMethod, VectorMethod
from embedlab.methods.precision import output_options
from embedlab.spec import ConcatSpec


class ConcatMethod(VectorMethod):
    """Unit-normalised vectors of several methods side by side, scaled so the result has unit norm."""

    def __init__(self, spec: ConcatSpec, parts: Sequence[EmbeddingMethod]) -> None:
        super().__init__(spec)
        self.parts = list(parts)
        pairwise = [str(part.parsed) for part in self.parts if part.pairwise]
        if pairwise:
            raise InputError(f"cannot concatenate the pairwise method {pairwise[0]!r}: it gives no vectors")
        quantised = [str(part.parsed) for part in self.parts if output_options(part.parsed) != ("float32", None)]
        if quantised:  # the parts' unit vectors are joined as floats; a quantised or cut part would not be one
            raise InputError(f"cannot concatenate {quantised[0]!r}: precision= and truncate_dim= apply to a whole method, "
                             "not to a part of a concatenation")

    @property
    def fingerprint(self) -> str:
        return "+".join(part.fingerprint for part in self.parts)

    @property
    def dimension(self) -> int:
        return sum(part.dimension for part in self.parts)

    @property
    def unit_vectors(self) -> bool:
        return True  # k unit blocks scaled by 1/sqrt(k)

    @property
    def fits_on_target(self) -> bool:
        return any(part.fits_on_target for part in self.parts)

    @property
    def fittable(self) -> bool:
        return any(part.fittable for part in self.parts)

    @property
    def uses_gpu(self) -> bool:
        return any(part.uses_gpu for part in self.parts)

    def fit_for_corpus(self, texts: Sequence[str], batch_size: int = 32) -> list[bytes]:
        return [state for part in self.parts for state in part.fit_for_corpus(texts, batch_size)]

    def fitted_state(self) -> list[bytes]:
        return [state for part in self.parts for state in part.fitted_state()]

    def restore(self, states: Sequence[bytes]) -> ConcatMethod:
        """Each fittable part takes one state, in order (what :meth:`fitted_state` returns)."""
        fittable = [part for part in self.parts if part.fittable]
        if len(fittable) != len(states):
            raise ValueError(f"{self.spec}: {len(states)} fitted states for {len(fittable)} fittable parts")
        for part, state in zip(fittable, states):
            part.restore([state])
        return self

    def _encode(self, texts: list[str], batch_size: int, show_progress_bar: bool | None) -> np.ndarray:
        blocks = [part.encode(texts, batch_size=batch_size, show_progress_bar=show_progress_bar, normalize_embeddings=True) for part in self.parts]
        return np.hstack(blocks) / np.float32(np.sqrt(len(blocks)))
