"""Loaders for the shared evaluation data and for the user's own files (issue 3, "Datasets").

Every dataset of ``<data root>/README.md`` has a loader here; each checks its row count against the
README so that a truncated or altered copy fails loudly instead of giving a silently different number.
The evaluation protocols follow the papers:

* STS12–16 per subset with unscored pairs skipped (SentEval layout), STS-B, SICK — paper 2 §3.5.2.
* MR/CR/SUBJ/MPQA/SST/TREC/MRPC/SICK-E read as SentEval reads them (whitespace-normalised) — paper 2 §3.5.3.
* The six short-text clustering sets — paper 2 §3.5.1.
* Grouped texts for triplets (mrpc, sts, summ-g, summ-r, text-summ-g, text-summ-r) and the similar /
  non-similar pair sets — neural-embeddings paper (seed 0) §3.2–3.3.
* WikiText-2 sentences of at least 10 characters for IsoScore — paper 2 §3.5.4: ``wikitext2_sentences``,
  re-exported from :mod:`embedlab.data.wikitext`, the one WikiText-2 reader (which checks its token counts).

User files (scored pairs, labelled texts, grouped texts) may be TSV, CSV or JSON lines; a bad line gives
an error naming the file and the line number.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from embedlab.data import DataFormatError, json_object, unicode_problem
from embedlab.data.wikitext import wikitext2_sentences  # re-exported: the IsoScore set (paper 2 §3.5.4)
from embedlab.errors import InputError
from embedlab.runtime import data_path, data_root

# Row counts published in the data README (scored pairs for STS12-16, rows otherwise).
EXPECTED_ROWS: dict[str, int] = {
    "sts12": 3108, "sts13": 1500, "sts14": 3750, "sts15": 3000, "sts16": 1186,
    "stsb-train": 5749, "stsb-dev": 1500, "stsb-test": 1379,
    "sick-train": 4500, "sick-trial": 500, "sick-test": 4927,
    "mr": 10662, "cr": 3775, "subj": 10000, "mpqa": 10606,
    "sst2-train": 67349, "sst2-dev": 872, "sst2-test": 1821,
    "sst5-train": 8544, "sst5-dev": 1101, "sst5-test": 2210,
    "trec-train": 5452, "trec-test": 500,
    "mrpc-train": 4076, "mrpc-test": 1725, "mrpc-glue-train": 3668,
    "paws-dev": 8000, "paws-test": 8000, "qqp": 10000, "afin": 3001, "summeval": 1600,
    "agnews": 8000, "biomedical": 20000, "googlenews_ts": 11109,  # the README gives no count for the _s and _t variants
    "searchsnippets": 12340, "stackoverflow": 20000, "tweet": 2472,
}
# Number of classes of the clustering sets (README); k-means uses k = number of classes.
CLUSTERING_CLASSES = {"agnews": 4, "biomedical": 20, "googlenews_ts": 152, "googlenews_s": 152, "googlenews_t": 152,
                      "searchsnippets": 8, "stackoverflow": 20, "tweet": 89}
CLUSTERING_SETS = ("agnews", "biomedical", "googlenews_ts", "searchsnippets", "stackoverflow", "tweet")
STS_YEARS = ("sts12", "sts13", "sts14", "sts15", "sts16")
SUMMEVAL_ASPECTS = ("coherence", "consistency", "fluency", "relevance")


# ----------------------------------------------------------------------------------------------------
# Containers
# ----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ScoredPairs:
    """Text pairs with a real-valued human score (STS gold, SICK relatedness, a user file)."""

    name: str
    subset: str
    first: list[str]
    second: list[str]
    scores: np.ndarray  # float64, one per pair

    def __len__(self) -> int:
        return len(self.first)

    def pairs(self) -> list[tuple[str, str]]:
        return list(zip(self.first, self.second))


@dataclass(frozen=True)
class LabelledPairs:
    """Text pairs with an integer class label (1 = paraphrase / similar for the binary sets)."""

    name: str
    subset: str
    first: list[str]
    second: list[str]
    labels: np.ndarray  # int64
    label_names: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.first)

    def pairs(self) -> list[tuple[str, str]]:
        return list(zip(self.first, self.second))


@dataclass(frozen=True)
class LabelledTexts:
    """Single texts with an integer class label (classification and clustering sets)."""

    name: str
    subset: str
    texts: list[str]
    labels: np.ndarray  # int64 in 0..len(label_names)-1
    label_names: list[str]

    def __len__(self) -> int:
        return len(self.texts)


@dataclass(frozen=True)
class GroupedTexts:
    """Texts grouped by meaning, for triplets (seed 0 §3.2).

    A triplet is (A, B, C) with A an anchor, B a candidate of A's group other than A, and C a candidate of
    another group. By default every text is both anchor and candidate; ``text-summ-*`` restrict anchors to
    the articles and candidates to the summaries.
    """

    name: str
    texts: list[str]
    groups: np.ndarray  # int64 group index per text
    is_anchor: np.ndarray  # bool per text
    is_candidate: np.ndarray  # bool per text

    def __len__(self) -> int:
        return len(self.texts)

    def triplet_count(self) -> int:
        """The number of triplets (A, B, C) the grouping defines."""
        candidates_per_group = np.bincount(self.groups[self.is_candidate], minlength=int(self.groups.max()) + 1)
        total_candidates = int(self.is_candidate.sum())
        anchors = np.flatnonzero(self.is_anchor)
        same = candidates_per_group[self.groups[anchors]] - self.is_candidate[anchors].astype(np.int64)
        other = total_candidates - candidates_per_group[self.groups[anchors]]
        return int(np.sum(same * other))


def grouped(name: str, texts: list[str], groups: list, anchors: list[bool] | None = None,
            candidates: list[bool] | None = None) -> GroupedTexts:
    """A :class:`GroupedTexts` from texts and any hashable group ids (ids numbered in order of appearance)."""
    index: dict = {}
    numbers = np.array([index.setdefault(group, len(index)) for group in groups], dtype=np.int64)
    everyone = np.ones(len(texts), dtype=bool)
    return GroupedTexts(
        name=name, texts=list(texts), groups=numbers,
        is_anchor=np.asarray(anchors, dtype=bool) if anchors is not None else everyone,
        is_candidate=np.asarray(candidates, dtype=bool) if candidates is not None else everyone.copy(),
    )


@dataclass(frozen=True)
class SummEvalItem:
    doc_id: str
    model_id: str
    article: str
    summary: str
    references: list[str]
    scores: dict[str, float]


# ----------------------------------------------------------------------------------------------------
# Reading helpers
# ----------------------------------------------------------------------------------------------------


def _read_text(path: Path) -> str:
    """File content as text: UTF-8 (BOM dropped), falling back to Latin-1 as SentEval reads its files."""
    raw = path.read_bytes()
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        return raw.decode("latin-1")


def _lines(path: Path) -> list[str]:
    """Lines without their line ending; a missing final newline does not add an empty line."""
    text = _read_text(path)
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def _senteval_text(text: str) -> str:
    """SentEval tokenises on whitespace and re-joins with single spaces."""
    return " ".join(text.split())


def _check_rows(key: str, count: int, path: Path) -> None:
    expected = EXPECTED_ROWS.get(key)
    if expected is not None and count != expected:
        raise DataFormatError(f"{path}: {count} rows for {key!r}, but the data README says {expected}")


def _float(value: str, path: Path, line_number: int, what: str) -> float:
    try:
        number = float(value)
    except ValueError:
        raise DataFormatError(f"{path}, line {line_number}: {what} {value!r} is not a number") from None
    if not np.isfinite(number):
        raise DataFormatError(f"{path}, line {line_number}: {what} {value!r} is not finite")
    return number


def _fields(line: str, path: Path, line_number: int, minimum: int, separator: str = "\t") -> list[str]:
    parts = line.split(separator)
    if len(parts) < minimum:
        raise DataFormatError(
            f"{path}, line {line_number}: expected at least {minimum} tab-separated fields, found {len(parts)}"
        )
    return parts


# ----------------------------------------------------------------------------------------------------
# STS, STS-B, SICK
# ----------------------------------------------------------------------------------------------------


def sts_year(year: str) -> list[ScoredPairs]:
    """One STS year (``sts12`` … ``sts16``): a :class:`ScoredPairs` per subset, unscored pairs skipped."""
    year = year.lower()
    if year not in STS_YEARS:
        raise InputError(f"unknown STS year {year!r}; expected one of {', '.join(STS_YEARS)}")
    folder = data_path("sts", year.upper())
    subsets = []
    for gold_path in sorted(folder.glob("STS.gs.*.txt")):
        subset = gold_path.name[len("STS.gs."):-len(".txt")]
        input_path = data_path("sts", year.upper(), f"STS.input.{subset}.txt")
        gold_lines, input_lines = _lines(gold_path), _lines(input_path)
        if len(gold_lines) != len(input_lines):
            raise DataFormatError(f"{gold_path}: {len(gold_lines)} gold lines but {input_path} has {len(input_lines)}")
        first, second, scores = [], [], []
        for number, (gold, line) in enumerate(zip(gold_lines, input_lines), start=1):
            if not gold.strip():
                continue  # unscored pair: SentEval skips it
            parts = _fields(line, input_path, number, 2)
            first.append(parts[0])
            second.append(parts[1])
            scores.append(_float(gold.strip(), gold_path, number, "gold score"))
        subsets.append(ScoredPairs(year, subset, first, second, np.array(scores, dtype=np.float64)))
    if not subsets:
        raise DataFormatError(f"{folder}: no STS.gs.*.txt files (data root searched: {data_root()})")
    _check_rows(year, sum(len(s) for s in subsets), folder)
    return subsets


def stsb(split: str) -> ScoredPairs:
    """STS Benchmark ``train``/``dev``/``test`` (score, s1, s2 in columns 5–7)."""
    path = data_path("sts", "STSBenchmark", f"sts-{split}.csv")
    first, second, scores = [], [], []
    for number, line in enumerate(_lines(path), start=1):
        parts = _fields(line, path, number, 7)
        scores.append(_float(parts[4], path, number, "score"))
        first.append(parts[5])
        second.append(parts[6])
    _check_rows(f"stsb-{split}", len(first), path)
    return ScoredPairs("stsb", split, first, second, np.array(scores, dtype=np.float64))


SICK_FILES = {"train": "SICK_train.txt", "trial": "SICK_trial.txt", "test": "SICK_test_annotated.txt"}
SICK_LABELS = ["CONTRADICTION", "NEUTRAL", "ENTAILMENT"]


def _sick_rows(split: str) -> tuple[Path, list[list[str]]]:
    if split not in SICK_FILES:
        raise InputError(f"unknown SICK split {split!r}; expected one of {', '.join(SICK_FILES)}")
    path = data_path("sts", "SICK", SICK_FILES[split])
    lines = _lines(path)
    rows = [_fields(line, path, number, 5) for number, line in enumerate(lines[1:], start=2)]
    _check_rows(f"sick-{split}", len(rows), path)
    return path, rows


def sick_relatedness(split: str) -> ScoredPairs:
    path, rows = _sick_rows(split)
    scores = [_float(row[3], path, number, "relatedness score") for number, row in enumerate(rows, start=2)]
    return ScoredPairs("sick-r", split, [r[1] for r in rows], [r[2] for r in rows], np.array(scores))


def sick_entailment(split: str) -> LabelledPairs:
    path, rows = _sick_rows(split)
    labels = []
    for number, row in enumerate(rows, start=2):
        if row[4] not in SICK_LABELS:
            raise DataFormatError(f"{path}, line {number}: entailment label {row[4]!r} is not one of {SICK_LABELS}")
        labels.append(SICK_LABELS.index(row[4]))
    return LabelledPairs("sick-e", split, [r[1] for r in rows], [r[2] for r in rows],
                         np.array(labels, dtype=np.int64), SICK_LABELS)


# ----------------------------------------------------------------------------------------------------
# Paraphrase sets
# ----------------------------------------------------------------------------------------------------


def mrpc(split: str) -> LabelledPairs:
    """MRPC as SentEval reads it: ``train`` (4,076) or ``test`` (1,725) of msr_paraphrase_*.txt."""
    if split not in ("train", "test"):
        raise InputError(f"unknown MRPC split {split!r}; expected train or test (or use mrpc_glue_train())")
    path = data_path("paraphrase", "mrpc", f"msr_paraphrase_{split}.txt")
    first, second, labels = [], [], []
    for number, line in enumerate(_lines(path)[1:], start=2):
        parts = _fields(line, path, number, 5)
        if parts[0] not in ("0", "1"):
            raise DataFormatError(f"{path}, line {number}: quality {parts[0]!r} is not 0 or 1")
        labels.append(int(parts[0]))
        first.append(_senteval_text(parts[3]))
        second.append(_senteval_text(parts[4]))
    _check_rows(f"mrpc-{split}", len(first), path)
    return LabelledPairs("mrpc", split, first, second, np.array(labels, dtype=np.int64), ["different", "paraphrase"])


def mrpc_glue_train() -> LabelledPairs:
    """The GLUE train split of MRPC (3,668 pairs, 2,474 positive) — seed 0 §3.2–3.3."""
    path = data_path("paraphrase", "mrpc", "mrpc_glue_train.csv")
    with io.StringIO(_read_text(path)) as stream:
        reader = csv.DictReader(stream)
        first, second, labels = [], [], []
        for row in reader:
            try:
                labels.append(int(row["label"]))
                first.append(row["sentence1"])
                second.append(row["sentence2"])
            except (KeyError, TypeError, ValueError) as error:
                raise DataFormatError(f"{path}, line {reader.line_num}: bad row ({error})") from None
    _check_rows("mrpc-glue-train", len(first), path)
    return LabelledPairs("mrpc", "glue-train", first, second, np.array(labels, dtype=np.int64), ["different", "paraphrase"])


def _tsv_with_header(path: Path, columns: tuple[str, ...], quoted: bool = False) -> Iterator[tuple[int, dict[str, str]]]:
    """Rows of a tab-separated file with a header; ``quoted``: fields may be CSV-quoted and span lines (QQP)."""
    if quoted:
        reader = csv.reader(io.StringIO(_read_text(path)), delimiter="\t")
        rows = ((reader.line_num, fields) for fields in reader)
    else:
        rows = ((number, line.split("\t")) for number, line in enumerate(_lines(path), start=1))
    _, header = next(rows)
    missing = [c for c in columns if c not in header]
    if missing:
        raise DataFormatError(f"{path}, line 1: header lacks column(s) {missing}")
    for number, parts in rows:
        if len(parts) != len(header):
            raise DataFormatError(f"{path}, line {number}: {len(parts)} fields, header has {len(header)}")
        yield number, dict(zip(header, parts))


def _binary_label(value: str, path: Path, number: int) -> int:
    if value not in ("0", "1"):
        raise DataFormatError(f"{path}, line {number}: label {value!r} is not 0 or 1")
    return int(value)


def paws_wiki(split: str) -> LabelledPairs:
    path = data_path("paraphrase", "paws_wiki", f"{split}.tsv")
    rows = [(n, r) for n, r in _tsv_with_header(path, ("sentence1", "sentence2", "label"))]
    _check_rows(f"paws-{split}", len(rows), path)
    return LabelledPairs("paws-wiki", split, [r["sentence1"] for _, r in rows], [r["sentence2"] for _, r in rows],
                         np.array([_binary_label(r["label"], path, n) for n, r in rows]), ["different", "paraphrase"])


def qqp() -> LabelledPairs:
    path = data_path("paraphrase", "qqp", "quora_duplicate_questions_first10000.tsv")
    rows = [(n, r) for n, r in _tsv_with_header(path, ("question1", "question2", "is_duplicate"), quoted=True)]
    _check_rows("qqp", len(rows), path)
    return LabelledPairs("qqp", "first10000", [r["question1"] for _, r in rows], [r["question2"] for _, r in rows],
                         np.array([_binary_label(r["is_duplicate"], path, n) for n, r in rows]),
                         ["different", "duplicate"])


def _json_lines(path: Path) -> Iterator[tuple[int, dict]]:
    for number, line in enumerate(_lines(path), start=1):
        if not line.strip():
            continue
        yield number, json_object(line, f"{path}, line {number}")


def afin() -> LabelledPairs:
    """AFIN: each sentence with negation paired with its affirmative interpretation (all label 1)."""
    path = data_path("paraphrase", "afin", "afin.jsonl")
    first, second = [], []
    for number, row in _json_lines(path):
        try:
            first.append(str(row["sentence"]))
            second.append(str(row["affirmative interpretation"]))
        except KeyError as error:
            raise DataFormatError(f"{path}, line {number}: missing field {error}") from None
    _check_rows("afin", len(first), path)
    return LabelledPairs("afin", "all", first, second, np.ones(len(first), dtype=np.int64), ["", "affirmative"])


# ----------------------------------------------------------------------------------------------------
# SummEval
# ----------------------------------------------------------------------------------------------------


def summeval() -> list[SummEvalItem]:
    """SummEval expert annotations: 1,600 (article, system summary) items with averaged scores."""
    path = data_path("summeval", "summeval.jsonl")
    items = []
    for number, row in _json_lines(path):
        try:
            items.append(SummEvalItem(
                doc_id=str(row["doc_id"]), model_id=str(row["model_id"]), article=str(row["src"]),
                summary=str(row["sys_summ"]), references=[str(r) for r in row["ref_summs"]],
                scores={aspect: float(row[aspect]) for aspect in SUMMEVAL_ASPECTS},
            ))
        except (KeyError, TypeError, ValueError) as error:
            raise DataFormatError(f"{path}, line {number}: bad SummEval row ({error!r})") from None
    _check_rows("summeval", len(items), path)
    return items


def _articles(items: list[SummEvalItem]) -> dict[str, SummEvalItem]:
    first: dict[str, SummEvalItem] = {}
    for item in items:
        first.setdefault(item.doc_id, item)
    return first


# ----------------------------------------------------------------------------------------------------
# Triplet groupings (seed 0 §3.2) and similar / non-similar pair sets (§3.3)
# ----------------------------------------------------------------------------------------------------


def triplets_mrpc() -> GroupedTexts:
    """GLUE-train MRPC positive pairs, one group of two sentences per pair (2,474 groups)."""
    data = mrpc_glue_train()
    texts, groups = [], []
    for index in np.flatnonzero(data.labels == 1):
        texts += [data.first[index], data.second[index]]
        groups += [int(index), int(index)]
    return grouped("mrpc", texts, groups)


def triplets_sts() -> GroupedTexts:
    """STS-B test pairs with score ≥ 4, one group of two sentences per pair (338 groups)."""
    data = stsb("test")
    texts, groups = [], []
    for index in np.flatnonzero(data.scores >= 4.0):
        texts += [data.first[index], data.second[index]]
        groups += [int(index), int(index)]
    return grouped("sts", texts, groups)


def triplets_summ_g() -> GroupedTexts:
    """SummEval system summaries grouped by article (100 groups of 16 here; 17 in the paper)."""
    items = summeval()
    return grouped("summ-g", [i.summary for i in items], [i.doc_id for i in items])


def triplets_summ_r() -> GroupedTexts:
    """SummEval reference summaries grouped by article (100 groups of 11)."""
    texts, groups = [], []
    for doc_id, item in _articles(summeval()).items():
        texts += item.references
        groups += [doc_id] * len(item.references)
    return grouped("summ-r", texts, groups)


def _text_summ(name: str, references: bool) -> GroupedTexts:
    items = summeval()
    articles = _articles(items)
    texts = [item.article for item in articles.values()]
    groups: list = list(articles)
    if references:
        for doc_id, item in articles.items():
            texts += item.references
            groups += [doc_id] * len(item.references)
    else:
        texts += [item.summary for item in items]
        groups += [item.doc_id for item in items]
    is_article = [index < len(articles) for index in range(len(texts))]
    return grouped(name, texts, groups, anchors=is_article, candidates=[not a for a in is_article])


def triplets_text_summ_g() -> GroupedTexts:
    """Articles as anchors only, their system summaries as positives, other articles' summaries as negatives."""
    return _text_summ("text-summ-g", references=False)


