"""BERTScore's scoring rules as the ``bert-score`` package applies them: the checks that need no model, the
layer, token weights (plain and idf), greedy-max precision, recall and F1 with the package's padding floors,
and the token vectors of each text from the token-state stage (the method doc is :mod:`.bertscore`'s)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from embedlab.data import is_blank
from embedlab.errors import InputError, InputTypeError
from embedlab.matching.scoring import TextSide, weighted_mean
from embedlab.methods.base import check_texts, unit_rows
from embedlab.models.loading import LoadedModel
from embedlab.pooling.aggregation import FlatTokens
from embedlab.pooling.sources import ContextualTokens, layout_of, special_token_ids as model_special_ids
from embedlab.tokens.store import store_for

# The layer the package uses by default for some common models (its ``model2layers`` table, tuned on
# WMT16); any other model defaults to its last layer.
PACKAGE_DEFAULT_LAYERS = {
    "bert-base-uncased": 9,
    "bert-large-uncased": 18,
    "bert-base-multilingual-cased": 9,
    "roberta-base": 10,
    "roberta-large": 17,
    "roberta-large-mnli": 19,
    "distilbert-base-uncased": 5,
    "distilroberta-base": 5,
    "xlm-roberta-base": 9,
    "xlm-roberta-large": 17,
    "microsoft/deberta-xlarge-mnli": 40,
    "microsoft/mpnet-base": 8,
}

PACKAGE_BATCH = 64  # the package's default batch_size: pairs per padded matching batch


# --- input checks (no model needed) ------------------------------------------------------------------

def check_pairs(cands: Sequence[str], refs: Sequence[str]) -> tuple[list[str], list[str]]:
    """Candidates and references as stripped lists of equal length, no text empty."""
    cands, refs = check_texts(cands), check_texts(refs)
    if len(cands) != len(refs):
        raise InputError(f"different numbers of candidates ({len(cands)}) and references ({len(refs)})")
    for side, texts in (("candidate", cands), ("reference", refs)):
        for index, text in enumerate(texts):
            if is_blank(text):
                raise InputError(f"{side} {index} is empty (or only zero-width characters): BERTScore is undefined for an empty text")
    return [text.strip() for text in cands], [text.strip() for text in refs]


def default_layer(model: LoadedModel) -> int:
    """The package's default layer when it tunes one for this model, else the last layer."""
    names = {model.name, str(getattr(model.model.config, "_name_or_path", "") or "")}
    for name in names:
        if name in PACKAGE_DEFAULT_LAYERS:
            return min(PACKAGE_DEFAULT_LAYERS[name], model.num_layers)
    return model.num_layers


def resolve_layer(model: LoadedModel, layer: int | None) -> int:
    """``layer`` checked against the model (0 = embedding output, 1..L = blocks), or the default layer."""
    if layer is None:
        return default_layer(model)
    if isinstance(layer, bool) or not isinstance(layer, (int, np.integer)):
        raise InputTypeError(f"layer must be a whole number, got {layer!r}")
    if not 0 <= layer <= model.num_layers:
        raise InputError(f"layer {layer} is beyond {model.name}'s depth: it has layers 0 (embedding output) to {model.num_layers}")
    return int(layer)


# --- weights -----------------------------------------------------------------------------------------

def special_token_ids(tokenizer) -> list[int]:
    """The ids BERTScore weighs 0 without idf: the tokenizer's [CLS] and [SEP] (``cls_token_id``, ``sep_token_id``)."""
    return [token for token in (tokenizer.cls_token_id, tokenizer.sep_token_id) if token is not None]


def plain_weights(token_ids: np.ndarray, tokenizer) -> np.ndarray:
    """1 per token, 0 for [CLS]/[SEP]: the package's weights with idf off."""
    return np.where(np.isin(token_ids, special_token_ids(tokenizer)), 0.0, 1.0).astype(np.float32)


LONG_TEXTS = ("truncate", "chunk")  # the package's cut at the tokenizer's maximum; embedlab's chunks (an extension)


def package_input_limit(model: LoadedModel) -> int:
    """The tokens the package gives the model per text: the tokenizer's ``model_max_length`` (512 for
    MiniLM, whose sentence-transformers limit of 256 the package does not read), bounded by the model's
    positions when the tokenizer sets no limit."""
    limit = getattr(model.tokenizer, "model_max_length", None)
    positions = getattr(model.model.config, "max_position_embeddings", None)
    if not isinstance(limit, int) or limit > 1_000_000:  # transformers' "no limit" is a huge number
        limit = positions or model.max_length
    return int(min(limit, positions) if positions else limit)


def input_token_ids(tokenizer, texts: Sequence[str], max_length: int | None = None) -> list[np.ndarray]:
    """Each text's token ids with the special tokens the tokenizer adds (what the package tokenises), cut
    to ``max_length`` as the package cuts them when given."""
    cut = {"truncation": True, "max_length": max_length} if max_length is not None else {}
    encoded = tokenizer(list(texts), add_special_tokens=True, verbose=False, **cut)["input_ids"]
    return [np.asarray(ids, dtype=np.int64) for ids in encoded]


def check_long_texts(long_texts: str) -> str:
    if long_texts not in LONG_TEXTS:
        raise InputError(f"long_texts must be one of {', '.join(LONG_TEXTS)}, got {long_texts!r}")
    return long_texts


