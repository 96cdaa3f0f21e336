"""``match:MODEL,...``: token-level matching similarity as an embedlab method (token-matching paper,
Wang & Yu 2023, §3 Eq. 1–2 and "Token Weighting", §4.3 ablations).

For a pair of texts the encoder's token vectors X (|s| × d), X̂ (|ŝ| × d) come from a pooled-family
encoder (chosen layers; special tokens left out by default) and give S = X X̂ᵀ on unit token vectors
(``normalise-tokens=yes``) or raw vectors (``no``); :mod:`embedlab.matching.scoring` turns S into Eq. 1
token scores and the Eq. 2 sentence score. Token weights are ``none`` (all 1), ``idf`` (idf^W over
WikiText-2 train sentences) or ``learned`` (SimCSE-trained, §3 "Token Weighting"; trained by
:mod:`embedlab.training.token_weights`, read here). ``mode=bertscore`` is BERTScore's F1 instead
(greedy max matching; the last row of Table 3). With ``weights=none`` or ``weights=idf-refs`` it is the
``bert-score`` package's F1 (:mod:`embedlab.matching.bertscore`): [CLS]/[SEP] take part in the matching
with weight 0, idf-refs is idf over the references of the pairs scored together, and each pair is
(candidate, reference). ``mode=bertscore`` alone (= ``weights=idf``) keeps embedlab's earlier variant:
idf^W from WikiText-2, special tokens left out.

Matching is a *pairwise* method: it gives no vector per text, so ``encode`` raises a TypeError that
says so; ``similarity_pairs(pairs)`` runs every unique text through one cached token-state pass.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from safetensors.numpy import save as save_numpy

from embedlab.data import is_blank
from embedlab.errors import InputError, InputTypeError
from embedlab.matching.bertscore_scoring import (
    PACKAGE_BATCH,
    check_pairs,
    check_weighted,
    input_token_ids,
    package_input_limit,
    package_token_vectors,
    plain_weights,
    reference_idf,
    score_sides as score_bertscore_sides,
)
from embedlab.matching.explain import MatchExplanation, explain_pair
from embedlab.matching.scoring import MODES, SCORES, TextSide, score_sides
from embedlab.methods.base import EmbeddingMethod, Family, check_pairs as check_text_pairs, check_texts, unit_rows
from embedlab.methods.pooled import POOLED_FAMILY, PooledMethod
from embedlab.methods.pooled_options import LAYERS_OPTION
from embedlab.methods.precision import COMPUTE_OPTIONS
from embedlab.models.loading import LoadedModel
from embedlab.pooling.aggregation import FlatTokens, select_tokens
from embedlab.pooling.weights import reference_token_statistics
from embedlab.runtime.cache.arrays import sorted_header
from embedlab.runtime.cache.atomic import atomic_write_bytes
from embedlab.runtime.settings import cache_dir
from embedlab.spec import MethodSpec, Option, SpecError, build_spec

WEIGHTS = ("learned", "idf", "none", "idf-refs")
PACKAGE_WEIGHTS = ("none", "idf-refs")  # mode=bertscore with these follows the bert-score package
RESOURCES = Path(__file__).resolve().parent.parent / "resources"

MATCH_OPTIONS = {
    "layers": LAYERS_OPTION,
    "score": Option("2max-2nd", SCORES, "token matching score: 2max-2nd (Eq. 1), max (significance), max-2nd (uniqueness)"),
    "weights": Option("learned", WEIGHTS, "token weights: learned (SimCSE-trained), idf (idf^W, WikiText-2), none, "
                      "idf-refs (idf over the pairs' references; mode=bertscore only)"),
    "mode": Option("eq2", MODES, "eq2: Eq. 2 average of both sides; bertscore: greedy max matching as F1 (pairs are "
                   "(candidate, reference); weights=none / idf-refs equal the bert-score package, unset = idf)"),
    "special": Option("exclude", ("exclude", "include"), "[CLS]/[SEP] take part in matching or not"),
    "normalise-tokens": Option("yes", ("yes", "no"), "yes: cosine of token vectors; no: raw dot product"),
    **COMPUTE_OPTIONS,
}


def text_sides(
    flat: FlatTokens, matrix: np.ndarray, include_special: bool, normalise: bool, vocab_weights: np.ndarray | None
) -> list[TextSide]:
    """Split flat token vectors into per-text sides: special-token switch, normalisation, weights."""
    keep = select_tokens(flat, include_special, None)  # a text with no other token keeps its specials
    matrix = unit_rows(matrix) if normalise else matrix.astype(np.float32, copy=False)
    weights = np.ones(len(flat.token_ids), np.float32) if vocab_weights is None else vocab_weights[flat.token_ids].astype(np.float32)
    sides = []
    for index in range(flat.num_texts):
        rows = np.arange(flat.offsets[index], flat.offsets[index + 1])
        rows = rows[keep[rows]]
        sides.append(TextSide(flat.token_ids[rows], matrix[rows], weights[rows]))
    return sides


# --- learned token weights: where they live, and their file format -----------------------------------

def learned_weights_path(model: LoadedModel) -> Path:
    """The packaged weights for a named model, else the cache location the training command writes."""
    packaged = RESOURCES / f"{model.name}_token_weights.safetensors"
    if packaged.exists():
        return packaged
    return cache_dir("token_weights") / f"{model.fp32_fingerprint}.safetensors"  # weights hold for every compute


def write_weights(out: Path, weights: np.ndarray, fingerprint: str, record: dict) -> None:
    """``out`` (safetensors ``weights``, the model fingerprint in its metadata) and ``out``'s JSON record."""
    metadata = {"model_fingerprint": fingerprint, "config": json.dumps(record.get("config", {}), sort_keys=True)}
    atomic_write_bytes(out, sorted_header(save_numpy({"weights": np.asarray(weights, dtype=np.float32)}, metadata=metadata)))
    atomic_write_bytes(out.with_suffix(".json"), (json.dumps(record, indent=2, sort_keys=True) + "\n").encode())