def triplets_text_summ_r() -> GroupedTexts:
    """As text-summ-g with the human reference summaries."""
    return _text_summ("text-summ-r", references=True)


TRIPLET_SETS = {
    "mrpc": triplets_mrpc, "sts": triplets_sts, "summ-g": triplets_summ_g, "summ-r": triplets_summ_r,
    "text-summ-g": triplets_text_summ_g, "text-summ-r": triplets_text_summ_r,
}


@dataclass(frozen=True)
class SimilarPairs:
    """Pairs labelled similar and pairs labelled non-similar (seed 0 §3.3)."""

    name: str
    similar: list[tuple[str, str]]
    different: list[tuple[str, str]]


def pairs_mrpc() -> SimilarPairs:
    """MRPC GLUE train: 2,474 paraphrase pairs vs 1,194 non-paraphrase pairs."""
    data = mrpc_glue_train()
    pairs = data.pairs()
    return SimilarPairs("mrpc", [p for p, l in zip(pairs, data.labels) if l == 1],
                        [p for p, l in zip(pairs, data.labels) if l == 0])


def pairs_sts() -> SimilarPairs:
    """STS-B test: score ≥ 4 (338 pairs) vs score ≤ 2 (534 pairs)."""
    data = stsb("test")
    pairs = data.pairs()
    return SimilarPairs("sts", [p for p, s in zip(pairs, data.scores) if s >= 4.0],
                        [p for p, s in zip(pairs, data.scores) if s <= 2.0])


