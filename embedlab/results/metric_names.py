"""Other tools' names for embedlab's metrics, resolved in one place (``eval``, ``results``, ``report``,
``compare`` and ``choose`` take ``--metric`` through :func:`resolve_metric`).

Retrieval's measures are spelt three more ways: pytrec_eval's (trec_eval's measure names: ``ndcg_cut_10``,
``map_cut_100``, ``recall_100``, ``P_10``, ``recip_rank``), MTEB's (``ndcg_at_10``, ``map_at_100``,
``recall_at_100``, ``mrr_at_10``, ``precision_at_10``) and BEIR's (``NDCG@10``, ``MAP@100``, ``Recall@100``,
``P@10``, ``MRR@10``). Each means embedlab's ``measure@k``. trec_eval's ``recip_rank`` has no cut-off (it reads
the whole run), so it means embedlab's ``mrr@k`` at the largest k present: the whole run embedlab ranks.
Any other name is embedlab's own, compared without regard to case (``Spearman`` is ``spearman``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from embedlab.errors import InputError

_MEASURES = {"ndcg": "ndcg", "ndcg_cut": "ndcg", "map": "map", "map_cut": "map", "recall": "recall", "p": "precision",
             "precision": "precision", "mrr": "mrr"}
# measure, then a cut-off after "@" (BEIR, embedlab), "_at_" (MTEB) or "_" (pytrec_eval)
_CUT = re.compile(r"(?P<measure>[a-z_]+?)(?:@|_at_|_)(?P<cutoff>[0-9]+)")


def canonical_metric(name: str) -> str:
    """``name`` in embedlab's spelling where it is another tool's spelling of a retrieval measure at a cut-off
    (``NDCG@10``, ``ndcg_cut_10``, ``ndcg_at_10`` → ``ndcg@10``; ``P_10`` → ``precision@10``), else lower-cased."""
    lowered = name.strip().lower()
    match = _CUT.fullmatch(lowered)
    if match and match["measure"] in _MEASURES:
        return f"{_MEASURES[match['measure']]}@{int(match['cutoff'])}"
    return lowered


def resolve_metric(name: str, present: Iterable[str]) -> str:
    """The metric of ``present`` (the names the records at hand hold) that ``name`` means, in embedlab's
    spelling; one clear error listing ``present`` when it means none of them. With nothing present (no
    records at all) the canonical spelling is returned, so an empty result stays an empty result."""
    present = sorted(set(present))
    if name in present:
        return name
    wanted = canonical_metric(name)
    if wanted == "recip_rank":
        cutoffs = [int(metric.partition("@")[2]) for metric in present if re.fullmatch(r"mrr@[0-9]+", metric)]
        wanted = f"mrr@{max(cutoffs)}" if cutoffs else wanted
    by_lower = {metric.lower(): metric for metric in present}
    if not present or wanted in by_lower:
        return by_lower.get(wanted, wanted)
    shown = ", ".join(present[:40]) + (f", … ({len(present)} in all)" if len(present) > 40 else "")
    raise InputError(f"--metric {name[:40]!r}: no such metric in these results; the metrics present: {shown}")


def resolve_metrics(names: Iterable[str] | None, present: Iterable[str]) -> set[str]:
    """:func:`resolve_metric` of each of ``names`` (a repeated ``--metric``); empty for none."""
    present = set(present)
    return {resolve_metric(name, present) for name in names or ()}
