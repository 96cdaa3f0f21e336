"""Sentence splitting and sentence-packed chunks for texts longer than a model's input.

Follows the neural-embeddings paper, Appendix A (Fig. 8): a long text is split into chunks, each made
of as many whole sentences as fit into the model's input; a single sentence longer than the input is
cut into consecutive pieces. Nothing is dropped. Sentence splitting is offline (pysbd, rule-based).

pysbd's time grows with the square of its input's length (200,000 characters: over a minute), so a long
text is segmented in bounded windows (:data:`WINDOW_CHARS`): each window's sentences but the last, which
the window's end may have cut, are kept, and the next window starts where they end. The text's time is
then linear in its length; an ordinary text (sentences far shorter than a window) gets the sentences
one pysbd call on the whole text gives. A window with no sentence end in it is cut at its last space.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from typing import TYPE_CHECKING

from embedlab.runtime.memo import cached

if TYPE_CHECKING:  # pysbd loads on first use
    import pysbd


@cached("data.sentence_segmenter", maxsize=1)
def _segmenter() -> pysbd.Segmenter:
    """pysbd's English segmenter, built once per process and reused for every text; its last step (finding
    each sentence in the text) done by :func:`_spans_of_sentences`."""
    import pysbd

    class Segmenter(pysbd.Segmenter):
        sentences_with_char_spans = _spans_of_sentences

    return Segmenter(language="en", clean=False, char_span=False)


def _spans_of_sentences(segmenter: pysbd.Segmenter, sentences: list[str]) -> list:
    r"""pysbd's ``Segmenter.sentences_with_char_spans``, the same spans without a regular expression per sentence.

    pysbd finds each sentence in the original text with ``re.finditer(re.escape(sentence) + r"\s*", text)``:
    a pattern compiled for one use per sentence, a third of its time on WikiText-2 (and it pushes pysbd's
    reused patterns out of ``re``'s 512-entry cache). Here the literal is found with ``str.find`` and the
    whitespace after it with ``str.isspace`` (what ``\s`` matches in a str pattern), scanning as finditer does:
    left to right, matches not overlapping, the first one that ends after the previous sentence's span.
    tests/data/test_sentences.py checks the result against pysbd's own segmenter."""
    from pysbd.utils import TextSpan

    text = segmenter.original_text
    spans = []
    previous_end = 0
    for sentence in sentences:
        position = 0
        while (start := text.find(sentence, position)) >= 0:
            end = start + len(sentence)
            while end < len(text) and text[end].isspace():
                end += 1
            if end > previous_end:
                spans.append(TextSpan(text[start:end], start, end))
                previous_end = end
                break
            position = end if end > start else start + 1  # after an empty match finditer moves one character on
    return spans


# Characters pysbd sees at once: far longer than a sentence, short enough that its quadratic time stays
# small (about 0.1 s a window on one core).
WINDOW_CHARS = 4096


def split_sentences(text: str) -> list[str]:
    """Split ``text`` into sentences (pysbd, on bounded windows: linear time); whitespace-only pieces are dropped."""
    if not text.strip():
        return []
    return [piece.strip() for piece in _windowed_segments(text) if piece.strip()]


# Below this many characters a corpus is split in this process: starting worker processes costs more.
PARALLEL_MIN_CHARS = 2_000_000


def split_sentences_of_texts(texts: Sequence[str], processes: int | None = None,
                             parallel_min_chars: int = PARALLEL_MIN_CHARS) -> list[str]:
    """The sentences of every text in ``texts``, in order: ``split_sentences`` applied to each, concatenated.

    A large corpus (WikiText-2 train: 10.9 M characters, about 31 CPU s of pysbd) is split by ``processes``
    forked worker processes (default: the cores this process may use) on consecutive slices of ``texts``;
    each text is split whole by one worker, so the result equals the one-process split exactly."""
    processes = processes or len(os.sched_getaffinity(0))
    if processes < 2 or sum(len(text) for text in texts) < parallel_min_chars or not _may_fork():
        return [sentence for text in texts for sentence in split_sentences(text)]
    slices = 4 * processes  # several slices per worker, so one slow slice does not hold the others back
    bounds = [len(texts) * index // slices for index in range(slices + 1)]
    parts = [list(texts[start:end]) for start, end in zip(bounds, bounds[1:])]
    _segmenter()  # built once here and inherited, not once per child
    # Fork, not spawn: spawn re-runs the caller's main script in every child, and a script without a
    # ``__main__`` guard would start over.
    with ProcessPoolExecutor(max_workers=processes, mp_context=get_context("fork")) as pool:
        return [sentence for part in pool.map(_split_part, parts) for sentence in part]


def _may_fork() -> bool:
    """Linux-style fork is available and this process may have children (a daemonic one may not)."""
    return "fork" in multiprocessing.get_all_start_methods() and not multiprocessing.current_process().daemon


def _split_part(texts: list[str]) -> list[str]:
    return [sentence for text in texts for sentence in split_sentences(text)]


def _windowed_segments(text: str) -> Iterator[str]:
    """pysbd's segments of ``text``, at most :data:`WINDOW_CHARS` characters segmented at once."""
    segment = _segmenter().segment
    start = 0
    while start < len(text):
        end = start + WINDOW_CHARS
        if end >= len(text):
            yield from segment(text[start:])
            return
        window = text[start:end]
        pieces = segment(window)
        kept = pieces[:-1]  # the last sentence may be cut by the window's end: segmented again in the next window
        consumed = sum(len(piece) for piece in kept)
        if kept and consumed > 0 and window.startswith("".join(kept)):
            yield from kept
            start += consumed
            continue
        # no sentence ends inside the window (or pysbd changed the text): cut at its last space
        cut = window.rfind(" ", WINDOW_CHARS // 2)
        cut = WINDOW_CHARS if cut <= 0 else cut + 1
        yield window[:cut]
        start += cut


def pack_sentences(sentence_token_ids: Sequence[Sequence[int]], budget: int) -> list[list[int]]:
    """Greedily pack whole sentences (their token ids) into chunks of at most ``budget`` tokens.

    A sentence longer than ``budget`` is cut into consecutive pieces of ``budget`` tokens; each piece
    is its own chunk, so chunk boundaries fall between sentences everywhere else.
    """
    if budget < 1:
        raise ValueError(f"chunk budget must be at least one token, got {budget}")
    chunks: list[list[int]] = []
    current: list[int] = []
    for ids in sentence_token_ids:
        ids = list(ids)
        if not ids:
            continue
        if len(ids) > budget:
            if current:
                chunks.append(current)
                current = []
            chunks.extend(ids[start : start + budget] for start in range(0, len(ids), budget))
            continue
        if len(current) + len(ids) > budget:
            chunks.append(current)
            current = []
        current = current + ids
    if current:
        chunks.append(current)
    return chunks


def chunk_token_ids(text: str, tokenize: Callable[[str], list[int]], budget: int) -> list[list[int]]:
    """Token ids of ``text`` as one chunk when it fits ``budget``, else as sentence-packed chunks."""
    ids = tokenize(text)
    if len(ids) <= budget:
        return [ids]
    return pack_sentences([tokenize(sentence) for sentence in split_sentences(text)], budget)