def _labelled_similar_pairs(data: LabelledPairs) -> SimilarPairs:
    pairs = data.pairs()
    return SimilarPairs(data.name, [p for p, l in zip(pairs, data.labels) if l == 1],
                        [p for p, l in zip(pairs, data.labels) if l == 0])


PAIR_SETS = {
    "mrpc": pairs_mrpc, "sts": pairs_sts,
    "paws": lambda: _labelled_similar_pairs(paws_wiki("test")),
    "qqp": lambda: _labelled_similar_pairs(qqp()),
}


# ----------------------------------------------------------------------------------------------------
# SentEval classification sets
# ----------------------------------------------------------------------------------------------------

BINARY_FILES = {
    "mr": ("MR", "rt-polarity.neg", "rt-polarity.pos"),
    "cr": ("CR", "custrev.neg", "custrev.pos"),
    "subj": ("SUBJ", "subj.objective", "subj.subjective"),
    "mpqa": ("MPQA", "mpqa.neg", "mpqa.pos"),
}


def senteval_binary(name: str) -> LabelledTexts:
    """MR, CR, SUBJ or MPQA: one sentence per line, one file per class (class 0 first, as SentEval)."""
    name = name.lower()
    if name not in BINARY_FILES:
        raise InputError(f"unknown SentEval binary set {name!r}; expected one of {', '.join(BINARY_FILES)}")
    folder, negative, positive = BINARY_FILES[name]
    texts, labels = [], []
    for label, file in enumerate((negative, positive)):
        lines = _lines(data_path("senteval", folder, file))
        texts += [_senteval_text(line) for line in lines]  # empty lines stay (SentEval keeps them)
        labels += [label] * len(lines)
    _check_rows(name, len(texts), data_path("senteval", folder))
    return LabelledTexts(name, "all", texts, np.array(labels, dtype=np.int64), [negative, positive])


