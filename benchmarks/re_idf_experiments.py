"""Why the random-embedding (RE) rows weighted by idf^W are below the pooling paper: each hypothesis as a
one-setting change of the idf^W reference, measured on STS (Spearman × 100 of the cosine).

The paper (§3.3, Eq. 4) says idf_t = log(N / df_t) over "the Wikitext-2 dataset", weights scaled to sum
to 1 per text. What it leaves open, each a :class:`Variation` field here:

* ``unit``: what a document is: a pysbd ``sentence`` of the detokenised text (embedlab's), a ``paragraph``
  (non-empty, non-heading line), an ``article`` (the lines under one ``= Title =``), or a ``line`` (every
  line of the file, headings and empty lines included: the rows of the Hugging Face ``wikitext`` dataset);
  ``raw`` (True) keeps the text as distributed (`` @-@ ``, ``<unk>``), not detokenised;
* ``splits``: ``train`` only, or ``all`` three;
* ``over``: idf per token id (``tokens``), or per word: a word's pieces share the idf of the whole word;
* ``formula``: ``log`` (log N/df; a token absent from the documents gets log N, as if seen once),
  ``smooth`` (scikit-learn's log((1+N)/(1+df)) + 1), ``unseen-zero`` (log N/df, absent tokens weigh 0);
* ``special_idf``: [CLS]/[SEP]'s idf: ``unseen`` (the documents are tokenised without them, so they get
  log N, the largest weight) or ``zero`` (tokenised with them: they are in every document, df = N);
* ``special_vectors``: whether [CLS]/[SEP]'s random vectors take part in the mean at all;
* ``normalise``: per-text weights scaled to sum 1 ``after`` the filter drops tokens, or ``before``.

The pooling is embedlab's (its random table, tokenizer and sparse weighted sum); the first row, embedlab's
definition, must equal the library's own ``random:minilm,dim=768,weights=idf-ref`` score (checked).

    EMBEDLAB_CACHE=... HF_HUB_OFFLINE=1 nice python benchmarks/re_idf_experiments.py [--tasks stsb,sts13] [--json out.json]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import resource
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats
from scipy.sparse import csr_matrix

from embedlab import registry
from embedlab.data.containers import ScoredPairs
from embedlab.data.sts import sick_relatedness, sts_year, stsb
from embedlab.data.wikitext import WIKITEXT_SPLITS, detokenize, wikitext2_file, wikitext2_sentences
from embedlab.pooling.weights import excluded_vocabulary

BASE_SPEC = "random:minilm,dim=768,weights=idf-ref"
# The paper's RE idf^W values (Tables 6-12, Spearman x 100).
PAPER = {"sts12": 55.4, "sts13": 72.5, "sts14": 67.6, "sts15": 74.4, "sts16": 71.9, "stsb": 69.8, "sick-r": 57.4}


@dataclass(frozen=True)
class Variation:
    """One definition of idf^W; the defaults are embedlab's."""

    unit: str = "sentence"
    raw: bool = False
    splits: str = "train"
    over: str = "tokens"
    formula: str = "log"
    special_idf: str = "unseen"
    special_vectors: bool = True
    normalise: str = "after"
    filter: str = "none"

    def label(self) -> str:
        changed = [f"{field.name}={getattr(self, field.name)}" for field in dataclasses.fields(self)
                   if getattr(self, field.name) != field.default]
        return ", ".join(changed) or "embedlab (pysbd sentences of train, token ids, log N/df, [CLS]/[SEP] as unseen)"


EMBEDLAB = Variation()
SPECIAL_ZERO = Variation(special_idf="zero")
ONE_CHANGE = [
    EMBEDLAB,
    Variation(unit="paragraph"), Variation(unit="article"), Variation(unit="line"), Variation(unit="line", raw=True),
    Variation(splits="all"), Variation(over="words"), Variation(formula="smooth"), Variation(formula="unseen-zero"),
    SPECIAL_ZERO, Variation(special_vectors=False),
    Variation(filter="biases"), Variation(filter="biases", normalise="before"),
]


def on_top(base: Variation) -> list[Variation]:
    """Every other one-setting change applied on top of ``base``."""
    changes = [{key: getattr(item, key) for key in ("unit", "raw", "splits", "over", "formula", "special_vectors", "filter", "normalise")
                if getattr(item, key) != getattr(EMBEDLAB, key)} for item in ONE_CHANGE[1:] if item is not SPECIAL_ZERO]
    return [base] + [dataclasses.replace(base, **change) for change in changes if change]


