"""The six short-text clustering sets of the pooling paper (§3.5.1), and the GoogleNews variants."""

from __future__ import annotations

import numpy as np

from embedlab.data import DataFormatError
from embedlab.data.containers import LabelledTexts
from embedlab.data.reading import check_rows, file_lines
from embedlab.errors import InputError
from embedlab.runtime.settings import data_path


# Number of classes of the clustering sets (README); k-means uses k = number of classes.
CLUSTERING_CLASSES = {"agnews": 4, "biomedical": 20, "googlenews_ts": 152, "googlenews_s": 152, "googlenews_t": 152,
                      "searchsnippets": 8, "stackoverflow": 20, "tweet": 89}


CLUSTERING_SETS = ("agnews", "biomedical", "googlenews_ts", "searchsnippets", "stackoverflow", "tweet")


def clustering_set(name: str) -> LabelledTexts:
    """A short-text clustering set: ``label<TAB>text`` lines (labels renumbered 0..C-1 in sorted order)."""
    if name not in CLUSTERING_CLASSES:
        raise InputError(f"unknown clustering set {name!r}; expected one of {', '.join(CLUSTERING_CLASSES)}")
    path = data_path("clustering", f"{name}.tsv")
    raw_labels, texts = [], []
    for number, line in enumerate(file_lines(path), start=1):
        label, tab, text = line.partition("\t")
        if not tab or not label.strip():
            raise DataFormatError(f"{path}, line {number}: expected label<TAB>text")
        raw_labels.append(label.strip())
        texts.append(text)
    check_rows(name, len(texts), path)
    names = sorted(set(raw_labels), key=lambda v: (len(v), v) if v.isdigit() else (0, v))
    if len(names) != CLUSTERING_CLASSES[name]:
        raise DataFormatError(f"{path}: {len(names)} classes, but the data README says {CLUSTERING_CLASSES[name]}")
    lookup = {label: index for index, label in enumerate(names)}
    return LabelledTexts(name, "all", texts, np.array([lookup[l] for l in raw_labels], dtype=np.int64), names)
