"""Data in: the shared evaluation datasets, WikiText-2, user files, and sentence splitting."""

import json

from embedlab.errors import InputError


class DataFormatError(InputError):
    """A data file whose content does not have the expected format (the message names file and line).

    Defined here, at the bottom of the package, so that every reader (the shared-dataset loaders,
    :mod:`embedlab.data.user_files`, :mod:`embedlab.data.wikitext`) raises the same error without
    importing one another.
    """


def unicode_problem(text: str) -> str | None:
    """Why ``text`` is not valid Unicode (a lone surrogate, from a JSON ``"\\ud800"`` escape or from
    undecodable bytes in a command-line argument), or None; tokenizers cannot encode such text."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        return f"lone surrogate {text[error.start]!r} at character {error.start} (not valid Unicode)"
    return None


def encoding_hint(first_bytes: bytes) -> str:
    """What a file that is not UTF-8 most likely is, from its first bytes ("" when nothing is recognised)."""
    if first_bytes.startswith((b"\xff\xfe", b"\xfe\xff")):
        return "; it starts with a UTF-16 byte-order mark: save it as UTF-8"
    if first_bytes.startswith(b"\x1f\x8b"):
        return "; it is gzip-compressed (starts with 1f 8b): decompress it first (gunzip)"
    return ""


# characters that show nothing and separate nothing: a text of only these (and whitespace) is empty
_INVISIBLE = dict.fromkeys(map(ord, "\u200b\u200c\u200d\u2060\ufeff\u00ad"))


def is_blank(text: str) -> bool:
    """Whether ``text`` holds nothing to embed: only whitespace and zero-width characters (U+200B …)."""
    return not text.translate(_INVISIBLE).strip()


class _DuplicateKey(Exception):
    pass


def _unique_keys(pairs: list[tuple[str, object]]) -> dict:
    row = dict(pairs)
    if len(row) != len(pairs):
        seen: set[str] = set()
        raise _DuplicateKey(next(key for key, _ in pairs if key in seen or seen.add(key)))
    return row


def json_object(line: str, where: str) -> dict:
    """One JSON-lines record, which must be an object; ``where`` ("file, line 3" or "file:3") starts the
    error message. The one JSON-lines parser of every reader (datasets, user files, corpora)."""
    try:
        row = json.loads(line, object_pairs_hook=_unique_keys)
    except json.JSONDecodeError as error:
        raise DataFormatError(f"{where}: not valid JSON ({error.msg})") from None
    except _DuplicateKey as duplicate:  # json keeps the last silently: which text was meant is a guess
        raise DataFormatError(f"{where}: the key {duplicate.args[0]!r} appears twice in one object") from None
    if not isinstance(row, dict):
        raise DataFormatError(f"{where}: expected a JSON object, found {type(row).__name__}")
    return row
