"""BERTScore baseline rescaling: b for P, R and F of one model and layer, read from a file in the package's
format, from a packaged or cached record, or built from random pairs of WikiText-2 train sentences."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from embedlab.errors import InputError
from embedlab.matching.bertscore_scoring import PACKAGE_BATCH, plain_weights, resolve_layer, score_sides
from embedlab.matching.scoring import TextSide
from embedlab.methods.base import unit_rows
from embedlab.models.loading import LoadedModel
from embedlab.runtime.cache.atomic import atomic_write_bytes
from embedlab.runtime.settings import cache_dir, data_path
from embedlab.version import __version__

RESOURCES = Path(__file__).resolve().parent.parent / "resources" / "bertscore_baselines"
BASELINE_PAIRS = 5000  # random sentence pairs per baseline (the BERTScore paper used 1M from Common Crawl)
BASELINE_SEED = 0
BASELINE_MIN_CHARS = 20  # WikiText-2 sentences shorter than this (headings' leftovers, fragments) are skipped
BASELINE_SLICE = 512  # (a multiple of PACKAGE_BATCH) pairs whose token vectors are held at once while a baseline is built


@dataclass
class Baseline:
    """b for P, R and F of one model and layer, and how it was made."""

    values: np.ndarray  # (3,) float64: P, R, F
    provenance: dict


def read_package_baseline(path: Path, layer: int) -> Baseline:
    """The row of ``layer`` from a baseline file in the package's format (a ``LAYER,P,R,F`` header)."""
    lines = [line.strip() for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    if not lines or [cell.strip() for cell in lines[0].split(",")] != ["LAYER", "P", "R", "F"]:
        raise InputError(f"{path}: a baseline file starts with the header LAYER,P,R,F")
    for number, line in enumerate(lines[1:], start=2):
        cells = line.split(",")
        try:
            row_layer, values = int(cells[0]), np.array([float(cell) for cell in cells[1:]], dtype=np.float64)
        except ValueError:
            raise InputError(f"{path}, line {number}: expected LAYER,P,R,F numbers, got {line!r}") from None
        if values.shape != (3,) or not np.all(np.isfinite(values)) or np.any(values >= 1):
            raise InputError(f"{path}, line {number}: expected three finite baselines below 1, got {line!r}")
        if row_layer == layer:
            return Baseline(values, {"source": str(path)})
    raise InputError(f"{path} has no baseline for layer {layer}")


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
        if record.get("model_fingerprint") not in (model.fingerprint, model.transformer_fingerprint):
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
        raise InputError(f"{pairs} baseline pairs need {2 * pairs} sentences; the corpus has {len(sentences)}")
    rng = np.random.default_rng(seed)
    chosen = rng.choice(len(sentences), size=2 * pairs, replace=False)
    return [(sentences[chosen[2 * index]], sentences[chosen[2 * index + 1]]) for index in range(pairs)]


def build_baselines(model: LoadedModel, layers: Sequence[int], batch_size: int = 64, show_progress_bar: bool | None = None,
                    pairs: int = BASELINE_PAIRS, seed: int = BASELINE_SEED) -> dict[int, Baseline]:
    """b = mean P, R, F (idf off) over random pairs of WikiText-2 train sentences, per layer (one model run
    for all ``layers``), as the BERTScore paper builds its baselines from random Common Crawl pairs; each
    layer's record, with its provenance, goes to the cache entry :func:`check_baseline_source` looks for."""
    from embedlab.data.wikitext import wikitext2_file
    from embedlab.runtime.settings import token_states_uncached
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