def sst(fine_grained: bool, split: str) -> LabelledTexts:
    """SST-2 (``fine_grained=False``, ``text<TAB>label`` lines) or SST-5 (``label text`` lines) ``train``/``dev``/``test``."""
    folder = "Fine-Grained" if fine_grained else "Binary"
    key = f"sst{5 if fine_grained else 2}-{split}"
    path = data_path("senteval", "SST", folder, f"sentiment-{split}")
    classes = 5 if fine_grained else 2
    texts, labels = [], []
    for number, line in enumerate(_lines(path), start=1):
        if fine_grained:  # SST-5 lines are "label text"
            label, separator, text = line.strip().partition(" ")
        else:  # SST-2 lines are "text<TAB>label"
            text, separator, label = line.strip().rpartition("\t")
        if not separator or label.strip() not in {str(c) for c in range(classes)}:
            layout = "label<SPACE>text" if fine_grained else "text<TAB>label"
            raise DataFormatError(f"{path}, line {number}: expected {layout} with label in 0..{classes - 1}")
        texts.append(_senteval_text(text))
        labels.append(int(label))
    _check_rows(key, len(texts), path)
    return LabelledTexts(f"sst{5 if fine_grained else 2}", split, texts, np.array(labels, dtype=np.int64),
                         [str(c) for c in range(classes)])


