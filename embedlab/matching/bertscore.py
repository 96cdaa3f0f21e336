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
sentences (see :func:`baseline_for`); the package's own baseline files come from Common Crawl, so
rescaled numbers differ from the package's. Everything that can be checked without the model (pair
counts, empty texts, the layer, a baseline or a corpus to build one, idf weights that would all be 0)
is checked before the model runs.

The package matches pairs in batches of ``batch_size`` consecutive pairs, padded to the batch's longest
candidate and reference, and scores a padded position as similarity 0: a token whose best real cosine
is negative then scores 0 when the other text is shorter than the longest of its batch (and keeps its
negative value when it is the longest). This happens (last layer of all-MiniLM-L6-v2: 16 of 300 STS-B
test pairs have a token with a negative best cosine), so by default embedlab applies the same floor to
the same pairs (``package_padding=True``); ``package_padding=False`` gives the plain greedy maxima, the
same for a pair wherever it sits. Different by design: a text longer than the model input is split into
sentence-packed chunks (the token-state stage) instead of cut at 512 tokens.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from embedlab import __version__
from embedlab.matching.scoring import TextSide, weighted_mean
from embedlab.methods.base import check_texts, unit_rows
from embedlab.models import LoadedModel, load_model
from embedlab.pooling.sources import ContextualTokens
from embedlab.runtime import atomic_write_bytes, cache_dir, data_path

RESOURCES = Path(__file__).resolve().parent.parent / "resources" / "bertscore_baselines"

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
BASELINE_PAIRS = 5000  # random sentence pairs per baseline (the BERTScore paper used 1M from Common Crawl)
BASELINE_SEED = 0
BASELINE_MIN_CHARS = 20  # WikiText-2 sentences shorter than this (headings' leftovers, fragments) are skipped
BASELINE_SLICE = 512  # (a multiple of PACKAGE_BATCH) pairs whose token vectors are held at once while a baseline is built


# --- input checks (no model needed) ------------------------------------------------------------------

def check_pairs(cands: Sequence[str], refs: Sequence[str]) -> tuple[list[str], list[str]]:
    """Candidates and references as stripped lists of equal length, no text empty."""
    cands, refs = check_texts(cands), check_texts(refs)
    if len(cands) != len(refs):
        raise ValueError(f"different numbers of candidates ({len(cands)}) and references ({len(refs)})")
    for side, texts in (("candidate", cands), ("reference", refs)):
        for index, text in enumerate(texts):
            if not text.strip():
                raise ValueError(f"{side} {index} is empty: BERTScore is undefined for an empty text")
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
        raise TypeError(f"layer must be a whole number, got {layer!r}")
    if not 0 <= layer <= model.num_layers:
        raise ValueError(f"layer {layer} is beyond {model.name}'s depth: it has layers 0 (embedding output) to {model.num_layers}")
    return int(layer)


# --- weights -----------------------------------------------------------------------------------------

def special_token_ids(tokenizer) -> list[int]:
    """The ids BERTScore weighs 0 without idf: the tokenizer's [CLS] and [SEP] (``cls_token_id``, ``sep_token_id``)."""
    return [token for token in (tokenizer.cls_token_id, tokenizer.sep_token_id) if token is not None]


def plain_weights(token_ids: np.ndarray, tokenizer) -> np.ndarray:
    """1 per token, 0 for [CLS]/[SEP]: the package's weights with idf off."""
    return np.where(np.isin(token_ids, special_token_ids(tokenizer)), 0.0, 1.0).astype(np.float32)