# --- the reference documents ------------------------------------------------------------------------------

def _lines(split: str) -> list[str]:
    with open(wikitext2_file(split), encoding="utf-8") as stream:
        return [line.rstrip("\n") for line in stream]


def _is_heading(line: str) -> bool:
    stripped = line.strip()
    return stripped.startswith("=") and stripped.endswith("=")


def _articles(lines: Sequence[str]) -> Iterator[str]:
    """The lines of each article joined into one document. An article opens with a top-level heading
    (`` = Title = ``) after two empty lines; a few table rows in the text look like headings (`` = Goals ; A = ``)
    but follow text, so they stay inside their article. Headings are not text and are left out."""
    current: list[str] = []
    for index, line in enumerate(lines):
        stripped = line.strip()
        opens = _is_heading(stripped) and not stripped.startswith("= =") and all(not lines[before].strip() for before in range(max(index - 2, 0), index))
        if opens and current:
            yield " ".join(current)
            current = []
        if stripped and not _is_heading(stripped):
            current.append(stripped)
    if current:
        yield " ".join(current)


def documents(variation: Variation, unk: str) -> list[str]:
    """The reference documents of ``variation``: its unit of its splits, detokenised unless ``raw``."""
    splits = WIKITEXT_SPLITS if variation.splits == "all" else ("train",)
    texts: list[str] = []
    for split in splits:
        if variation.unit == "sentence":
            texts += wikitext2_sentences(split, min_chars=1, unk_token=unk)
            continue
        lines = _lines(split)
        if variation.unit == "line":
            picked = lines
        elif variation.unit == "paragraph":
            picked = [line for line in lines if line.strip() and not _is_heading(line)]
        else:
            picked = list(_articles(lines))
        texts += picked if variation.raw else [detokenize(text, unk) for text in picked]
    return texts


# --- idf and pooling --------------------------------------------------------------------------------------

def _units(tokenizer, texts: Sequence[str], over: str, special: bool) -> list[list]:
    """Each text as its units: token ids, or (over words) each word's tuple of piece ids, one per piece."""
    encoded = tokenizer(list(texts), add_special_tokens=special, verbose=False)
    if over == "tokens":
        return encoded["input_ids"]
    units = []
    for index, ids in enumerate(encoded["input_ids"]):
        words = encoded.word_ids(index)
        pieces: dict[int, tuple] = {}
        for token, word in zip(ids, words):
            if word is not None:
                pieces[word] = pieces.get(word, ()) + (token,)
        units.append([(token,) if word is None else pieces[word] for token, word in zip(ids, words)])
    return units


def idf_table(documents_units: list[list], formula: str) -> tuple[dict, float]:
    """idf per unit over the documents, and the idf of a unit absent from them."""
    frequencies: dict = {}
    for units in documents_units:
        for unit in set(units):
            frequencies[unit] = frequencies.get(unit, 0) + 1
    count = len(documents_units)
    if formula == "smooth":
        return {unit: float(np.log((1 + count) / (1 + df)) + 1) for unit, df in frequencies.items()}, float(np.log(1 + count) + 1)
    idf = {unit: float(np.log(count / df)) for unit, df in frequencies.items()}
    return idf, 0.0 if formula == "unseen-zero" else float(np.log(count))


def pooled(texts: Sequence[str], variation: Variation, context: dict) -> np.ndarray:
    """(n, d): each text's idf-weighted mean of random token vectors, as ``variation`` defines it."""
    tokenizer, table, idf, unseen = context["tokenizer"], context["table"], context["idf"], context["unseen"]
    special_ids = set(tokenizer.all_special_ids)
    excluded = excluded_vocabulary(tokenizer, variation.filter)
    rows, weights, offsets = [], [], [0]
    for ids, units in zip(tokenizer(list(texts))["input_ids"], _units(tokenizer, texts, variation.over, True)):
        raw = np.array([idf.get(unit, unseen) for unit in units])
        special = np.isin(ids, list(special_ids))
        if variation.special_idf == "zero":
            raw[special] = 0.0
        keep = np.ones(len(ids), dtype=bool) if variation.special_vectors else ~special
        if variation.normalise == "before":
            raw = raw / raw[keep].sum()
        if excluded is not None and (keep & ~excluded[ids]).any():
            keep &= ~excluded[ids]
        weight = np.where(keep, raw, 0.0)
        if weight.sum() == 0:  # every kept token weighs 0: uniform over them, as embedlab falls back
            weight = keep / keep.sum()
        weight = weight / weight.sum() if variation.normalise == "after" else weight
        rows += ids
        weights.append(weight)
        offsets.append(offsets[-1] + len(ids))
    selector = csr_matrix((np.concatenate(weights), rows, offsets), shape=(len(texts), table.shape[0]))
    return np.asarray(selector @ table.astype(np.float64))


