"""Ranking metrics as trec_eval computes them, per query, and the TREC run format.

Each measure follows trec_eval's definition (relevance level 1: a judged grade ≥ 1 is relevant; graded
judgements are nDCG's gains), so the values equal ``pytrec_eval`` on the same run (tests/evaluation/test_ranking.py):

* ``ndcg@k`` = trec_eval ``ndcg_cut_k``: Σ gain/log2(rank+1) over the top k, over the same sum for the judged
  grades sorted best first;
* ``map@k`` = ``map_cut_k``: precision at each relevant document in the top k, summed, over the number of
  relevant documents judged;
* ``recall@k`` = ``recall_k`` and ``precision@k`` = ``P_k`` (relevant in the top k over k, also when fewer
  than k documents were retrieved);
* ``mrr@k`` = ``recip_rank`` of the run cut to its top k (trec_eval's own ``recip_rank`` ignores the cut).

trec_eval ignores a run's ranks and orders each query's documents by score, best first, and equal scores by
document id in *descending* string order (its ``comp_sim_docno``); :func:`trec_order` is that order, and the
search (:mod:`embedlab.evaluation.search`) selects its top k by it, so a tie at the cut-off keeps the same
documents trec_eval would.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import numpy as np

from embedlab.errors import InputError

MEASURES = ("ndcg", "map", "mrr", "recall", "precision")
DEFAULT_CUTOFFS = (1, 3, 5, 10, 100)


def parse_cutoffs(text: str | Sequence[int]) -> tuple[int, ...]:
    """``"1,3,5,10,100"`` (or a sequence) as sorted distinct positive cut-offs."""
    items = text.split(",") if isinstance(text, str) else list(text)
    try:
        cutoffs = sorted({int(str(item).strip()) for item in items if str(item).strip()})
    except ValueError:
        raise InputError(f"--k must be comma-separated positive integers, got {text!r}") from None
    if not cutoffs or cutoffs[0] < 1:
        raise InputError(f"--k must be comma-separated positive integers, got {text!r}")
    return tuple(cutoffs)


def metric_names(cutoffs: Iterable[int]) -> list[str]:
    return [f"{measure}@{k}" for measure in MEASURES for k in cutoffs]


def trec_order(doc_ids: Sequence[str], scores: Sequence[float]) -> list[int]:
    """Positions of ``doc_ids`` in trec_eval's order: score descending, then document id descending."""
    return sorted(range(len(doc_ids)), key=lambda i: (-float(scores[i]), _descending(doc_ids[i])))


class _descending(str):
    """A string that sorts in reverse (Python's sort has no per-key reverse)."""

    def __lt__(self, other: str) -> bool:  # type: ignore[override]
        return str.__gt__(self, other)


def query_metrics(ranked: Sequence[str], judged: Mapping[str, int], cutoffs: Sequence[int]) -> dict[str, float]:
    """Every ``measure@k`` of one query whose run is ``ranked`` (document ids, best first, trec_eval's order)."""
    grades = np.array([max(judged.get(doc, 0), 0) for doc in ranked], dtype=np.float64)
    relevant = grades >= 1
    num_relevant = sum(1 for grade in judged.values() if grade >= 1)
    ideal = np.sort(np.array([grade for grade in judged.values() if grade > 0], dtype=np.float64))[::-1]
    discounts = 1.0 / np.log2(np.arange(2, max(len(grades), len(ideal), 1) + 2))
    hits = np.cumsum(relevant)
    first_hit = int(np.argmax(relevant)) + 1 if relevant.any() else 0
    values: dict[str, float] = {}
    for k in cutoffs:
        top = min(k, len(grades))
        dcg = float(np.dot(grades[:top], discounts[:top]))
        idcg = float(np.dot(ideal[:k], discounts[:min(k, len(ideal))]))
        values[f"ndcg@{k}"] = dcg / idcg if idcg > 0 else 0.0
        precision_at_hits = hits[:top][relevant[:top]] / np.arange(1, top + 1)[relevant[:top]]
        values[f"map@{k}"] = float(precision_at_hits.sum()) / num_relevant if num_relevant else 0.0
        values[f"mrr@{k}"] = 1.0 / first_hit if 0 < first_hit <= k else 0.0
        found = int(hits[top - 1]) if top else 0
        values[f"recall@{k}"] = found / num_relevant if num_relevant else 0.0
        values[f"precision@{k}"] = found / k
    return values


def per_query_metrics(runs: Mapping[str, Sequence[str]], qrels: Mapping[str, Mapping[str, int]],
                      cutoffs: Sequence[int]) -> dict[str, np.ndarray]:
    """Each metric's value for every query of ``runs`` (in its order): ``{metric: float64 array}``."""
    names = metric_names(cutoffs)
    table = np.zeros((len(runs), len(names)), dtype=np.float64)
    for row, (query_id, ranked) in enumerate(runs.items()):
        values = query_metrics(ranked, qrels[query_id], cutoffs)
        table[row] = [values[name] for name in names]
    return {name: table[:, column] for column, name in enumerate(names)}


def trec_run_lines(query_ids: Sequence[str], doc_ids: Sequence[Sequence[str]], scores: np.ndarray, tag: str) -> Iterable[str]:
    """TREC run lines ``qid Q0 docid rank score tag``; scores printed exactly (``repr`` of float32 as float)."""
    tag = "".join(tag.split()) or "embedlab"
    for query_id, ranked, row in zip(query_ids, doc_ids, scores):
        for rank, (doc_id, score) in enumerate(zip(ranked, row), start=1):
            yield f"{query_id} Q0 {doc_id} {rank} {float(score)!r} {tag}\n"


def write_trec_run(path: str | Path, query_ids: Sequence[str], doc_ids: Sequence[Sequence[str]], scores: np.ndarray,
                   tag: str, *, option: str = "--run-out") -> Path:
    """The run in TREC format, through the one output writer (atomic: a reader never sees half a file)."""
    from embedlab.runtime.outputs import write_output_text

    target = Path(path).expanduser()
    write_output_text(target, "".join(trec_run_lines(query_ids, doc_ids, scores, tag)), option=option)
    return target