TREC_CLASSES = ["ABBR", "DESC", "ENTY", "HUM", "LOC", "NUM"]


def trec(split: str) -> LabelledTexts:
    """TREC ``train`` (5,452) / ``test`` (500): ``COARSE:fine question``, coarse label only (SentEval)."""
    files = {"train": "train_5500.label", "test": "TREC_10.label"}
    if split not in files:
        raise InputError(f"unknown TREC split {split!r}; expected train or test")
    path = data_path("senteval", "TREC", files[split])
    texts, labels = [], []
    for number, line in enumerate(_lines(path), start=1):
        coarse, colon, rest = line.partition(":")
        words = rest.split()
        if not colon or coarse not in TREC_CLASSES or not words:
            raise DataFormatError(f"{path}, line {number}: expected 'COARSE:fine question' with COARSE in {TREC_CLASSES}")
        texts.append(" ".join(words[1:]))  # drop the fine label
        labels.append(TREC_CLASSES.index(coarse))
    _check_rows(f"trec-{split}", len(texts), path)
    return LabelledTexts("trec", split, texts, np.array(labels, dtype=np.int64), TREC_CLASSES)


# ----------------------------------------------------------------------------------------------------
# Clustering sets
# ----------------------------------------------------------------------------------------------------


def clustering_set(name: str) -> LabelledTexts:
    """A short-text clustering set: ``label<TAB>text`` lines (labels renumbered 0..C-1 in sorted order)."""
    if name not in CLUSTERING_CLASSES:
        raise InputError(f"unknown clustering set {name!r}; expected one of {', '.join(CLUSTERING_CLASSES)}")
    path = data_path("clustering", f"{name}.tsv")
    raw_labels, texts = [], []
    for number, line in enumerate(_lines(path), start=1):
        label, tab, text = line.partition("\t")
        if not tab or not label.strip():
            raise DataFormatError(f"{path}, line {number}: expected label<TAB>text")
        raw_labels.append(label.strip())
        texts.append(text)
    _check_rows(name, len(texts), path)
    names = sorted(set(raw_labels), key=lambda v: (len(v), v) if v.isdigit() else (0, v))
    if len(names) != CLUSTERING_CLASSES[name]:
        raise DataFormatError(f"{path}: {len(names)} classes, but the data README says {CLUSTERING_CLASSES[name]}")
    lookup = {label: index for index, label in enumerate(names)}
    return LabelledTexts(name, "all", texts, np.array([lookup[l] for l in raw_labels], dtype=np.int64), names)


