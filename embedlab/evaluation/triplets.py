"""Anchor–positive–negative triplets (neural-embeddings paper §3.2, Eq. 2–3).

For texts grouped by meaning, every triplet (A, B, C) — A an anchor, B another candidate of A's group,
C a candidate of any other group — should satisfy E_A·E_B > E_A·E_C (unit-normalised embeddings; the
``product=dot`` option keeps them as encoded, Appendix F). A
triplet with E_A·E_B <= E_A·E_C is broken. Counts are exact and never enumerate triplets: for each anchor
the products to all candidates are sorted once, and each positive's product is binary-searched in them
(the anchor's own group is subtracted), so the cost is O(n² log n) for n texts instead of O(n³).

The intersection of two methods' broken-triplet sets (Eq. 3), I = |T₁ ∩ T₂| / min(|T₁|, |T₂|), is
counted per (anchor, positive) as a vectorised dominance count over the negatives (no Python loop over
triplets).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

from embedlab.errors import InputError
from embedlab.data.containers import GroupedTexts, grouped
from embedlab.data.paraphrase import mrpc_glue_train
from embedlab.data.sts import stsb
from embedlab.data.summeval import first_per_article, summeval
from embedlab.data.user_files import load_grouped_texts
from embedlab.evaluation.base import COUNT_NOTE, ERROR_COUNT_METRICS, Method, Metric, Task
from embedlab.evaluation.records import Record, UnitScores
from embedlab.evaluation.scoring import check_product, embed, product_rows, product_subset

_BLOCK = 256  # anchors per matrix product: bounds memory at 256 × n float64


# -- the shared groupings (neural-embeddings paper §3.2) ---------------------------------------------


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
    for doc_id, item in first_per_article(summeval()).items():
        texts += item.references
        groups += [doc_id] * len(item.references)
    return grouped("summ-r", texts, groups)


def _text_summ(name: str, references: bool) -> GroupedTexts:
    items = summeval()
    articles = first_per_article(items)
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
class TripletCounts:
    total: int
    wrong: int
    same: float  # mean E_A·E_B over all triplets
    diff: float  # mean E_A·E_C over all triplets
    # per anchor (the bootstrap's unit): its triplets, broken triplets, and sums of E_A·E_B and E_A·E_C
    anchors: dict[str, np.ndarray] | None = field(default=None, compare=False, repr=False)

    def units(self, numerator: str) -> UnitScores:
        """The anchors behind a share over triplets (``wrong``, ``same`` or ``diff`` over ``total``)."""
        return UnitScores("anchors", "ratio", {"numerator": self.anchors[numerator], "denominator": self.anchors["total"]})

    @property
    def error(self) -> float:
        return self.wrong / self.total if self.total else float("nan")


def _anchor_blocks(vectors: np.ndarray, data: GroupedTexts,
                   product: str = "cosine") -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """(anchor indices, candidate indices, products anchors × candidates) in blocks of anchors."""
    rows = product_rows(vectors, product)  # unit rows for cosines; the vectors as encoded for dot
    anchors = np.flatnonzero(data.is_anchor)
    candidates = np.flatnonzero(data.is_candidate)
    candidate_rows = rows[candidates]
    for start in range(0, anchors.size, _BLOCK):
        block = anchors[start:start + _BLOCK]
        yield block, candidates, rows[block] @ candidate_rows.T


def _group_members(data: GroupedTexts, candidates: np.ndarray) -> dict[int, np.ndarray]:
    """Column positions (within the candidate list) of each group's candidates."""
    groups = data.groups[candidates]
    order = np.argsort(groups, kind="stable")
    boundaries = np.flatnonzero(np.diff(groups[order])) + 1
    return {int(groups[chunk[0]]): chunk for chunk in np.split(order, boundaries) if chunk.size}


def count_triplets(vectors: np.ndarray, data: GroupedTexts, product: str = "cosine") -> TripletCounts:
    """Exact broken-triplet count and mean same/diff products (cosines, or dot products with
    ``product="dot"``), without enumerating triplets."""
    vectors = np.asarray(vectors)
    if vectors.shape[0] != len(data):
        raise ValueError(f"{vectors.shape[0]} embeddings for {len(data)} texts")
    per_anchor: dict[str, list[float]] = {"total": [], "wrong": [], "same": [], "diff": []}
    members = None
    for block, candidates, products in _anchor_blocks(vectors, data, product):
        if members is None:
            members = _group_members(data, candidates)
            position = {int(c): k for k, c in enumerate(candidates)}  # text index -> candidate column
            empty = np.zeros(0, dtype=np.int64)
        ordered = np.sort(products, axis=1)
        row_sums = products.sum(axis=1)
        for row, anchor in enumerate(block):
            own = members.get(int(data.groups[anchor]), empty)
            own_values = products[row, own]
            self_column = position.get(int(anchor))
            positives = own[own != self_column] if self_column is not None else own
            negatives = candidates.size - own.size
            if positives.size == 0 or negatives == 0:
                continue
            positive_values = products[row, positives]
            # candidates with product >= p, minus those of the anchor's own group (positives and itself)
            at_least_all = ordered.shape[1] - np.searchsorted(ordered[row], positive_values, side="left")
            at_least_own = (own_values[None, :] >= positive_values[:, None]).sum(axis=1)
            per_anchor["wrong"].append(int((at_least_all - at_least_own).sum()))
            per_anchor["total"].append(positives.size * negatives)
            per_anchor["same"].append(negatives * float(positive_values.sum()))
            per_anchor["diff"].append(positives.size * float(row_sums[row] - own_values.sum()))
    anchors = {name: np.array(values, dtype=np.float64) for name, values in per_anchor.items()}
    total = int(sum(per_anchor["total"]))
    if total == 0:
        raise InputError(f"{data.name}: the grouping defines no triplets (need two groups and a group of two)")
    return TripletCounts(total=total, wrong=int(sum(per_anchor["wrong"])), same=float(sum(per_anchor["same"])) / total,
                         diff=float(sum(per_anchor["diff"])) / total, anchors=anchors)