def input_token_ids(tokenizer, texts: Sequence[str]) -> list[np.ndarray]:
    """Each text's token ids with the special tokens the tokenizer adds (what the package tokenises)."""
    encoded = tokenizer(list(texts), add_special_tokens=True, verbose=False)["input_ids"]
    return [np.asarray(ids, dtype=np.int64) for ids in encoded]


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
                raise ValueError(
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


def text_sides(model: LoadedModel, layer: int, texts: list[str], batch_size: int, show_progress_bar: bool | None) -> list[TextSide]:
    """Every text's token ids and unit token vectors of ``layer`` (special tokens included), from the
    token-state stage; weights are left at 1 for the caller to set."""
    flat, matrix = ContextualTokens(model, layers=(layer,), template=None).token_vectors(texts, batch_size, show_progress_bar)
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


def _score(model: LoadedModel, layer: int, cands: list[str], refs: list[str], idf: np.ndarray | None,
           batch_size: int, show_progress_bar: bool | None, package_batch: int | None) -> np.ndarray:
    """(n, 3) float64 P, R, F of checked pairs (one token-state pass over their distinct texts)."""
    unique = list(dict.fromkeys([*cands, *refs]))
    row = {text: position for position, text in enumerate(unique)}
    sides = text_sides(model, layer, unique, batch_size, show_progress_bar)
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
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """BERTScore precision, recall and F1 of each candidate against its reference, as the ``bert-score``
    package's ``score(cands, refs, model_type=..., num_layers=layer, idf=idf)`` gives them.

    ``model``: a named model, a local folder or a loaded model. ``layer``: 0 (embedding output) to L; by
    default the package's tuned layer for the models it knows, else the last. ``idf``: idf over ``refs``.
    ``rescale``: (s − b) / (1 − b) with the baseline of this model and layer (``baseline``: a file in the
    package's format, ``LAYER,P,R,F`` rows; otherwise embedlab's WikiText-2 baseline, built once and cached).
    ``batch_size``: texts per model run and, as in the package, pairs per matching batch;
    ``package_padding``: floor the greedy maxima at 0 where the package's padded batches do (module doc).
    Returns three float32 arrays of shape (n,).
    """
    cands, refs = check_pairs(cands, refs)
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive whole number, got {batch_size!r}")
    loaded = load_model(model) if isinstance(model, str) else model
    layer = resolve_layer(loaded, layer)
    baseline_source = check_baseline_source(loaded, layer, baseline) if rescale else None
    tokenizer = loaded.tokenizer
    cand_ids, ref_ids = input_token_ids(tokenizer, cands), input_token_ids(tokenizer, refs)
    idf_table = reference_idf(ref_ids, len(tokenizer)) if idf else None
    check_weighted({"candidate": cand_ids, "reference": ref_ids},
                   (lambda ids: plain_weights(ids, tokenizer)) if idf_table is None else (lambda ids: idf_table[ids]))
    scores = _score(loaded, layer, cands, refs, idf_table, batch_size, show_progress_bar,
                    batch_size if package_padding else None) if cands else np.zeros((0, 3))
    if baseline_source is not None:
        values = load_or_build_baseline(loaded, layer, baseline_source, batch_size, show_progress_bar).values
        scores = (scores - values) / (1 - values)
    scores = scores.astype(np.float32)
    return scores[:, 0].copy(), scores[:, 1].copy(), scores[:, 2].copy()


# --- baseline rescaling ------------------------------------------------------------------------------

@dataclass
class Baseline:
    """b for P, R and F of one model and layer, and how it was made."""

    values: np.ndarray  # (3,) float64: P, R, F
    provenance: dict


def read_package_baseline(path: Path, layer: int) -> Baseline:
    """The row of ``layer`` from a baseline file in the package's format (a ``LAYER,P,R,F`` header)."""
    lines = [line.strip() for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    if not lines or [cell.strip() for cell in lines[0].split(",")] != ["LAYER", "P", "R", "F"]:
        raise ValueError(f"{path}: a baseline file starts with the header LAYER,P,R,F")
    for number, line in enumerate(lines[1:], start=2):
        cells = line.split(",")
        try:
            row_layer, values = int(cells[0]), np.array([float(cell) for cell in cells[1:]], dtype=np.float64)
        except ValueError:
            raise ValueError(f"{path}, line {number}: expected LAYER,P,R,F numbers, got {line!r}") from None
        if values.shape != (3,) or not np.all(np.isfinite(values)) or np.any(values >= 1):
            raise ValueError(f"{path}, line {number}: expected three finite baselines below 1, got {line!r}")
        if row_layer == layer:
            return Baseline(values, {"source": str(path)})
    raise ValueError(f"{path} has no baseline for layer {layer}")


def baseline_name(model: LoadedModel, layer: int) -> str:
    return f"{model.fingerprint}-layer{layer}-pairs{BASELINE_PAIRS}-seed{BASELINE_SEED}.json"


def _stored_baseline(path: Path, model: LoadedModel, layer: int) -> Baseline | None:
    """A baseline record (packaged or cached) for this model and layer, if it holds one."""
    if not path.is_file():
        return None
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
        entry = record["layers"][str(layer)] if "layers" in record else record
        # the content fingerprint, or the weights-only one that records made before it was widened carry
        if record.get("model_fingerprint") not in (model.fingerprint, model.weights_fingerprint):
            return None
        values = np.array([entry["P"], entry["R"], entry["F"]], dtype=np.float64)
    except (KeyError, TypeError, ValueError):
        return None
    provenance = {key: value for key, value in record.items() if key != "layers"}
    provenance.update({key: value for key, value in entry.items() if key not in ("P", "R", "F")})
    return Baseline(values, {**provenance, "layer": layer, "source": str(path)})


def packaged_baseline_path(model: LoadedModel) -> Path:
    return RESOURCES / f"{model.name}.json"


def check_baseline_source(model: LoadedModel, layer: int, baseline: str | Path | None) -> Baseline | str:
    """A baseline found now, or ``"build"`` when WikiText-2 is there to build one; else a clear error."""
    if baseline is not None:
        path = Path(baseline)
        if not path.is_file():
            raise FileNotFoundError(f"baseline file not found: {path}")
        return read_package_baseline(path, layer)
    for path in (packaged_baseline_path(model), cache_dir("bertscore_baselines") / baseline_name(model, layer)):
        found = _stored_baseline(path, model, layer)
        if found is not None:
            return found
    try:
        data_path("corpus", "wikitext-2", "train.txt")
    except FileNotFoundError as error:
        raise FileNotFoundError(
            f"rescale: no BERTScore baseline for {model.name} layer {layer} yet, and no corpus to build one ({error}); "
            "give a baseline file (LAYER,P,R,F) or make WikiText-2 available"
        ) from None
    return "build"


def load_or_build_baseline(model: LoadedModel, layer: int, source: Baseline | str, batch_size: int = 64,
                           show_progress_bar: bool | None = None) -> Baseline:
    if isinstance(source, Baseline):
        return source
    return build_baselines(model, (layer,), batch_size, show_progress_bar)[layer]


def baseline_sentences(model: LoadedModel) -> list[str]:
    """The WikiText-2 train sentences baselines are drawn from (pysbd, at least BASELINE_MIN_CHARS long)."""
    from embedlab.data.wikitext import wikitext2_sentences

    unk = model.tokenizer.unk_token or "<unk>"
    return [sentence.strip() for sentence in wikitext2_sentences("train", min_chars=BASELINE_MIN_CHARS, unk_token=unk)]


def baseline_pairs(sentences: Sequence[str], pairs: int, seed: int) -> list[tuple[str, str]]:
    """``pairs`` pairs of distinct random sentences (seeded), no sentence used twice."""
    if not 0 < 2 * pairs <= len(sentences):
        raise ValueError(f"{pairs} baseline pairs need {2 * pairs} sentences; the corpus has {len(sentences)}")
    rng = np.random.default_rng(seed)
    chosen = rng.choice(len(sentences), size=2 * pairs, replace=False)
    return [(sentences[chosen[2 * index]], sentences[chosen[2 * index + 1]]) for index in range(pairs)]


def build_baselines(model: LoadedModel, layers: Sequence[int], batch_size: int = 64, show_progress_bar: bool | None = None,
                    pairs: int = BASELINE_PAIRS, seed: int = BASELINE_SEED) -> dict[int, Baseline]:
    """b = mean P, R, F (idf off) over random pairs of WikiText-2 train sentences, per layer (one model run
    for all ``layers``), as the BERTScore paper builds its baselines from random Common Crawl pairs; each
    layer's record, with its provenance, goes to the cache entry :func:`check_baseline_source` looks for."""
    from embedlab.data.wikitext import wikitext2_file
    from embedlab.runtime import token_states_uncached
    from embedlab.tokens.store import store_for

    layers = tuple(resolve_layer(model, layer) for layer in layers)
    sentences = baseline_sentences(model)
    chosen = baseline_pairs(sentences, pairs, seed)
    started = time.perf_counter()
    totals = {layer: np.zeros(3, dtype=np.float64) for layer in layers}
    with token_states_uncached():  # 2 × pairs sentences read once: not worth the token-state cache
        for start in range(0, len(chosen), BASELINE_SLICE):
            part = chosen[start : start + BASELINE_SLICE]
            unique = list(dict.fromkeys(text for pair in part for text in pair))
            states = dict(zip(unique, store_for(model).compute(unique, batch_size=batch_size, show_progress_bar=show_progress_bar, layers=layers)))
            for layer in layers:
                sides = {text: TextSide(item.token_ids, unit_rows(item.layer(layer)), plain_weights(item.token_ids, model.tokenizer))
                         for text, item in states.items()}
                totals[layer] += score_sides([sides[a] for a, _ in part], [sides[b] for _, b in part], PACKAGE_BATCH).sum(axis=0)
    source = wikitext2_file("train")
    common = {
        "model": model.name,
        "model_fingerprint": model.fingerprint,
        "corpus": f"WikiText-2 train ({source.name}, {source.stat().st_size} bytes), pysbd sentences of >= {BASELINE_MIN_CHARS} characters",
        "sentences_available": len(sentences),
        "pairs": len(chosen),
        "seed": seed,
        "how": "mean BERTScore P, R, F (idf off, the package's padded batches of 64 pairs) of random pairs of distinct "
               "sentences, each sentence used once: the BERTScore paper's random-pair baseline (the package's own files "
               "use 1M Common Crawl pairs, so rescaled scores differ from the package's)",
        "embedlab_version": __version__,
        "made": time.strftime("%Y-%m-%d", time.gmtime()),
        "seconds": round(time.perf_counter() - started, 1),
    }
    baselines = {}
    for layer in layers:
        values = totals[layer] / len(chosen)
        record = {**common, "layer": layer, "P": float(values[0]), "R": float(values[1]), "F": float(values[2])}
        out = cache_dir("bertscore_baselines") / baseline_name(model, layer)
        atomic_write_bytes(out, (json.dumps(record, indent=2, sort_keys=True) + "\n").encode())
        baselines[layer] = Baseline(values, {**record, "source": str(out)})
    return baselines


def write_baseline_record(out: Path | str, baselines: dict[int, Baseline]) -> None:
    """Several layers' baselines of one model as one record (the format of the packaged baselines)."""
    records = [baseline.provenance for baseline in baselines.values()]
    common = {key: value for key, value in records[0].items() if key not in ("layer", "P", "R", "F", "source")}
    layers = {str(record["layer"]): {"P": record["P"], "R": record["R"], "F": record["F"]} for record in records}
    atomic_write_bytes(Path(out), (json.dumps({**common, "layers": layers}, indent=2, sort_keys=True) + "\n").encode())