# ----------------------------------------------------------------------------------------------------
# User files: scored pairs, labelled texts, grouped texts in TSV / CSV / JSON lines
# ----------------------------------------------------------------------------------------------------


def _user_path(path: str | Path) -> Path:
    file = Path(path).expanduser()
    if not file.exists():  # a folder or an unreadable file fails when read, with the OS's reason and the path
        raise FileNotFoundError(f"data file not found: {file.resolve()} (given as {str(path)!r})")
    return file


def _file_kind(path: Path) -> str:
    suffix = path.suffix.lower()
    if suffix in (".jsonl", ".json", ".ndjson"):
        return "jsonl"
    if suffix == ".csv":
        return "csv"
    return "tsv"


def _table_rows(path: Path) -> Iterator[tuple[int, list[str]]]:
    """(line number, fields) of a TSV or CSV file, blank lines skipped."""
    text = _read_text(path)
    if _file_kind(path) == "csv":
        reader = csv.reader(io.StringIO(text))
        for fields in reader:
            if fields and any(f.strip() for f in fields):
                yield reader.line_num, fields
        return
    for number, line in enumerate(text.split("\n"), start=1):
        line = line.rstrip("\r")
        if line.strip():
            yield number, line.split("\t")


# Accepted names of each column: JSON keys, and the header names of a TSV/CSV file (case-insensitive).
TEXT1_KEYS = ("text1", "sentence1", "text_a", "s1", "first")
TEXT2_KEYS = ("text2", "sentence2", "text_b", "s2", "second")
SCORE_KEYS = ("score", "label", "similarity")
TEXT_KEYS = ("text", "sentence")
LABEL_KEYS = ("label", "class", "group")
GROUP_KEYS = ("group", "label", "id")
# The columns of each user format, in the order a file without a header lists them.
SCORED_COLUMNS = {"text1": TEXT1_KEYS, "text2": TEXT2_KEYS, "score": SCORE_KEYS}
LABELLED_COLUMNS = {"label": LABEL_KEYS, "text": TEXT_KEYS}
GROUPED_COLUMNS = {"group": GROUP_KEYS, "text": TEXT_KEYS}