def broken_intersection(vectors_1: np.ndarray, vectors_2: np.ndarray, data: GroupedTexts,
                        product: str = "cosine") -> tuple[int, int, int]:
    """(|T₁ ∩ T₂|, |T₁|, |T₂|) for the broken-triplet sets of two embeddings of the same texts."""
    common = broken_1 = broken_2 = 0
    blocks_2 = _anchor_blocks(np.asarray(vectors_2), data, product)
    members = None
    for (block, candidates, products_1), (_, _, products_2) in zip(_anchor_blocks(np.asarray(vectors_1), data, product), blocks_2):
        if members is None:
            members = _group_members(data, candidates)
            position = {int(c): k for k, c in enumerate(candidates)}
            empty = np.zeros(0, dtype=np.int64)
        for row, anchor in enumerate(block):
            own = members.get(int(data.groups[anchor]), empty)
            self_column = position.get(int(anchor))
            positives = own[own != self_column] if self_column is not None else own
            negative_mask = np.ones(candidates.size, dtype=bool)
            negative_mask[own] = False
            if positives.size == 0 or not negative_mask.any():
                continue
            negatives_1, negatives_2 = products_1[row, negative_mask], products_2[row, negative_mask]
            for column in positives:  # one vectorised pass over the negatives per (anchor, positive)
                hit_1 = negatives_1 >= products_1[row, column]
                hit_2 = negatives_2 >= products_2[row, column]
                broken_1 += int(hit_1.sum())
                broken_2 += int(hit_2.sum())
                common += int(np.count_nonzero(hit_1 & hit_2))
    return common, broken_1, broken_2


def intersection_ratio(common: int, broken_1: int, broken_2: int) -> float:
    """Eq. 3: I = |T₁ ∩ T₂| / min(|T₁|, |T₂|) (NaN when either set is empty)."""
    smaller = min(broken_1, broken_2)
    return common / smaller if smaller else float("nan")


class TripletsTask(Task):
    """mrpc, sts, summ-g, summ-r, text-summ-g, text-summ-r, or a user grouped-texts file."""

    name = "triplets"
    description = "anchor–positive–negative triplets of grouped texts; broken when E_A·E_B ≤ E_A·E_C (neural-embeddings paper §3.2, Eq. 2–3)"
    datasets = ("mrpc", "sts", "summ-g", "summ-r", "text-summ-g", "text-summ-r")
    options = ("layout", "product")
    user_files = True
    parsing_options = ("layout",)
    headline_metric = "error"
    needs_reference = True  # Eq. 3: the intersection of two methods' broken triplets
    metrics = ERROR_COUNT_METRICS | {
        "intersection": Metric("Eq. 3 overlap of this method's broken triplets with the reference method's, 0–1", "", unit="fraction"),
    }

    def __init__(self, dataset: str, *, path: str | None = None, layout: str = "column", product: str = "cosine") -> None:
        super().__init__(dataset)
        self.path = path
        self.layout = layout if path is not None else "column"  # how a user file lists its groups
        self.product = check_product(product)
        if path is None and dataset not in TRIPLET_SETS:
            raise InputError(f"unknown triplet dataset {dataset!r}; expected one of {', '.join(TRIPLET_SETS)}")

    def load(self) -> GroupedTexts:
        if self.path is not None:
            return load_grouped_texts(self.path, self.layout)
        return TRIPLET_SETS[self.dataset]()

    def run(self, method: Method) -> list[Record]:
        self.check(method)
        data = self.load()
        (vectors,) = embed(method, data.texts)
        counts = count_triplets(vectors, data, self.product)
        subset = product_subset("all", self.product)
        return [
            self.record(method, subset, "error", counts.error, counts.total, counts.units("wrong")),
            self.record(method, subset, "total", counts.total, counts.total, note=COUNT_NOTE),
            self.record(method, subset, "wrong", counts.wrong, counts.total, note=COUNT_NOTE),
            self.record(method, subset, "same", counts.same, counts.total, counts.units("same")),
            self.record(method, subset, "diff", counts.diff, counts.total, counts.units("diff")),
        ]

    def against_reference(self, method_1: Method, method_2: Method) -> Record:
        """Eq. 3 intersection of the two methods' broken triplets, as a record of ``method_1`` (subset
        ``vs <method_2 spec>``)."""
        self.check(method_1)
        self.check(method_2)
        data = self.load()
        (vectors_1,), (vectors_2,) = embed(method_1, data.texts), embed(method_2, data.texts)
        common, broken_1, broken_2 = broken_intersection(vectors_1, vectors_2, data, self.product)
        return self.record(method_1, product_subset(f"vs {method_2.spec}", self.product), "intersection",
                           intersection_ratio(common, broken_1, broken_2),
                           common, note="a ratio of two methods' broken-triplet sets: no interval")
