"""ALIGN-SIM perturbation items, typed: one record type per item kind, the sampling that made them, and a
dataset's set of them written as JSON lines (a field an item kind lacks is left out of its line)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from embedlab.errors import InputError
from embedlab.runtime.cache.atomic import atomic_write_text

PERTURBATIONS = ("ours", "authors")  # word replacement as the paper's text says / as the authors' code does
FORMAT_VERSION = 1


@dataclass(frozen=True)
class SamplingConfig:
    """Sizes of Appendix A.2's samples (each capped at what the dataset has) and the seed."""

    seed: int = 0
    pairs_per_label: int = 2500  # criterion 1: positives and random pairs (MRPC has 2,474 / 1,194: all of them)
    sentences: int = 3500  # criterion 2 originals
    triplets: int = 3500  # criteria 3 and 5: positive pairs whose first sentence is perturbed
    afin_pairs: int | None = None  # criterion 4: None = every AFIN pair
    perturbation: str = "ours"  # criteria 2 and 3: "ours" (tagged verbs/adjectives, inflected) or "authors"

    def __post_init__(self) -> None:
        if self.perturbation not in PERTURBATIONS:
            raise InputError(f"unknown ALIGN-SIM perturbation {self.perturbation!r}; choose from {', '.join(PERTURBATIONS)}")


@dataclass(frozen=True)
class PairItem:
    """Criterion 1: a paraphrase pair (``kind`` ``positive``) or a ``random`` pair of sentences from two
    different pairs."""

    kind: str
    text_a: str
    text_b: str
    source_a: str
    source_b: str

    def texts(self) -> tuple[str, ...]:
        return (self.text_a, self.text_b)

    def compared_pairs(self) -> list[tuple[str, str]]:
        return [(self.text_a, self.text_b)]


@dataclass(frozen=True)
class PerturbedItem:
    """Criteria 2 and 4: a sentence S and its perturbed version (``n`` words replaced by synonyms, with
    the ``changes``; or AFIN's affirmative interpretation of a negated sentence, without either)."""

    original: str
    perturbed: str
    source: str
    n: int | None = None
    changes: list[dict] | None = None

    def texts(self) -> tuple[str, ...]:
        return (self.original, self.perturbed)

    def compared_pairs(self) -> list[tuple[str, str]]:
        return [(self.original, self.perturbed)]


@dataclass(frozen=True)
class TripletItem:
    """Criteria 3 and 5: S, its paraphrase and its perturbed version (one word replaced by an antonym, with
    the ``changes``; or ``n`` pairs of words swapped, with the ``swaps``)."""

    original: str
    paraphrase: str
    perturbed: str
    source: str
    n: int | None = None
    changes: list[dict] | None = None
    swaps: list[dict] | None = None

    def texts(self) -> tuple[str, ...]:
        return (self.original, self.paraphrase, self.perturbed)

    def compared_pairs(self) -> list[tuple[str, str]]:
        return [(self.original, self.perturbed), (self.original, self.paraphrase)]


Item = PairItem | PerturbedItem | TripletItem
ITEM_TYPES: dict[str, type] = {"c1": PairItem, "c2": PerturbedItem, "c3": TripletItem, "c4": PerturbedItem, "c5": TripletItem}


def item_json(item: Item) -> dict:
    """An item as its JSON-lines object: the fields it has (a field an item kind lacks is left out)."""
    return {name: value for name, value in asdict(item).items() if value is not None}


@dataclass
class PerturbationSet:
    """All items for one dataset, by kind: ``c1`` (:class:`PairItem`), ``c2`` and ``c4``
    (:class:`PerturbedItem`), ``c3`` and ``c5`` (:class:`TripletItem`)."""

    dataset: str
    config: SamplingConfig
    items: dict[str, list[Item]] = field(default_factory=dict)
    skipped: dict[str, int] = field(default_factory=dict)

    def texts(self, kinds: list[str] | None = None) -> list[str]:
        """Every distinct text the items of ``kinds`` compare, in first-seen order (what one encode() gets)."""
        seen: dict[str, None] = {}
        for kind in kinds or sorted(self.items):
            for item in self.items.get(kind, []):
                for text in item.texts():
                    seen.setdefault(text, None)
        return list(seen)

    def save(self, folder: Path) -> list[Path]:
        """Write ``<folder>/<dataset>.<kind>.jsonl`` per kind and ``<dataset>.summary.json``; return the paths."""
        folder.mkdir(parents=True, exist_ok=True)
        written = []
        for kind, items in sorted(self.items.items()):
            path = folder / f"{self.dataset}.{kind}.jsonl"
            atomic_write_text(path, "".join(json.dumps(item_json(item), ensure_ascii=False, sort_keys=True) + "\n" for item in items))
            written.append(path)
        summary = {
            "format": FORMAT_VERSION,
            "dataset": self.dataset,
            "config": asdict(self.config),
            "counts": {kind: len(items) for kind, items in sorted(self.items.items())},
            "skipped": dict(sorted(self.skipped.items())),
        }
        path = folder / f"{self.dataset}.summary.json"
        atomic_write_text(path, json.dumps(summary, indent=2, sort_keys=True) + "\n")
        return written + [path]

    @classmethod
    def load(cls, folder: Path, dataset: str) -> "PerturbationSet":
        summary_path = folder / f"{dataset}.summary.json"
        if not summary_path.exists():
            raise FileNotFoundError(f"no perturbation summary {summary_path}")
        summary = json.loads(summary_path.read_text(encoding="utf-8"))
        if summary.get("format") != FORMAT_VERSION:
            raise InputError(f"{summary_path}: format {summary.get('format')!r}, expected {FORMAT_VERSION}")
        items = {}
        for kind in summary["counts"]:
            if kind not in ITEM_TYPES:
                raise InputError(f"{summary_path}: unknown item kind {kind!r}; expected one of {', '.join(ITEM_TYPES)}")
            path = folder / f"{dataset}.{kind}.jsonl"
            with open(path, encoding="utf-8") as stream:
                rows = []
                for line_number, line in enumerate(stream, start=1):
                    try:
                        rows.append(ITEM_TYPES[kind](**json.loads(line)))
                    except json.JSONDecodeError as error:
                        raise InputError(f"{path}:{line_number}: not valid JSON ({error})") from error
                    except TypeError as error:  # fields of another kind, or missing ones
                        raise InputError(f"{path}:{line_number}: not a {kind} item ({error})") from None
            if len(rows) != summary["counts"][kind]:
                raise InputError(f"{path}: {len(rows)} items, summary says {summary['counts'][kind]}")
            items[kind] = rows
        return cls(dataset, SamplingConfig(**summary["config"]), items, summary["skipped"])
