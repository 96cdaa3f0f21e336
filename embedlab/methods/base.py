"""What every embedding method offers, and what a family is.

A *family* (``pooled``, ``random``, ``neural``, ``match`` …) is a name, its options (stated once, with
defaults and validation) and the class that builds a method from a parsed spec. Family modules export
:class:`Family` objects; :mod:`embedlab.registry` lists them all.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from embedlab.data import unicode_problem
from embedlab.errors import InputError, InputTypeError
from embedlab.methods.precision import BINARY_PRECISIONS, check_output, comparable, output_options, quantized
from embedlab.models.loading import check_model
from embedlab.pooling.postprocess import unit_length
from embedlab.spec import ConcatSpec, FamilySchema, MethodSpec, Option


@dataclass(frozen=True)
class Family:
    """A method family: ``name:model,key=value,...`` specs build ``build(spec)``."""

    name: str
    options: dict[str, Option]
    build: Callable[[MethodSpec], EmbeddingMethod]
    help: str = ""
    # refuses, before the method is built, a model it cannot load (a named model not installed, no such folder)
    check_model: Callable[[str], None] = check_model
    schema: FamilySchema = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "schema", FamilySchema(self.name, self.options, self.help))


def check_texts(texts: Sequence[str]) -> list[str]:
    if isinstance(texts, (str, bytes)):
        raise InputTypeError("texts must be a list of strings, not a single string")
    checked = list(texts)
    for index, text in enumerate(checked):
        if not isinstance(text, str):
            raise InputTypeError(f"text at index {index} is {type(text).__name__}, not str")
        if (problem := unicode_problem(text)) is not None:
            raise InputError(f"text at index {index} has a {problem}")
    return checked


def check_pairs(pairs: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
    """Text pairs as a list, each a 2-item tuple or list of texts (a 1-tuple or a bare string named by index)."""
    if isinstance(pairs, (str, bytes)):
        raise InputTypeError("pairs must be a list of (text, text) pairs, not a single string")
    checked = list(pairs)
    for position, pair in enumerate(checked):
        if not isinstance(pair, (tuple, list)) or len(pair) != 2:
            shown = f"a {len(pair)}-item {type(pair).__name__}" if isinstance(pair, (tuple, list)) else type(pair).__name__
            raise InputTypeError(f"pair at index {position} is {shown}, not a (text, text) pair")
        check_texts(list(pair))
    return checked


def unit_rows(vectors: np.ndarray) -> np.ndarray:
    """Rows of unit length as float32 (a zero row stays zero)."""
    return unit_length(vectors).astype(np.float32)


class EmbeddingMethod:
    """What every method offers: its canonical spec, a fingerprint, and scores of text pairs."""

    pairwise = False

    def __init__(self, spec: MethodSpec | ConcatSpec) -> None:
        self.parsed = spec

    @property
    def spec(self) -> str:
        return str(self.parsed)

    @property
    def fingerprint(self) -> str:
        raise NotImplementedError

    @property
    def fits_on_target(self) -> bool:
        """Whether ``encode(texts)`` fits statistics on ``texts`` themselves (idf^T, a post-processing step without
        ``@ref``, not yet fitted): such a method must see a whole target set in one call, never block by block."""
        return False

    # -- the protocol the engines and the server ask (a method answers for itself) -----------------------
    @property
    def fittable(self) -> bool:
        """Whether the method holds statistics that :meth:`fit_for_corpus` learns and :meth:`fitted_state` returns."""
        return False

    @property
    def parameter_count(self) -> int | None:
        """The parameters of the transformer that runs when this method encodes (the cost records report it);
        None for a method that runs none (a static table, a fake)."""
        return None

    @property
    def uses_gpu(self) -> bool:
        """Whether the method's work runs on a GPU where its process has one (a Ray actor then asks for one)."""
        return False

    def fit_for_corpus(self, texts: Sequence[str], batch_size: int = 32) -> list[bytes]:
        """Fit, once for a whole corpus, what the method learns: on ``texts`` where its statistics depend on
        them (:attr:`fits_on_target`), else on the first text (its state is then the same for any texts).
        Returns :meth:`fitted_state`."""
        return self.fitted_state()

    def fitted_state(self) -> list[bytes]:
        """The fitted statistics as safetensors bytes, one entry per part that holds some ([] for none)."""
        return []

    def restore(self, states: Sequence[bytes]) -> EmbeddingMethod:
        """Give the method the statistics :meth:`fitted_state` returned (checked against spec and model)."""
        if states:
            raise ValueError(f"{self.spec}: {len(states)} fitted states for a method that fits nothing")
        return self

    def similarity_pairs(
        self, pairs: Sequence[tuple[str, str]], batch_size: int = 32, show_progress_bar: bool | None = None
    ) -> np.ndarray:
        """One similarity per ``(text_a, text_b)`` pair (float32, shape ``(n,)``): what STS-style tasks score."""
        raise NotImplementedError

    def similarity(self, emb_a: object, emb_b: object = None) -> torch.Tensor:
        raise InputTypeError(
            f"{self.spec} is a pairwise method: it has no embeddings to compare; score text pairs with similarity_pairs(pairs)"
        )

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.spec!r})"


