"""The paraphrase data ALIGN-SIM samples from (paper §5.1, Appendix A.2), as labelled sentence pairs.

QQP (first 10,000 rows of the Quora release), PAWS-Wiki (labeled final dev + test), MRPC (the GLUE
train split the paper uses: 3,668 pairs, 2,474 positive) and AFIN (negated sentence + affirmative
interpretation). The files are read by the loaders in ``embedlab.data.paraphrase``; this module
only turns them into pairs that remember where they came from.
"""

from __future__ import annotations

from dataclasses import dataclass

from embedlab.errors import InputError
from embedlab.data.containers import LabelledPairs
from embedlab.data.paraphrase import afin, mrpc_glue_train, paws_wiki, qqp

PARAPHRASE_DATASETS = ("qqp", "paws", "mrpc")
ALL_DATASETS = PARAPHRASE_DATASETS + ("afin",)


@dataclass(frozen=True)
class SentencePair:
    """A labelled sentence pair; ``source`` names its dataset, split and row for provenance."""

    text_a: str
    text_b: str
    label: int
    source: str


def _pairs(data: LabelledPairs) -> list[SentencePair]:
    pairs = []
    for row, (text_a, text_b, label) in enumerate(zip(data.first, data.second, data.labels), start=1):
        where = f"{data.name}/{data.subset} row {row}"
        if not text_a.strip() or not text_b.strip():
            raise InputError(f"{where}: empty sentence")
        pairs.append(SentencePair(text_a.strip(), text_b.strip(), int(label), where))
    return pairs


def read_qqp() -> list[SentencePair]:
    return _pairs(qqp())


def read_paws() -> list[SentencePair]:
    return _pairs(paws_wiki("dev")) + _pairs(paws_wiki("test"))


def read_mrpc() -> list[SentencePair]:
    return _pairs(mrpc_glue_train())


def read_afin() -> list[SentencePair]:
    """AFIN: (sentence with negation, its affirmative interpretation); every pair is a paraphrase (label 1)."""
    return _pairs(afin())


READERS = {"qqp": read_qqp, "paws": read_paws, "mrpc": read_mrpc, "afin": read_afin}


def read_dataset(name: str) -> list[SentencePair]:
    if name not in READERS:
        raise InputError(f"unknown ALIGN-SIM dataset {name!r}; choose from {', '.join(ALL_DATASETS)}")
    return READERS[name]()
