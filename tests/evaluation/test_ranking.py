"""Ranking metrics equal trec_eval's (pytrec_eval), ties included, and the TREC run format it reads."""

from __future__ import annotations

import numpy as np
import pytest
import pytrec_eval

from embedlab.errors import InputError
from embedlab.evaluation.ranking import metric_names, parse_cutoffs, per_query_metrics, trec_order, trec_run_lines

CUTOFFS = (1, 3, 5, 10, 100)
TREC_NAMES = {"ndcg": "ndcg_cut", "map": "map_cut", "recall": "recall", "precision": "P"}


def random_runs(seed: int = 0, queries: int = 40):
    """Runs with many equal scores (one decimal) and graded judgements, some of them 0."""
    rng = np.random.default_rng(seed)
    runs, qrels = {}, {}
    for number in range(queries):
        docs = list(dict.fromkeys(f"d{rng.integers(0, 300)}" for _ in range(rng.integers(1, 150))))
        runs[f"q{number}"] = {doc: float(np.float32(round(rng.random(), 1))) for doc in docs}
        qrels[f"q{number}"] = {f"d{rng.integers(0, 300)}": int(rng.integers(0, 4)) for _ in range(rng.integers(1, 8))}
    return runs, qrels


def test_every_metric_equals_pytrec_eval_with_ties():
    runs, qrels = random_runs()
    ranked = {query: [list(docs)[i] for i in trec_order(list(docs), list(docs.values()))] for query, docs in runs.items()}
    ours = per_query_metrics(ranked, qrels, CUTOFFS)
    measures = {f"{name}.{','.join(map(str, CUTOFFS))}" for name in TREC_NAMES.values()}
    reference = pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(runs)
    for row, query in enumerate(ranked):
        for name in metric_names(CUTOFFS):
            measure, k = name.split("@")
            if measure == "mrr":  # trec_eval's recip_rank ignores cut-offs: give it the run cut to the top k
                cut = {doc: runs[query][doc] for doc in ranked[query][:int(k)]}
                expected = pytrec_eval.RelevanceEvaluator({query: qrels[query]}, {"recip_rank"}).evaluate({query: cut})[query]["recip_rank"]
            else:
                expected = reference[query][f"{TREC_NAMES[measure]}_{k}"]
            assert ours[name][row] == pytest.approx(expected, abs=1e-12), (query, name)


def test_trec_order_breaks_ties_by_descending_id():
    assert trec_order(["a", "c", "b", "d"], [0.5, 0.5, 0.9, 0.5]) == [2, 3, 1, 0]


def test_hand_computed_graded_query():
    """Run b, a, d (b and a tied, b first by id); judgements a = 2, c = 1 (c never retrieved)."""
    values = per_query_metrics({"q": ["b", "a", "d"]}, {"q": {"a": 2, "c": 1}}, (1, 3))
    ideal = 2 + 1 / np.log2(3)
    assert values["ndcg@3"][0] == pytest.approx((2 / np.log2(3)) / ideal)
    assert values["map@3"][0] == pytest.approx((1 / 2) / 2)
    assert (values["mrr@1"][0], values["mrr@3"][0]) == (0.0, 0.5)
    assert (values["recall@3"][0], values["precision@3"][0]) == (0.5, pytest.approx(1 / 3))
    assert values["ndcg@1"][0] == 0.0


def test_run_lines_keep_exact_scores():
    lines = list(trec_run_lines(["q1"], [["d2", "d1"]], np.array([[np.float32(0.1), np.float32(1 / 3)]]), "my run"))
    assert lines == [f"q1 Q0 d2 1 {float(np.float32(0.1))!r} myrun\n", f"q1 Q0 d1 2 {float(np.float32(1 / 3))!r} myrun\n"]


@pytest.mark.parametrize("text", ["", "0,3", "a", "3,-1"])
def test_bad_cutoffs(text):
    with pytest.raises(InputError, match="--k"):
        parse_cutoffs(text)
    assert parse_cutoffs("10, 1,10") == (1, 10)