def _header_order(fields: list[str], columns: dict[str, tuple[str, ...]]) -> list[str] | None:
    """The columns a header row names, in its order; None when the row is not a header.

    The one header rule of every user TSV/CSV format: a first row is a header iff each of its fields,
    stripped and lower-cased, is an accepted name of a different column and every column is named.
    """
    names = [field.strip().lower() for field in fields]
    order = [next((column for column, accepted in columns.items() if name in accepted), None) for name in names]
    return order if len(order) == len(columns) and set(order) == set(columns) else None


def _user_records(file: Path, columns: dict[str, tuple[str, ...]]) -> Iterator[tuple[int, dict[str, object]]]:
    """(line number, {column: raw value}) of a user file: JSON lines (each column from the first of its
    accepted keys present) or TSV/CSV (one field per column; a header row follows :func:`_header_order`)."""
    if _file_kind(file) == "jsonl":
        for number, row in _json_lines(file):
            yield number, {column: _pick(row, names, file, number) for column, names in columns.items()}
        return
    order = list(columns)
    for position, (number, fields) in enumerate(_table_rows(file)):
        header = _header_order(fields, columns) if position == 0 else None
        if header is not None:
            order = header
            continue
        if len(fields) != len(columns):
            raise DataFormatError(
                f"{file}, line {number}: expected {len(columns)} fields ({', '.join(order)}), found {len(fields)}"
            )
        yield number, dict(zip(order, fields))


def _pick(row: dict, names: tuple[str, ...], path: Path, number: int) -> object:
    for name in names:
        if name in row:
            return row[name]
    raise DataFormatError(f"{path}, line {number}: missing field (one of {', '.join(names)})")


