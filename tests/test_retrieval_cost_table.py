"""scripts/retrieval_cost_table.py: docs/evaluation.md's retrieval table printed from a results database: every
cost figure is the one stored with the rows (or ``–`` where none is stored), one row per settings group and stage."""

from __future__ import annotations

import runpy
from pathlib import Path

import embedlab
from embedlab.evaluation.records import Record
from embedlab.results.database import ResultsDB

SCRIPT = Path(embedlab.__file__).resolve().parent.parent / "scripts" / "retrieval_cost_table.py"
COST = {"encode_seconds": 202.04, "cpu_seconds": 106.2, "texts": 26431, "texts_per_second": 130.8, "peak_memory_mb": 412.6,
        "bytes_per_vector": 1536, "parameters": 22713216, "cpu_model": "Test CPU @ 2.0GHz", "threads": 1, "partial": False,
        "note": None}


def test_the_table_holds_the_stored_figures_and_dashes_where_none_is_stored(tmp_path, capsys) -> None:
    db = ResultsDB(tmp_path / "qqp.sqlite")
    first = [Record("minilm", "retrieval", "qqp", "all", metric, value, 7018, ci_low=value - 0.01, ci_high=value + 0.01,
                    cost=COST) for metric, value in (("ndcg@10", 0.8424), ("mrr@10", 0.8083), ("recall@100", 0.9997))]
    reranked = [Record("minilm", "retrieval", "qqp", "rerank:match:minilm@100", "ndcg@10", 0.8390, 7018, cost=COST),
                Record("minilm", "retrieval", "qqp", "rerank:match:minilm@100", "rerank_seconds_per_query", 0.0031, 7018)]
    binary = [Record("static:/somewhere/folder", "retrieval", "qqp", "all", "ndcg@10", 0.6881, 7018, settings={"rescore": 4})]
    db.add(first + reranked, fingerprint="f", identity="i")
    db.add(binary, fingerprint="g", identity="j")
    main = runpy.run_path(str(SCRIPT), run_name="retrieval_cost_table")["main"]
    assert main(["--db", str(tmp_path / "qqp.sqlite"), "--label", "static:/somewhere/folder", "static export"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[2] == ("| `minilm` | defaults | 0.8424 [0.8324, 0.8524] | 0.8083 [0.7983, 0.8183] | 0.9997 [0.9897, 1.0097] | "
                        "202.0 s, 106.2 CPU s | 131 | 1,536 | 413 | Test CPU @ 2.0GHz, 1 |  |")
    assert lines[3].startswith("| `minilm`, reranked by `match:minilm` at depth 100 | defaults | 0.8390 | – | – | 202.0 s")
    assert lines[3].endswith("| rerank 3.1 ms per query |")
    assert lines[4] == "| `static export` | rescore=4 | 0.6881 | – | – | – | – | – | – | – |  |"  # no cost stored
    assert len(lines) == 5 and "somewhere" not in "\n".join(lines)