def read_weights(path: Path | str, vocab_size: int | None = None) -> tuple[np.ndarray, dict[str, str]]:
    """(weights, metadata) from a token-weight file; checks the vocabulary size when given."""
    from safetensors import safe_open

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"token-weight file not found: {path}")
    with safe_open(str(path), framework="np") as handle:
        metadata = dict(handle.metadata() or {})
        weights = handle.get_tensor("weights").astype(np.float32)
    if weights.ndim != 1:
        raise InputError(f"{path}: 'weights' must be one-dimensional, got shape {weights.shape}")
    if vocab_size is not None and weights.shape[0] != vocab_size:
        raise InputError(f"{path}: {weights.shape[0]} weights for a vocabulary of {vocab_size} tokens")
    if not np.all(np.isfinite(weights)) or (weights < 0).any():
        raise InputError(f"{path}: token weights must be finite and non-negative")
    return weights, metadata


def load_learned_weights(model: LoadedModel) -> np.ndarray:
    """The learned weights of ``model`` (one per vocabulary id), refusing weights of another model."""
    path = learned_weights_path(model)
    if not path.exists():
        raise FileNotFoundError(
            f"no learned token weights for model {model.name!r} (looked for {path}); train them with "
            f"`embedlab train-token-weights {model.name}` or use weights=idf / weights=none"
        )
    weights, metadata = read_weights(path, len(model.tokenizer))
    if metadata.get("model_fingerprint") not in (None, model.fingerprint, model.transformer_fingerprint):
        raise InputError(f"{path} was learned for another model (fingerprint {metadata.get('model_fingerprint')}, not {model.fingerprint})")
    return weights


# --- the method --------------------------------------------------------------------------------------

