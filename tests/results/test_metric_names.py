"""Other tools' metric names resolve to embedlab's: pytrec_eval's (the keys its evaluator returns), MTEB's and
BEIR's spellings; an unknown name is one error listing the metrics present, in every command that takes --metric."""

from __future__ import annotations

import json

import pytest
import pytrec_eval

from embedlab.cli.app import main
from embedlab.errors import InputError
from embedlab.evaluation.ranking import metric_names
from embedlab.evaluation.records import Record
from embedlab.results.database import ResultsDB
from embedlab.results.metric_names import resolve_metric

PRESENT = set(metric_names((1, 10, 100))) | {"queries", "documents"}


def test_pytrec_eval_mteb_and_beir_names_mean_embedlab_s():
    # pytrec_eval's own spelling of each measure: the keys its evaluator returns for one judged query
    evaluator = pytrec_eval.RelevanceEvaluator({"q": {"d": 1}}, {"ndcg_cut.10", "map_cut.100", "recall.100", "P.10", "recip_rank"})
    trec_names = sorted(evaluator.evaluate({"q": {"d": 1.0}})["q"])
    assert trec_names == ["P_10", "map_cut_100", "ndcg_cut_10", "recall_100", "recip_rank"]
    expected = {"ndcg_cut_10": "ndcg@10", "map_cut_100": "map@100", "recall_100": "recall@100", "P_10": "precision@10",
                "recip_rank": "mrr@100",  # no cut-off in trec_eval: the whole run, embedlab's deepest k
                "ndcg_at_10": "ndcg@10", "map_at_100": "map@100", "recall_at_100": "recall@100", "mrr_at_10": "mrr@10",
                "precision_at_10": "precision@10", "NDCG@10": "ndcg@10", "MAP@100": "map@100", "Recall@100": "recall@100",
                "P@10": "precision@10", "MRR@10": "mrr@10", "ndcg@10": "ndcg@10", "Queries": "queries"}
    assert set(trec_names) <= set(expected)
    assert {name: resolve_metric(name, PRESENT) for name in expected} == expected
    with pytest.raises(InputError, match=r"--metric 'ndcg_cut_5': no such metric in these results; the metrics present: documents, "
                                         r"map@1, map@10, map@100, mrr@1"):
        resolve_metric("ndcg_cut_5", PRESENT)  # a cut-off that was not computed is not silently another
    assert resolve_metric("NDCG@10", set()) == "ndcg@10"  # no records at all: nothing to list, no error


def test_results_report_and_eval_take_the_aliases(tmp_path, capsys):
    db_path = tmp_path / "results.sqlite"
    records = [Record("m", "retrieval", "set@1", "all", metric, value, 5) for metric, value in
               (("ndcg@10", 0.25), ("recall@100", 0.5), ("mrr@10", 0.125), ("queries", 5.0))]
    ResultsDB(db_path).add(records, fingerprint="f")
    assert main(["results", "--db", str(db_path), "--metric", "NDCG@10", "--metric", "recall_at_100", "--format", "json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert sorted((row["metric"], row["value"]) for row in rows) == [("ndcg@10", 0.25), ("recall@100", 0.5)]
    assert main(["results", "--db", str(db_path), "--metric", "ndcg_cut_5"]) == 2
    assert "the metrics present: mrr@10, ndcg@10, queries, recall@100" in capsys.readouterr().err
    assert main(["report", "--db", str(db_path), "--metric", "bogus", "--out", str(tmp_path / "r.html")]) == 2
    assert "--metric 'bogus': no such metric" in capsys.readouterr().err and not (tmp_path / "r.html").exists()