def package_token_vectors(model: LoadedModel, layers: tuple[int, ...], texts: list[str], batch_size: int,
                          show_progress_bar: bool | None, long_texts: str = "truncate") -> tuple[FlatTokens, np.ndarray]:
    """The token vectors (layers averaged) the package matches: each text's first :func:`package_input_limit`
    tokens in one model input. A text within the model's own input (``max_length``) runs as it does for every
    other method (shared token states); a longer one runs on the same weights with the package's input length.
    ``long_texts="chunk"``: embedlab's sentence-packed chunks instead (no cut; not the package's numbers)."""
    plain = ContextualTokens(model, layers=layers, template=None)
    if check_long_texts(long_texts) == "chunk":
        return plain.token_vectors(texts, batch_size, show_progress_bar)
    lengths = [len(ids) for ids in input_token_ids(model.tokenizer, texts)]
    long = [position for position, length in enumerate(lengths) if length > model.max_length]
    if not long:
        return plain.token_vectors(texts, batch_size, show_progress_bar)
    limit = package_input_limit(model)
    wide = model if limit <= model.max_length else dataclasses.replace(model, max_length=limit)
    short = [position for position, length in enumerate(lengths) if length <= model.max_length]
    states: list = [None] * len(texts)
    for positions, source, cut in ((short, model, None), (long, wide, limit)):
        if positions:
            found = store_for(source).compute([texts[position] for position in positions], batch_size=batch_size,
                                              show_progress_bar=show_progress_bar, layers=layers, max_tokens=cut)
            for position, text_states in zip(positions, found):
                states[position] = text_states
    layout = layout_of(states)
    return layout.flat(model_special_ids(model)), layout.matrix(layers)


def reference_idf(reference_ids: Sequence[np.ndarray], vocab_size: int) -> np.ndarray:
    """idf(t) = log((M + 1) / (df(t) + 1)) for every vocabulary id over the M references (float64)."""
    counts = np.zeros(vocab_size, dtype=np.int64)
    for ids in reference_ids:
        counts[np.unique(ids)] += 1
    return np.log((len(reference_ids) + 1) / (counts + 1.0))


def check_weighted(sides: dict[str, Sequence[np.ndarray]], weights_of) -> None:
    """Refuse a text whose tokens all weigh 0 (its P or R would be 0/0), naming it."""
    for side, token_lists in sides.items():
        for index, ids in enumerate(token_lists):
            if float(np.sum(weights_of(ids))) <= 0:
                raise InputError(
                    f"{side} {index} has no token with a weight above 0 (with idf, every one of its tokens occurs in "
                    "every reference; or it has no token besides [CLS]/[SEP]), so its BERTScore is undefined; "
                    "use more varied references or idf off"
                )


# --- scores ------------------------------------------------------------------------------------------

def precision_recall_f1(candidate: TextSide, reference: TextSide, floor_precision: bool = False,
                        floor_recall: bool = False) -> tuple[float, float, float]:
    """P, R and F1 of one pair from unit token vectors and weights (greedy max matching); a ``floor_*``
    side's maxima are floored at 0 (the package's padded positions, see :func:`padding_floors`)."""
    matrix = candidate.vectors @ reference.vectors.T
    row_max, column_max = matrix.max(axis=1), matrix.max(axis=0)
    if floor_precision:
        row_max = np.maximum(row_max, 0)
    if floor_recall:
        column_max = np.maximum(column_max, 0)
    precision = weighted_mean(row_max, candidate.weights)
    recall = weighted_mean(column_max, reference.weights)
    total = precision + recall
    f1 = 2 * precision * recall / total if total != 0 else 0.0
    return precision, recall, f1


def padding_floors(cand_lengths: Sequence[int], ref_lengths: Sequence[int], batch_size: int) -> tuple[np.ndarray, np.ndarray]:
    """Which pairs the package scores against padding: in each batch of ``batch_size`` consecutive pairs,
    precision maxima meet padded (0) columns when the pair's reference is shorter than the batch's longest
    reference, recall maxima when its candidate is shorter than the longest candidate."""
    cand_lengths, ref_lengths = np.asarray(cand_lengths), np.asarray(ref_lengths)
    floor_precision = np.zeros(len(cand_lengths), dtype=bool)
    floor_recall = np.zeros(len(cand_lengths), dtype=bool)
    for start in range(0, len(cand_lengths), batch_size):
        batch = slice(start, start + batch_size)
        floor_precision[batch] = ref_lengths[batch] < ref_lengths[batch].max()
        floor_recall[batch] = cand_lengths[batch] < cand_lengths[batch].max()
    return floor_precision, floor_recall


def text_sides(model: LoadedModel, layer: int, texts: list[str], batch_size: int, show_progress_bar: bool | None,
               long_texts: str = "truncate") -> list[TextSide]:
    """Every text's token ids and unit token vectors of ``layer`` (special tokens included), from the
    token-state stage (:func:`package_token_vectors`); weights are left at 1 for the caller to set."""
    flat, matrix = package_token_vectors(model, (layer,), texts, batch_size, show_progress_bar, long_texts)
    matrix = unit_rows(matrix)
    return [
        TextSide(flat.token_ids[start:end], matrix[start:end], np.ones(end - start, np.float32))
        for start, end in zip(flat.offsets[:-1], flat.offsets[1:])
    ]


def score_sides(cand_sides: Sequence[TextSide], ref_sides: Sequence[TextSide], package_batch: int | None) -> np.ndarray:
    """(n, 3) float64 P, R, F of paired sides; ``package_batch``: floor maxima as the package's padded
    batches of that many pairs do (None: plain maxima)."""
    if package_batch is None:
        floors = np.zeros((2, len(cand_sides)), dtype=bool)
    else:
        floors = np.array(padding_floors([len(side.token_ids) for side in cand_sides],
                                         [len(side.token_ids) for side in ref_sides], package_batch))
    scores = [precision_recall_f1(cand, ref, bool(floor_p), bool(floor_r))
              for cand, ref, floor_p, floor_r in zip(cand_sides, ref_sides, floors[0], floors[1])]
    return np.array(scores, dtype=np.float64).reshape(-1, 3)

