"""The typed containers every dataset loader returns and every evaluation task reads."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


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
    """Texts grouped by meaning, for triplets (neural-embeddings paper §3.2).

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
