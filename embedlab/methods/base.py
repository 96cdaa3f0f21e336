"""What every embedding method offers, and what a family is.

A *family* (``pooled``, ``random``, ``neural``, ``match`` …) is a name, its options (stated once, with
defaults and validation) and the class that builds a method from a parsed spec. Family modules export
:class:`Family` objects; :mod:`embedlab.methods.registry` lists them all.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from embedlab.data import unicode_problem
from embedlab.spec import ConcatSpec, FamilySchema, MethodSpec, Option


@dataclass(frozen=True)
class Family:
    """A method family: ``name:model,key=value,...`` specs build ``build(spec)``."""

    name: str
    options: dict[str, Option]
    build: Callable[[MethodSpec], EmbeddingMethod]
    help: str = ""
    schema: FamilySchema = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "schema", FamilySchema(self.name, self.options, self.help))


def check_texts(texts: Sequence[str]) -> list[str]:
    if isinstance(texts, (str, bytes)):
        raise TypeError("texts must be a list of strings, not a single string")
    checked = list(texts)
    for index, text in enumerate(checked):
        if not isinstance(text, str):
            raise TypeError(f"text at index {index} is {type(text).__name__}, not str")
        if (problem := unicode_problem(text)) is not None:
            raise ValueError(f"text at index {index} has a {problem}")
    return checked


def unit_rows(vectors: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return (vectors / np.where(norms > 0, norms, 1.0)).astype(np.float32)


class EmbeddingMethod:
    """What every method offers: its canonical spec, a fingerprint, and similarities of text pairs."""

    pairwise = False

    def __init__(self, spec: MethodSpec | ConcatSpec) -> None:
        self.parsed = spec

    @property
    def spec(self) -> str:
        return str(self.parsed)

    @property
    def fingerprint(self) -> str:
        raise NotImplementedError

    def similarity(self, pairs: Sequence[tuple[str, str]], batch_size: int = 32, show_progress_bar: bool | None = None) -> np.ndarray:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.spec!r})"


class VectorMethod(EmbeddingMethod):
    """A method that maps each text to one vector; similarity is the cosine of the two vectors."""

    @property
    def dimension(self) -> int:
        raise NotImplementedError

    def encode(
        self, texts: Sequence[str], batch_size: int = 32, show_progress_bar: bool | None = None, normalize: bool = False
    ) -> np.ndarray:
        texts = check_texts(texts)
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        vectors = np.asarray(self._encode(texts, batch_size, show_progress_bar), dtype=np.float32)
        return unit_rows(vectors) if normalize else vectors

    def _encode(self, texts: list[str], batch_size: int, show_progress_bar: bool | None) -> np.ndarray:
        raise NotImplementedError

    def similarity(self, pairs: Sequence[tuple[str, str]], batch_size: int = 32, show_progress_bar: bool | None = None) -> np.ndarray:
        """Cosine of each pair; all unique texts are encoded in one call (target-fitted statistics see them all)."""
        unique = list(dict.fromkeys(text for pair in pairs for text in pair))
        vectors = self.encode(unique, batch_size=batch_size, show_progress_bar=show_progress_bar, normalize=True)
        index = {text: row for row, text in enumerate(unique)}
        left = vectors[[index[a] for a, _ in pairs]]
        right = vectors[[index[b] for _, b in pairs]]
        return np.einsum("ij,ij->i", left, right).astype(np.float32)