def _json_type(value: object) -> str:
    """How JSON spells the type of a parsed value (for messages about a file the user wrote in JSON)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    return {int: "a number", float: "a number", list: "a list", dict: "an object"}.get(type(value), type(value).__name__)


def _text(value: object, path: Path, number: int, column: str) -> str:
    if not isinstance(value, str):
        raise DataFormatError(f"{path}, line {number}: {column} must be a string, found {_json_type(value)}")
    problem = unicode_problem(value)
    if problem:
        raise DataFormatError(f"{path}, line {number}: {column} has a {problem}")
    return value


def _score(value: object, path: Path, number: int) -> float:
    if isinstance(value, str):
        return _float(value, path, number, "score")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise DataFormatError(f"{path}, line {number}: score must be a number, found {_json_type(value)}")
    return _float(str(value), path, number, "score")


def _label(value: object, path: Path, number: int, column: str) -> str:
    if isinstance(value, str):
        return value.strip()
    if isinstance(value, bool) or not isinstance(value, int):
        raise DataFormatError(f"{path}, line {number}: {column} must be a string or a whole number, found {_json_type(value)}")
    return str(value)


def load_scored_pairs(path: str | Path) -> ScoredPairs:
    """User scored pairs: ``text1<TAB>text2<TAB>score`` rows (TSV/CSV, optional header) or JSON lines
    with ``text1``, ``text2``, ``score``."""
    file = _user_path(path)
    first, second, scores = [], [], []
    for number, row in _user_records(file, SCORED_COLUMNS):
        first.append(_text(row["text1"], file, number, "text1"))
        second.append(_text(row["text2"], file, number, "text2"))
        scores.append(_score(row["score"], file, number))
    if not first:
        raise DataFormatError(f"{file}: no scored pairs found")
    return ScoredPairs(file.stem, "user", first, second, np.array(scores, dtype=np.float64))


def _number_labels(raw: list[str]) -> tuple[np.ndarray, list[str]]:
    names = sorted(set(raw))
    lookup = {name: index for index, name in enumerate(names)}
    return np.array([lookup[r] for r in raw], dtype=np.int64), names


def load_labelled_texts(path: str | Path) -> LabelledTexts:
    """User labelled texts: ``label<TAB>text`` rows (TSV/CSV; a ``label,text`` or ``text,label`` header is
    honoured) or JSON lines with ``text`` and ``label``."""
    file = _user_path(path)
    texts, raw = [], []
    for number, row in _user_records(file, LABELLED_COLUMNS):
        texts.append(_text(row["text"], file, number, "text"))
        raw.append(_label(row["label"], file, number, "label"))
    if not texts:
        raise DataFormatError(f"{file}: no labelled texts found")
    labels, names = _number_labels(raw)
    return LabelledTexts(file.stem, "user", texts, labels, names)


def load_grouped_texts(path: str | Path, layout: str = "column") -> GroupedTexts:
    """User grouped texts for triplets.

    ``layout="column"``: one text per row with a group id (``group<TAB>text`` rows with the usual optional
    header, or JSON lines with ``group`` and ``text``). ``layout="line"``: one group per line and no header
    (its texts tab-separated or CSV fields, or a JSON list of strings / an object with ``texts``).
    Groups with one text give no positives.
    """
    if layout not in ("column", "line"):
        raise InputError(f"unknown grouped-texts layout {layout!r}; expected 'column' or 'line'")
    file = _user_path(path)
    texts: list[str] = []
    groups: list = []
    if layout == "column":
        for number, row in _user_records(file, GROUPED_COLUMNS):
            groups.append(_label(row["group"], file, number, "group"))
            texts.append(_text(row["text"], file, number, "text"))
    elif _file_kind(file) == "jsonl":
        for number, line in enumerate(_lines(file), start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as error:
                raise DataFormatError(f"{file}, line {number}: not valid JSON ({error.msg})") from None
            members = row.get("texts") if isinstance(row, dict) else row
            if not isinstance(members, list):
                raise DataFormatError(f"{file}, line {number}: expected a list of strings (or {{\"texts\": [...]}})")
            texts += [_text(member, file, number, f"text {index + 1}") for index, member in enumerate(members)]
            groups += [number] * len(members)
    else:
        for number, fields in _table_rows(file):
            members = [f for f in fields if f.strip()]
            texts += members
            groups += [number] * len(members)
    if not texts:
        raise DataFormatError(f"{file}: no grouped texts found")
    result = grouped(file.stem, texts, groups)
    if int(result.groups.max()) + 1 < 2:
        raise DataFormatError(f"{file}: triplets need at least two groups, found one")
    return result