# sentence-transformers ``encode`` keywords that cannot change the vectors here: the device is the model's
# own (chosen at load time), and MTEB's task/prompt hints matter only to models that have prompts.
_IGNORED_ENCODE_KEYWORDS = frozenset({"device", "task_name", "prompt_type", "pool", "chunk_size"})


def _as_rows(embeddings: object, name: str) -> torch.Tensor:
    """A 2-D float tensor from what sentence-transformers' ``similarity`` accepts (array, tensor, list of either)."""
    if isinstance(embeddings, (list, tuple)):
        if embeddings and isinstance(embeddings[0], (str, tuple, list)):
            raise InputTypeError(f"{name} holds texts, not embeddings; score text pairs with similarity_pairs(pairs)")
        embeddings = torch.stack([torch.as_tensor(row) for row in embeddings]) if embeddings else torch.zeros(0, 0)
    rows = torch.as_tensor(np.ascontiguousarray(embeddings) if isinstance(embeddings, np.ndarray) else embeddings)
    if rows.ndim == 1:
        rows = rows.unsqueeze(0)
    if rows.ndim != 2:
        raise InputError(f"{name} must be one embedding or a matrix of embeddings, got shape {tuple(rows.shape)}")
    return rows.to(torch.float32)


class VectorMethod(EmbeddingMethod):
    """A method that maps each text to one vector; similarity is the cosine of the two vectors.

    ``encode`` and ``similarity`` follow sentence-transformers' contract, so code written for a
    ``SentenceTransformer`` runs unchanged with an embedlab method in its place."""

    @property
    def dimension(self) -> int:
        raise NotImplementedError

    def encode(
        self,
        sentences: str | Sequence[str],
        *,
        batch_size: int = 32,
        show_progress_bar: bool | None = None,
        normalize_embeddings: bool = False,
        convert_to_numpy: bool = True,
        convert_to_tensor: bool = False,
        prompt: str | None = None,
        prompt_name: str | None = None,
        precision: str | None = None,
        output_value: str | None = "sentence_embedding",
        truncate_dim: int | None = None,
        **kwargs: object,
    ) -> np.ndarray | torch.Tensor | list[torch.Tensor]:
        """Embeddings of ``sentences`` as sentence-transformers returns them.

        A list gives a float32 array ``(n, d)`` (a tensor with ``convert_to_tensor``, a list of 1-D tensors
        with ``convert_to_numpy=False``); a single string gives one 1-D vector. ``prompt`` (a prefix) or ``prompt_name`` (one of :attr:`prompts`)
        encode with a prompt where the family takes one. ``truncate_dim`` and ``precision`` (int8, uint8,
        binary, ubinary) act as in sentence-transformers (keep the first dimensions, normalise, quantise) and
        override the spec's ``truncate_dim=`` / ``precision=`` options for this call
        (:mod:`embedlab.methods.precision`). Keywords that would change the result and that embedlab does not
        implement (token embeddings) are refused rather than silently ignored."""
        unsupported = sorted(set(kwargs) - _IGNORED_ENCODE_KEYWORDS)
        if unsupported:
            raise InputTypeError(f"{self.spec}: encode() got unsupported keyword(s) {', '.join(unsupported)}")
        prompt_text = self.prompt_text(prompt, prompt_name)
        if output_value != "sentence_embedding":
            raise InputError(f"{self.spec}: output_value={output_value!r} is not supported; only 'sentence_embedding'")
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise InputError(f"{self.spec}: batch_size must be a positive integer, got {str(batch_size)[:40]}")
        precision, truncate_dim = self.output_options(precision, truncate_dim)
        single = isinstance(sentences, str)
        texts = check_texts([sentences] if single else sentences)
        if texts:
            encoded = self._encode(texts, batch_size, show_progress_bar) if prompt_text is None \
                else self._encode_prompted(texts, batch_size, show_progress_bar, prompt_text)
            vectors = np.asarray(encoded, dtype=np.float32)
        else:
            vectors = np.zeros((0, self.dimension), dtype=np.float32)
        vectors = vectors[:, :truncate_dim] if truncate_dim is not None else vectors
        if normalize_embeddings:
            vectors = unit_rows(vectors)
        vectors = quantized(vectors, precision, where=self.spec)
        vectors = np.ascontiguousarray(vectors[0] if single else vectors)
        if convert_to_tensor:
            return torch.from_numpy(vectors)
        if not convert_to_numpy:
            return torch.from_numpy(vectors) if single else list(torch.from_numpy(vectors))
        return vectors

    def _encode(self, texts: list[str], batch_size: int, show_progress_bar: bool | None) -> np.ndarray:
        raise NotImplementedError

    def output_options(self, precision: str | None = None, truncate_dim: int | None = None) -> tuple[str, int | None]:
        """The output precision and width of one encode (arguments override the spec's options), checked
        against the vectors' width before any work."""
        if isinstance(self.parsed, MethodSpec):
            precision, truncate_dim = output_options(self.parsed, precision, truncate_dim)
        precision = "float32" if precision is None else precision
        check_output(self.spec, precision, truncate_dim, self.dimension if truncate_dim is not None or precision != "float32" else None)
        return precision, truncate_dim

    @property
    def output_precision(self) -> str:
        """The precision this method's spec gives its vectors (float32 unless ``precision=`` says otherwise)."""
        return self.output_options()[0]

    def comparable(self, vectors: object) -> object:
        """Rows of vectors this method encoded, to compare by cosine: packed binary bits as ±1 floats (their
        cosine orders pairs as Hamming distance does); anything else as given."""
        if isinstance(vectors, torch.Tensor) and vectors.dtype in (torch.int8, torch.uint8):
            vectors = vectors.numpy()
        if isinstance(vectors, np.ndarray) and vectors.dtype in (np.int8, np.uint8) and self.output_precision in BINARY_PRECISIONS:
            return comparable(vectors, self.output_precision)
        return vectors

    # -- prompts (asymmetric encoding: a query side and a document side) ---------------------------------
    @property
    def prompts(self) -> dict[str, str]:
        """Named prompts, as sentence-transformers' ``model.prompts``: ``{"query": …, "document": …}`` for a
        spec with ``query_template=``/``doc_template=``; empty for a method that takes none."""
        return {}

    def prompt_text(self, prompt: str | None, prompt_name: str | None) -> str | None:
        """The prompt an ``encode`` call asks for: ``prompt`` itself (a prefix, as in sentence-transformers; it
        wins over ``prompt_name``), the prompt named ``prompt_name``, or None."""
        if prompt:
            return prompt
        if prompt_name is None:
            return None
        if prompt_name not in self.prompts:
            offered = ", ".join(self.prompts) or "none: give it query_template= / doc_template= in the spec"
            raise InputError(f"{self.spec}: prompt_name={prompt_name!r} is not one of this method's prompts ({offered})")
        return self.prompts[prompt_name]

    def _encode_prompted(self, texts: list[str], batch_size: int, show_progress_bar: bool | None, prompt: str) -> np.ndarray:
        raise InputError(f"{self.spec}: this family takes no prompt (it would change the embeddings); pass the texts as they are")

    def encode_query(self, sentences: str | Sequence[str], **options: object) -> np.ndarray | torch.Tensor | list[torch.Tensor]:
        """``encode`` with the method's ``query`` prompt, if it has one (sentence-transformers' ``encode_query``)."""
        return self._encode_role("query", sentences, options)

    def encode_document(self, sentences: str | Sequence[str], **options: object) -> np.ndarray | torch.Tensor | list[torch.Tensor]:
        """``encode`` with the method's ``document`` prompt, if it has one (sentence-transformers' ``encode_document``)."""
        return self._encode_role("document", sentences, options)

    def _encode_role(self, role: str, sentences: str | Sequence[str], options: dict) -> np.ndarray | torch.Tensor | list[torch.Tensor]:
        if role in self.prompts and not options.get("prompt") and options.get("prompt_name") is None:
            options = {**options, "prompt_name": role}
        return self.encode(sentences, **options)

    def similarity(self, emb_a: object, emb_b: object = None) -> torch.Tensor:
        """Cosine matrix ``(len(emb_a), len(emb_b))`` of two sets of embeddings, as sentence-transformers'
        ``model.similarity`` (a float32 tensor; a zero vector has cosine 0 with everything)."""
        if emb_b is None:
            raise InputTypeError("similarity(emb_a, emb_b) compares two sets of embeddings; score text pairs with similarity_pairs(pairs)")
        left = torch.nn.functional.normalize(_as_rows(self.comparable(emb_a), "emb_a"), p=2, dim=1)
        right = torch.nn.functional.normalize(_as_rows(self.comparable(emb_b), "emb_b"), p=2, dim=1)
        if left.shape[1] != right.shape[1]:
            raise InputError(f"similarity: emb_a has {left.shape[1]} columns and emb_b {right.shape[1]}; both must "
                             "be embeddings of one method (the same width)")
        return left @ right.T

    def similarity_pairwise(self, emb_a: object, emb_b: object) -> torch.Tensor:
        """Cosine of each row of ``emb_a`` with the same row of ``emb_b`` (sentence-transformers'
        ``model.similarity_pairwise``): the diagonal of :meth:`similarity`, without the full matrix."""
        left = torch.nn.functional.normalize(_as_rows(self.comparable(emb_a), "emb_a"), p=2, dim=1)
        right = torch.nn.functional.normalize(_as_rows(self.comparable(emb_b), "emb_b"), p=2, dim=1)
        if left.shape != right.shape:
            raise InputError(f"similarity_pairwise needs row-aligned embeddings, got {tuple(left.shape)} and {tuple(right.shape)}")
        return (left * right).sum(dim=1)

    def similarity_pairs(
        self, pairs: Sequence[tuple[str, str]], batch_size: int = 32, show_progress_bar: bool | None = None
    ) -> np.ndarray:
        """Cosine of each pair; all unique texts are encoded in one call (target-fitted statistics see them all)."""
        pairs = check_pairs(pairs)
        unique = list(dict.fromkeys(text for pair in pairs for text in pair))
        vectors = self.encode(unique, batch_size=batch_size, show_progress_bar=show_progress_bar, normalize_embeddings=True)
        if self.output_precision != "float32":  # quantised rows are no longer unit vectors (float32 rows are left as they are)
            vectors = unit_rows(self.comparable(vectors))
        index = {text: row for row, text in enumerate(unique)}
        left = vectors[[index[a] for a, _ in pairs]]
        right = vectors[[index[b] for _, b in pairs]]
        return np.einsum("ij,ij->i", left, right).astype(np.float32)
