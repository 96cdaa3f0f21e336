"""The retrieval table of docs/evaluation.md, printed from a results database instead of written by hand.

One row per method, settings group and stage (the first stage, then each ``rerank:`` subset): nDCG@10 with its
95 % interval, MRR@10 and recall@100, beside the cost the store recorded with the rows (``Record.cost``, measured
on the encode that computed the vectors: wall and CPU seconds, texts per second, bytes per vector, peak memory
above the process, the CPU model and threads). A figure the store does not hold prints as ``–``, never as a
number from elsewhere::

    python scripts/retrieval_cost_table.py --db qqp.sqlite --dataset qqp \
        --label static:static_distil_minilm "static export (distil:minilm,special=exclude)"
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from embedlab.evaluation.records import Record
from embedlab.evaluation.settings_groups import compact_settings, settings_json
from embedlab.results.database import ResultsDB
from embedlab.results.tables import cost_figure, format_cell, render

METRICS = ("ndcg@10", "mrr@10", "recall@100")
HEADER = ("method", "task settings", "nDCG@10 [95 % CI]", "MRR@10 [95 % CI]", "recall@100 [95 % CI]",
          "encode: wall s, CPU s", "texts/s", "bytes/vector", "peak memory MB", "CPU, threads", "note")


def _cost_cells(cost: dict | None) -> list[str]:
    """The cost columns of one row: what the store recorded, ``–`` where it holds nothing."""
    cost = cost or {}
    seconds = "–" if cost.get("encode_seconds") is None else (
        f"{cost_figure(cost['encode_seconds'], 1)} s, {cost_figure(cost.get('cpu_seconds'), 1)} CPU s")
    machine = "–" if cost.get("cpu_model") is None else f"{cost['cpu_model']}, {cost.get('threads')}"
    return [seconds, *(cost_figure(cost.get(name), 0) for name in ("texts_per_second", "bytes_per_vector", "peak_memory_mb")),
            machine]


def _note(cost: dict | None, rerank_seconds: Record | None) -> str:
    notes = [] if rerank_seconds is None else [f"rerank {rerank_seconds.value * 1000:.1f} ms per query"]
    notes += ["partial figures" if (cost or {}).get("partial") else ""] + [(cost or {}).get("note") or ""]
    return "; ".join(note for note in notes if note)


def table_rows(records: Sequence[Record], labels: dict[str, str]) -> list[list[str]]:
    """One row per (method, settings group, subset) holding nDCG@10, in the order the rows were stored."""
    stages: dict[tuple[str, str, str], dict[str, Record]] = {}
    for record in records:
        stages.setdefault((record.method, settings_json(record.settings), record.subset), {})[record.metric] = record
    rows = []
    for (method, _, subset), by_metric in stages.items():
        if "ndcg@10" not in by_metric:
            continue
        headline = by_metric["ndcg@10"]
        name = f"`{labels.get(method, method)}`"
        if subset.startswith("rerank:"):
            reranker, _, depth = subset.removeprefix("rerank:").rpartition("@")
            name += f", reranked by `{reranker}` at depth {depth}"
        cells = [format_cell(by_metric[m]) if m in by_metric else "–" for m in METRICS]
        rows.append([name, compact_settings(headline.settings) or "defaults", *cells, *_cost_cells(headline.cost),
                     _note(headline.cost, by_metric.get("rerank_seconds_per_query"))])
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", required=True, help="the results database the runs were stored in")
    parser.add_argument("--dataset", default="qqp", help="the retrieval dataset (qqp, or a folder's FOLDER@digest name)")
    parser.add_argument("--label", action="append", default=[], nargs=2, metavar=("SPEC", "TEXT"),
                        help="print TEXT instead of SPEC (a spec naming a local folder); repeatable")
    args = parser.parse_args(argv)
    labels = dict(args.label)
    records = ResultsDB(args.db, create=False).records(task="retrieval", dataset=args.dataset)
    if not records:
        print(f"no retrieval/{args.dataset} records in {args.db}", file=sys.stderr)
        return 1
    print(render(HEADER, table_rows(records, labels), "markdown"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
