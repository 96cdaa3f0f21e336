"""SentEval's classification sets read as SentEval reads them (whitespace-normalised): MR, CR, SUBJ,
MPQA, SST-2/5 and TREC (pooling paper §3.5.3; MRPC and SICK-E are pair sets, in ``paraphrase`` and ``sts``)."""

from __future__ import annotations

import numpy as np

from embedlab.data import DataFormatError
from embedlab.data.containers import LabelledTexts
from embedlab.data.reading import check_rows, file_lines, senteval_text
from embedlab.errors import InputError
from embedlab.runtime.settings import data_path


BINARY_FILES = {
    "mr": ("MR", "rt-polarity.neg", "rt-polarity.pos"),
    "cr": ("CR", "custrev.neg", "custrev.pos"),
    "subj": ("SUBJ", "subj.objective", "subj.subjective"),
    "mpqa": ("MPQA", "mpqa.neg", "mpqa.pos"),
}


# What SentEval's reference batchers (examples/bow.py, infersent.py, …) hand an encoder for an empty
# sentence: ``batch = [sent if sent != [] else ['.'] for sent in batch]``. CR and MPQA keep 4 and 3 empty
# lines; a decoder without a BOS token has no token to embed for them, an encoder only [CLS]/[SEP].
EMPTY_SENTENCE = "."


def batcher_texts(texts: list[str]) -> list[str]:
    """``texts`` as SentEval's batchers pass them on: an empty (or all-space) sentence becomes ``"."``."""
    return [text if text.strip() else EMPTY_SENTENCE for text in texts]


def senteval_binary(name: str) -> LabelledTexts:
    """MR, CR, SUBJ or MPQA: one sentence per line, one file per class (class 0 first, as SentEval)."""
    name = name.lower()
    if name not in BINARY_FILES:
        raise InputError(f"unknown SentEval binary set {name!r}; expected one of {', '.join(BINARY_FILES)}")
    folder, negative, positive = BINARY_FILES[name]
    texts, labels = [], []
    for label, file in enumerate((negative, positive)):
        lines = file_lines(data_path("senteval", folder, file))
        texts += [senteval_text(line) for line in lines]  # empty lines stay (SentEval keeps them; see batcher_texts)
        labels += [label] * len(lines)
    check_rows(name, len(texts), data_path("senteval", folder))
    return LabelledTexts(name, "all", texts, np.array(labels, dtype=np.int64), [negative, positive])


def sst(fine_grained: bool, split: str) -> LabelledTexts:
    """SST-2 (``fine_grained=False``, ``text<TAB>label`` lines) or SST-5 (``label text`` lines) ``train``/``dev``/``test``."""
    folder = "Fine-Grained" if fine_grained else "Binary"
    key = f"sst{5 if fine_grained else 2}-{split}"
    path = data_path("senteval", "SST", folder, f"sentiment-{split}")
    classes = 5 if fine_grained else 2
    texts, labels = [], []
    for number, line in enumerate(file_lines(path), start=1):
        if fine_grained:  # SST-5 lines are "label text"
            label, separator, text = line.strip().partition(" ")
        else:  # SST-2 lines are "text<TAB>label"
            text, separator, label = line.strip().rpartition("\t")
        if not separator or label.strip() not in {str(c) for c in range(classes)}:
            layout = "label<SPACE>text" if fine_grained else "text<TAB>label"
            raise DataFormatError(f"{path}, line {number}: expected {layout} with label in 0..{classes - 1}")
        texts.append(senteval_text(text))
        labels.append(int(label))
    check_rows(key, len(texts), path)
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
    for number, line in enumerate(file_lines(path), start=1):
        coarse, colon, rest = line.partition(":")
        words = rest.split()
        if not colon or coarse not in TREC_CLASSES or not words:
            raise DataFormatError(f"{path}, line {number}: expected 'COARSE:fine question' with COARSE in {TREC_CLASSES}")
        texts.append(" ".join(words[1:]))  # drop the fine label
        labels.append(TREC_CLASSES.index(coarse))
    check_rows(f"trec-{split}", len(texts), path)
    return LabelledTexts("trec", split, texts, np.array(labels, dtype=np.int64), TREC_CLASSES)
