"""SummEval: articles, system summaries, reference summaries and the experts' averaged scores."""

from __future__ import annotations

from dataclasses import dataclass

from embedlab.data import DataFormatError
from embedlab.data.reading import check_rows, json_lines
from embedlab.runtime.settings import data_path


SUMMEVAL_ASPECTS = ("coherence", "consistency", "fluency", "relevance")


@dataclass(frozen=True)
class SummEvalItem:
    """One (article, system summary) item with the article's reference summaries and the experts' scores."""

    doc_id: str
    model_id: str
    article: str
    summary: str
    references: list[str]
    scores: dict[str, float]


def summeval() -> list[SummEvalItem]:
    """SummEval expert annotations: 1,600 (article, system summary) items with averaged scores."""
    path = data_path("summeval", "summeval.jsonl")
    items = []
    for number, row in json_lines(path):
        try:
            items.append(SummEvalItem(
                doc_id=str(row["doc_id"]), model_id=str(row["model_id"]), article=str(row["src"]),
                summary=str(row["sys_summ"]), references=[str(r) for r in row["ref_summs"]],
                scores={aspect: float(row[aspect]) for aspect in SUMMEVAL_ASPECTS},
            ))
        except (KeyError, TypeError, ValueError) as error:
            raise DataFormatError(f"{path}, line {number}: bad SummEval row ({error!r})") from None
    check_rows("summeval", len(items), path)
    return items


def first_per_article(items: list[SummEvalItem]) -> dict[str, SummEvalItem]:
    """Each article's first item, in order of appearance (articles and references repeat per summary)."""
    first: dict[str, SummEvalItem] = {}
    for item in items:
        first.setdefault(item.doc_id, item)
    return first