class MatchingMethod(EmbeddingMethod):
    """``match:MODEL,...``: token-level matching similarity of text pairs (pairwise, no vectors)."""

    pairwise = True

    def __init__(self, spec: MethodSpec) -> None:
        super().__init__(spec)
        self.score = spec.get("score")
        self.weight_kind = spec.get("weights")
        self.mode = spec.get("mode")
        if self.mode == "bertscore" and self.score != MATCH_OPTIONS["score"].default:
            raise SpecError(f"{spec}: mode=bertscore fixes score=max (greedy matching); leave score unset")
        if self.mode == "bertscore" and self.weight_kind == "learned":
            self.weight_kind = "idf"  # mode=bertscore alone: idf^W, as before the package-equal weights existed
        if self.mode != "bertscore" and self.weight_kind == "idf-refs":
            raise SpecError(f"{spec}: weights=idf-refs is BERTScore's idf over the references; use it with mode=bertscore")
        # mode=bertscore with weights=none / idf-refs follows the bert-score package, special tokens included
        self.package = self.mode == "bertscore" and self.weight_kind in PACKAGE_WEIGHTS
        if self.package and spec.get("special") == "include":
            raise SpecError(f"{spec}: mode=bertscore,weights={self.weight_kind} follows the bert-score package, where "
                            "[CLS]/[SEP] always take part in the matching with weight 0; leave special unset")
        # the encoder part is a pooled-family method: its cached token states feed the matching
        self.encoder = PooledMethod(build_spec(POOLED_FAMILY.schema, spec.model, {
            "layers": spec.get("layers"), **{key: spec.get(key) for key in COMPUTE_OPTIONS}}))
        self.include_special = spec.get("special") == "include"
        self.normalise = spec.get("normalise-tokens") == "yes"
        self._vocab_weights: np.ndarray | None = None

    @property
    def model(self) -> LoadedModel:
        return self.encoder.model

    @property
    def fingerprint(self) -> str:
        base = self.model.fingerprint
        if self.weight_kind != "learned":
            return base
        digest = hashlib.sha256(np.ascontiguousarray(self.vocabulary_weights())).hexdigest()[:12]
        return f"{base}+w{digest}"

    def encode(self, *args: object, **kwargs: object) -> np.ndarray:
        raise InputTypeError(f"{self.spec} is a pairwise method (token-level matching): it scores text pairs and gives no vectors; use similarity_pairs(pairs)")

    def vocabulary_weights(self) -> np.ndarray | None:
        """One weight per vocabulary id (None for weights=none); raises FileNotFoundError for missing learned weights."""
        if self.weight_kind in PACKAGE_WEIGHTS:
            return None
        if self._vocab_weights is None:
            if self.weight_kind == "idf":
                self._vocab_weights = reference_token_statistics(self.model.tokenizer)[0].astype(np.float32)
            else:
                self._vocab_weights = load_learned_weights(self.model)
        return self._vocab_weights

    def prepare(self, texts: list[str], batch_size: int = 32, show_progress_bar: bool | None = None) -> list[TextSide]:
        """Every text's matching tokens (ids, vectors, weights), from one cached token-state pass."""
        if self.package:  # every token takes part; [CLS]/[SEP] weigh 0 (idf-refs weights are set per call)
            # each text cut at the tokenizer's maximum input, as the package cuts it
            flat, matrix = package_token_vectors(self.model, self.encoder.pipeline.source.layers, texts, batch_size,
                                                 show_progress_bar)
            sides = text_sides(flat, matrix, True, self.normalise, None)
            for side in sides:
                side.weights = plain_weights(side.token_ids, self.model.tokenizer)
            return sides
        flat, matrix = self.encoder.token_vectors(texts, batch_size, show_progress_bar)
        return text_sides(flat, matrix, self.include_special, self.normalise, self.vocabulary_weights())

    def similarity_pairs(self, pairs: Sequence[tuple[str, str]], batch_size: int = 32, show_progress_bar: bool | None = None) -> np.ndarray:
        """Matching similarity of each pair (float32, shape (n,)); all unique texts go through one pass."""
        pairs = check_text_pairs(pairs)
        for position, pair in enumerate(pairs):  # mode=bertscore names the candidate or reference (check_pairs)
            if not self.package and any(is_blank(text) for text in pair):  # nothing to match: a score of nothing
                raise InputError(f"pair at index {position} has an empty text (or only zero-width characters); "
                                 "token matching needs tokens on both sides")
        if not pairs:
            return np.zeros(0, dtype=np.float32)
        if self.package:
            return self._package_f1(pairs, batch_size, show_progress_bar)
        unique = list(dict.fromkeys(text for pair in pairs for text in pair))
        index = {text: row for row, text in enumerate(unique)}
        sides = self.prepare(unique, batch_size, show_progress_bar)
        return score_sides(sides, [(index[a], index[b]) for a, b in pairs], self.score, self.mode)

    def _package_f1(self, pairs: list[tuple[str, str]], batch_size: int, show_progress_bar: bool | None) -> np.ndarray:
        """The bert-score package's F1 of (candidate, reference) pairs: inputs and idf weights checked
        before the model runs, maxima floored where its padded batches of 64 pairs floor them."""
        cands, refs = check_pairs([a for a, _ in pairs], [b for _, b in pairs])
        tokenizer = self.model.tokenizer
        cut = package_input_limit(self.model)
        idf = reference_idf(input_token_ids(tokenizer, refs, cut), len(tokenizer)) if self.weight_kind == "idf-refs" else None
        if idf is not None:
            check_weighted({"candidate": input_token_ids(tokenizer, cands, cut), "reference": input_token_ids(tokenizer, refs, cut)},
                           lambda ids: idf[ids])
        unique = list(dict.fromkeys([*cands, *refs]))
        index = {text: row for row, text in enumerate(unique)}
        sides = self.prepare(unique, batch_size, show_progress_bar)
        if idf is not None:
            for side in sides:
                side.weights = idf[side.token_ids].astype(np.float32)
        scores = score_bertscore_sides([sides[index[c]] for c in cands], [sides[index[r]] for r in refs], PACKAGE_BATCH)
        return scores[:, 2].astype(np.float32)

    def explain(self, text_a: str, text_b: str) -> MatchExplanation:
        """The numbers behind one pair's score, for printing and plotting (Fig. 2)."""
        if self.weight_kind == "idf-refs":
            raise InputError(f"{self.spec}: idf-refs weights come from the references of many pairs; explain one pair "
                             "with weights=none (or weights=idf)")
        check_texts([text_a, text_b])
        a, b = self.prepare([text_a, text_b])
        tokenizer = self.model.tokenizer
        tokens_a = tokenizer.convert_ids_to_tokens(a.token_ids.tolist())
        tokens_b = tokenizer.convert_ids_to_tokens(b.token_ids.tolist())
        return explain_pair(a, b, tokens_a, tokens_b, self.score, self.mode)


MATCH_FAMILY = Family(
    "match",
    MATCH_OPTIONS,
    MatchingMethod,
    "token-level matching similarity of text pairs (pairwise; Eq. 1–2 of the token-matching paper)",
)
