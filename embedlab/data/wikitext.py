"""The one reader of WikiText-2 (shared data): its files checked, as paragraphs and as sentences.

Three consumers read it: the pooling paper fits idf^W, the most frequent tokens, the Avg static model and
·^W post-processing on WikiText-2 train (§3.1 "Additional Context Data", §3.3, §3.4.6); the pooling
paper's IsoScore runs on its test sentences (§3.5.4); and the masked-LM head for encoders shipped
without one is trained on train and scored on valid (neural-embeddings paper, Appendix A).

WikiText-2 is distributed tokenised; :func:`detokenize` undoes its number/hyphen splitting (`` @-@ ``,
`` @,@ ``, `` @.@ ``) and maps ``<unk>`` to the model's own unknown token. Headings (``= Title =``) are
not text and are skipped. Every file is checked once per process against the token count published
with the data, so a truncated copy fails loudly. Sentences are pysbd's: for the three files of the shared data
(recognised by the SHA-256 of their bytes) they are sliced from the paragraphs at offsets shipped with the
package (:mod:`embedlab.data.sentence_spans`; identical to pysbd's split, ≈ 31 CPU s saved on train); any other
file is split by pysbd once (the paragraphs spread over the cores) and cached as a text file (one per line).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from embedlab.data import DataFormatError
from embedlab.data.sentence_spans import read_sentence_spans, shipped_sentences, spans_file
from embedlab.data.sentences import split_sentences_of_texts
from embedlab.errors import InputError
from embedlab.runtime.cache.atomic import atomic_write_bytes
from embedlab.runtime.cache.locks import building
from embedlab.runtime.memo import cached
from embedlab.runtime.settings import cache_dir, data_path

# Tokens per split as published with WikiText-2 (words plus one end-of-line token per line).
WIKITEXT_TOKENS = {"train": 2088628, "valid": 217646, "test": 245569}
WIKITEXT_SPLITS = tuple(WIKITEXT_TOKENS)
_JOINERS = ((" @-@ ", "-"), (" @,@ ", ","), (" @.@ ", "."))


def detokenize(line: str, unk_token: str = "<unk>") -> str:
    """One WikiText line as plain text: joiners undone, ``<unk>`` -> ``unk_token``, outer spaces dropped."""
    text = line.strip()
    for marked, plain in _JOINERS:
        text = text.replace(marked, plain)
    return text.replace("<unk>", unk_token) if unk_token != "<unk>" else text


def wikitext2_file(split: str) -> Path:
    """The file of WikiText-2 ``split``, after checking its token count against the published one."""
    if split not in WIKITEXT_TOKENS:
        raise InputError(f"unknown WikiText-2 split {split!r}; choose one of {WIKITEXT_SPLITS}")
    path = data_path("corpus", "wikitext-2", f"{split}.txt")
    _check_token_count(str(path), split)
    return path


@cached("data.wikitext_checked")
def _check_token_count(path: str, split: str) -> None:
    """Raise when the file at ``path`` does not hold the published token count (checked once per process)."""
    text = Path(path).read_bytes().decode("utf-8-sig")
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # a final newline ends the last line, it does not start another
    tokens = sum(len(line.split()) + 1 for line in lines)
    if tokens != WIKITEXT_TOKENS[split]:
        raise DataFormatError(f"{path}: {tokens} tokens, but the data README says {WIKITEXT_TOKENS[split]}")


def wikitext2_sha256(split: str) -> str:
    """SHA-256 of the bytes of WikiText-2 ``split``'s file: how shipped offsets and statistics recognise it."""
    path = wikitext2_file(split)
    status = path.stat()
    return _file_sha256(str(path), status.st_size, status.st_mtime_ns)


@cached("data.wikitext_sha256")
def _file_sha256(path: str, size: int, mtime_ns: int) -> str:
    """Hashed once per process and file version (train is 10.9 MB; every sentence and statistics lookup asks)."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def wikitext2_paragraphs(split: str = "train", unk_token: str = "<unk>") -> list[str]:
    """Non-empty, non-heading lines of WikiText-2 ``split``, detokenised."""
    paragraphs = []
    with open(wikitext2_file(split), encoding="utf-8") as stream:
        for line in stream:
            stripped = line.strip()
            if stripped and not (stripped.startswith("=") and stripped.endswith("=")):
                paragraphs.append(detokenize(stripped, unk_token))
    return paragraphs


def wikitext2_sentences(split: str = "train", min_chars: int = 10, unk_token: str = "<unk>") -> list[str]:
    """WikiText-2 sentences (pysbd's split) of at least ``min_chars`` characters, ``<unk>`` written ``unk_token``."""
    selected = [sentence for sentence in _all_sentences(split, wikitext2_sha256(split)) if len(sentence) >= min_chars]
    if unk_token != "<unk>":
        selected = [sentence.replace("<unk>", unk_token) for sentence in selected]
    return selected


@cached("data.wikitext_sentences", maxsize=3)
def _all_sentences(split: str, file_sha256: str) -> tuple[str, ...]:
    """Every sentence of the file version ``file_sha256`` of ``split``, made once per process: sliced at the shipped
    offsets where the package has them for this file, else pysbd's (:func:`_pysbd_sentences`)."""
    shipped = spans_file(split)
    spans = read_sentence_spans(shipped) if shipped.is_file() else None
    if spans is not None and spans.file_sha256 == file_sha256:
        return tuple(shipped_sentences(spans, wikitext2_paragraphs(split)))  # slicing: no pysbd, no cache file
    return tuple(_pysbd_sentences(split, file_sha256))


def _pysbd_sentences(split: str, file_sha256: str) -> list[str]:
    """pysbd's sentences of a WikiText-2 file the package has no offsets for, cached by the file's content."""
    sentences_file = cache_dir("corpus") / f"wikitext2-{split}-sentences-{file_sha256[:12]}.txt"
    if sentences_file.exists():
        return sentences_file.read_text(encoding="utf-8").split("\n")
    with building(sentences_file):  # another process splitting the same file: wait for its file
        if sentences_file.exists():
            return sentences_file.read_text(encoding="utf-8").split("\n")
        sentences = split_sentences_of_texts(wikitext2_paragraphs(split))  # on every core: ≈ 31 CPU s for train
        atomic_write_bytes(sentences_file, "\n".join(sentences).encode("utf-8"))
        return sentences
