"""Write (or check) the shipped sentence offsets of WikiText-2 (embedlab/resources/wikitext2-<split>-sentence-spans.npz).

    python scripts/wikitext_sentence_spans.py            # pysbd over train, valid and test (≈ 40 CPU s), offsets written
    python scripts/wikitext_sentence_spans.py --check    # wikitext2_sentences (the shipped offsets) == pysbd's split

Each paragraph is split by ``split_sentences`` (what ``split_sentences_of_texts`` applies to each text) on every
core; the offsets are stored with the SHA-256 of the data file's bytes, which is how ``wikitext2_sentences``
recognises the file. ``--check`` compares, for each split, the sentences ``wikitext2_sentences`` returns (sliced
from the shipped offsets) with ``split_sentences_of_texts`` over the file's paragraphs (pysbd), as lists.
"""

from __future__ import annotations

import argparse
import hashlib
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context

from embedlab.data.sentence_spans import read_sentence_spans, spans_file, write_sentence_spans
from embedlab.data.sentences import split_sentences, split_sentences_of_texts
from embedlab.data.wikitext import WIKITEXT_SPLITS, wikitext2_file, wikitext2_paragraphs, wikitext2_sentences


def write(split: str) -> None:
    paragraphs = wikitext2_paragraphs(split)
    with ProcessPoolExecutor(mp_context=get_context("fork")) as pool:
        paragraph_sentences = list(pool.map(split_sentences, paragraphs, chunksize=256))
    digest = hashlib.sha256(wikitext2_file(split).read_bytes()).hexdigest()
    write_sentence_spans(spans_file(split), digest, paragraphs, paragraph_sentences)
    count = sum(len(sentences) for sentences in paragraph_sentences)
    print(f"{split}: {count} sentences of {len(paragraphs)} paragraphs -> {spans_file(split)} "
          f"({spans_file(split).stat().st_size} bytes)")


def check(split: str) -> bool:
    started = time.perf_counter()
    shipped = wikitext2_sentences(split, min_chars=0)
    sliced_s = time.perf_counter() - started
    spans = read_sentence_spans(spans_file(split))
    assert spans.file_sha256 == hashlib.sha256(wikitext2_file(split).read_bytes()).hexdigest(), "not the shipped file"
    pysbd = split_sentences_of_texts(wikitext2_paragraphs(split))
    same = shipped == pysbd
    print(f"{split}: {len(shipped)} sentences from the offsets ({sliced_s:.2f} s), {len(pysbd)} from pysbd: "
          f"{'identical' if same else 'DIFFERENT'}")
    return same


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="compare the shipped offsets with pysbd instead of writing")
    parser.add_argument("--splits", nargs="+", default=list(WIKITEXT_SPLITS), choices=WIKITEXT_SPLITS)
    args = parser.parse_args()
    if args.check:
        if not all([check(split) for split in args.splits]):
            raise SystemExit("the shipped sentence offsets differ from pysbd's split")
        return
    for split in args.splits:
        write(split)


if __name__ == "__main__":
    main()
