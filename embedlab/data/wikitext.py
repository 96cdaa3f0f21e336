"""The reference corpus (WikiText-2, shared data) as paragraphs and as sentences.

The pooling paper fits idf^W, the most frequent tokens, the Avg static model and ·^W post-processing
on WikiText (§3.1 "Additional Context Data", §3.3, §3.4.6). WikiText-2 is distributed tokenised;
``detokenize`` undoes its number/hyphen splitting (`` @-@ ``, `` @,@ ``, `` @.@ ``) and maps ``<unk>`` to
the model's own unknown token. Headings (``= Title =``) are not text and are skipped. Sentences come
from pysbd once and are cached as a text file (one per line).
"""

from __future__ import annotations

import hashlib

from embedlab.runtime import atomic_write_bytes, cache_dir, data_path
from embedlab.data.sentences import split_sentences

WIKITEXT_SPLITS = ("train", "valid", "test")


def detokenize(line: str, unk_token: str = "<unk>") -> str:
    text = line.strip().replace(" @-@ ", "-").replace(" @,@ ", ",").replace(" @.@ ", ".")
    return text.replace("<unk>", unk_token) if unk_token != "<unk>" else text


def wikitext2_paragraphs(split: str = "train", unk_token: str = "<unk>") -> list[str]:
    """Non-empty, non-heading lines of WikiText-2 ``split``, detokenised."""
    if split not in WIKITEXT_SPLITS:
        raise ValueError(f"unknown WikiText-2 split {split!r}; choose one of {WIKITEXT_SPLITS}")
    path = data_path("corpus", "wikitext-2", f"{split}.txt")
    paragraphs = []
    with open(path, encoding="utf-8") as stream:
        for line in stream:
            stripped = line.strip()
            if stripped and not (stripped.startswith("=") and stripped.endswith("=")):
                paragraphs.append(detokenize(stripped, unk_token))
    return paragraphs


def wikitext2_sentences(split: str = "train", min_chars: int = 10, unk_token: str = "<unk>") -> list[str]:
    """WikiText-2 sentences (pysbd) of at least ``min_chars`` characters, cached after the first split."""
    source = data_path("corpus", "wikitext-2", f"{split}.txt")
    stamp = hashlib.sha256(f"{source}:{source.stat().st_size}:{source.stat().st_mtime_ns}".encode()).hexdigest()[:12]
    cached = cache_dir("corpus") / f"wikitext2-{split}-sentences-{stamp}.txt"
    if cached.exists():
        sentences = cached.read_text(encoding="utf-8").split("\n")
    else:
        sentences = [sentence for paragraph in wikitext2_paragraphs(split) for sentence in split_sentences(paragraph)]
        atomic_write_bytes(cached, "\n".join(sentences).encode("utf-8"))
    selected = [sentence for sentence in sentences if len(sentence) >= min_chars]
    if unk_token != "<unk>":
        selected = [sentence.replace("<unk>", unk_token) for sentence in selected]
    return selected