def spearman(pairs: ScoredPairs, variation: Variation, context: dict) -> float:
    first, second = pooled(pairs.first, variation, context), pooled(pairs.second, variation, context)
    cosine = (first * second).sum(1) / (np.linalg.norm(first, axis=1) * np.linalg.norm(second, axis=1))
    return 100 * float(stats.spearmanr(cosine, pairs.scores).statistic)


# --- the run ----------------------------------------------------------------------------------------------

def sts_pairs(task: str) -> ScoredPairs:
    """The STS set the paper's tables score: STS-B / SICK-R test, or a year's subsets concatenated ("all")."""
    if task == "stsb":
        return stsb("test")
    if task == "sick-r":
        return sick_relatedness("test")
    subsets = sts_year(task)
    return ScoredPairs(task, "all", [t for s in subsets for t in s.first], [t for s in subsets for t in s.second],
                       np.concatenate([s.scores for s in subsets]))


def measure(variations: Sequence[Variation], tasks: Sequence[str], method) -> list[dict]:
    """Each variation's Spearman on each task, its reference documents and the CPU seconds it took."""
    tokenizer = method.model.tokenizer
    table = method.pipeline.source.table()
    data = {task: sts_pairs(task) for task in tasks}
    results, idf_cache = [], {}
    for variation in variations:
        started = time.process_time()
        key = (variation.unit, variation.raw, variation.splits, variation.over, variation.formula)
        if key not in idf_cache:
            docs = documents(variation, tokenizer.unk_token)
            idf_cache[key] = (*idf_table(_units(tokenizer, docs, variation.over, False), variation.formula), len(docs))
        idf, unseen, count = idf_cache[key]
        context = {"tokenizer": tokenizer, "table": table, "idf": idf, "unseen": unseen}
        scores = {task: round(spearman(pairs, variation, context), 2) for task, pairs in data.items()}
        results.append({"variation": variation.label(), "documents": count, **scores,
                        "cpu_s": round(time.process_time() - started, 1)})
        print(json.dumps(results[-1]), flush=True)
    return results


def check_baseline(results: list[dict], tasks: Sequence[str], method) -> None:
    """The embedlab row must be the library's own score: else this script's pooling is not embedlab's."""
    for task in tasks:
        pairs = sts_pairs(task)
        first, second = method.encode(pairs.first), method.encode(pairs.second)
        cosine = (first * second).sum(1) / (np.linalg.norm(first, axis=1) * np.linalg.norm(second, axis=1))
        library = 100 * float(stats.spearmanr(cosine, pairs.scores).statistic)
        if abs(library - results[0][task]) > 0.01:
            raise SystemExit(f"{task}: this script's embedlab row {results[0][task]} != the library's {library:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", default="stsb,sts13", help="comma-separated: " + ", ".join(PAPER))
    parser.add_argument("--set", choices=("one-change", "on-special-zero", "best"), default="one-change",
                        help="one-change: each hypothesis alone; on-special-zero: each on top of [CLS]/[SEP] idf 0; "
                             "best: embedlab and [CLS]/[SEP] idf 0 only")
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args()
    tasks = args.tasks.split(",")
    variations = {"one-change": ONE_CHANGE, "on-special-zero": on_top(SPECIAL_ZERO), "best": [EMBEDLAB, SPECIAL_ZERO]}[args.set]
    method = registry.load(BASE_SPEC)
    results = measure(variations, tasks, method)
    if variations[0] == EMBEDLAB:
        check_baseline(results, tasks, method)
    print("paper:", json.dumps({task: PAPER[task] for task in tasks}))
    usage = resource.getrusage(resource.RUSAGE_SELF)
    summary = {"command": f"benchmarks/re_idf_experiments.py --tasks {args.tasks} --set {args.set}", "paper": PAPER,
               "results": results, "cpu_s": round(usage.ru_utime + usage.ru_stime, 1), "load_average": os.getloadavg()[0]}
    if args.json:
        with open(args.json, "w", encoding="utf-8") as stream:
            json.dump(summary, stream, indent=1)


if __name__ == "__main__":
    main()
