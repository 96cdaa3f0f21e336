"""BERTScore as the ``bert-score`` package computes it (Zhang et al., "BERTScore: Evaluating Text
Generation with BERT"; the last row of the token-matching paper's Table 3).

For a candidate c and a reference r, every token of each (the special tokens the tokenizer adds
included) gets the layer's token vector; S is the cosine matrix of c's tokens against r's. Precision
is the weighted mean over c's tokens of their row maximum, recall the weighted mean over r's tokens of
their column maximum, F1 = 2PR / (P + R). Weights, as in the package:

* ``idf=False``: 1 for every token, 0 for the tokenizer's ``cls_token_id`` and ``sep_token_id``, which
  still take part in the greedy max as match candidates of the other side;
* ``idf=True``: idf(t) = log((M + 1) / (df(t) + 1)) over the M references (df counts the references
  holding t; a token no reference holds gets log(M + 1)); [CLS]/[SEP] occur in every reference, so
  their idf is 0.

Baseline rescaling ((s − b) / (1 − b) per P, R and F) uses b from random pairs of WikiText-2 train
sentences (:mod:`.bertscore_baselines`); the package's own baseline files come from Common Crawl, so
rescaled numbers differ from the package's. Everything that can be checked without the model (pair
counts, empty texts, the layer, a baseline or a corpus to build one, idf weights that would all be 0)
is checked before the model runs.

The package matches pairs in batches of ``batch_size`` consecutive pairs, padded to the batch's longest
candidate and reference, and scores a padded position as similarity 0: a token whose best real cosine
is negative then scores 0 when the other text is shorter than the longest of its batch (and keeps its
negative value when it is the longest). This happens (last layer of all-MiniLM-L6-v2: 16 of 300 STS-B
test pairs have a token with a negative best cosine), so by default embedlab applies the same floor to
the same pairs (``package_padding=True``); ``package_padding=False`` gives the plain greedy maxima, the
same for a pair wherever it sits. Like the package, each text is cut to the tokenizer's maximum input
(``model_max_length``: 512 tokens for MiniLM, beyond the 256 of its sentence-transformers setting), so every
pair the package can score gets its numbers; ``long_texts="chunk"`` is embedlab's extension instead: a longer
text is split into sentence-packed chunks (the token-state stage) and every one of its tokens is matched.

The scoring rules live in :mod:`.bertscore_scoring`, the baselines in :mod:`.bertscore_baselines`; import
their names from there.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from embedlab.errors import InputError
from embedlab.matching.bertscore_baselines import check_baseline_source, load_or_build_baseline
from embedlab.matching.bertscore_scoring import (check_long_texts, check_pairs, check_weighted, input_token_ids, package_input_limit,
                                                 plain_weights, reference_idf,
                                                 resolve_layer, score_sides, text_sides)
from embedlab.models.loading import LoadedModel, load_model



def _score(model: LoadedModel, layer: int, cands: list[str], refs: list[str], idf: np.ndarray | None,
           batch_size: int, show_progress_bar: bool | None, package_batch: int | None, long_texts: str) -> np.ndarray:
    """(n, 3) float64 P, R, F of checked pairs (one token-state pass over their distinct texts)."""
    unique = list(dict.fromkeys([*cands, *refs]))
    row = {text: position for position, text in enumerate(unique)}
    sides = text_sides(model, layer, unique, batch_size, show_progress_bar, long_texts)
    for side in sides:
        side.weights = plain_weights(side.token_ids, model.tokenizer) if idf is None else idf[side.token_ids].astype(np.float32)
    return score_sides([sides[row[c]] for c in cands], [sides[row[r]] for r in refs], package_batch)


def bertscore(
    cands: Sequence[str],
    refs: Sequence[str],
    model: str | LoadedModel = "minilm",
    layer: int | None = None,
    idf: bool = False,
    rescale: bool = False,
    batch_size: int = 64,
    baseline: str | Path | None = None,
    package_padding: bool = True,
    show_progress_bar: bool | None = None,
    long_texts: str = "truncate",
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """BERTScore precision, recall and F1 of each candidate against its reference, as the ``bert-score``
    package's ``score(cands, refs, model_type=..., num_layers=layer, idf=idf)`` gives them.

    ``model``: a named model, a local folder or a loaded model. ``layer``: 0 (embedding output) to L; by
    default the package's tuned layer for the models it knows, else the last. ``idf``: idf over ``refs``.
    ``rescale``: (s − b) / (1 − b) with the baseline of this model and layer (``baseline``: a file in the
    package's format, ``LAYER,P,R,F`` rows; otherwise embedlab's WikiText-2 baseline, built once and cached).
    ``batch_size``: texts per model run and, as in the package, pairs per matching batch;
    ``package_padding``: floor the greedy maxima at 0 where the package's padded batches do (module doc).
    ``long_texts``: ``truncate`` (the package: the tokenizer's maximum input) or ``chunk`` (embedlab's
    extension: every token of a longer text, in sentence-packed chunks).
    Returns three float32 arrays of shape (n,).
    """
    cands, refs = check_pairs(cands, refs)
    if not cands:  # the package's score([], []) ends in an IndexError (refs[0]); here one clear error instead
        raise InputError("bertscore needs at least one (candidate, reference) pair; both lists are empty")
    check_long_texts(long_texts)
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise InputError(f"batch_size must be a positive whole number, got {batch_size!r}")
    loaded = load_model(model) if isinstance(model, str) else model
    layer = resolve_layer(loaded, layer)
    baseline_source = check_baseline_source(loaded, layer, baseline) if rescale else None
    tokenizer = loaded.tokenizer
    cut = package_input_limit(loaded) if long_texts == "truncate" else None  # the package's idf reads the cut texts
    cand_ids, ref_ids = input_token_ids(tokenizer, cands, cut), input_token_ids(tokenizer, refs, cut)
    idf_table = reference_idf(ref_ids, len(tokenizer)) if idf else None
    check_weighted({"candidate": cand_ids, "reference": ref_ids},
                   (lambda ids: plain_weights(ids, tokenizer)) if idf_table is None else (lambda ids: idf_table[ids]))
    scores = _score(loaded, layer, cands, refs, idf_table, batch_size, show_progress_bar,
                    batch_size if package_padding else None, long_texts)
    if baseline_source is not None:
        values = load_or_build_baseline(loaded, layer, baseline_source, batch_size, show_progress_bar).values
        scores = (scores - values) / (1 - values)
    scores = scores.astype(np.float32)
    return scores[:, 0].copy(), scores[:, 1].copy(), scores[:, 2].copy()

