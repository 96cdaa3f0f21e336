"""Data in: the shared evaluation datasets, WikiText-2, user files, and sentence splitting."""


class DataFormatError(ValueError):
    """A data file whose content does not have the expected format (the message names file and line).

    Defined here, at the bottom of the package, so that every reader (:mod:`embedlab.data.datasets`,
    :mod:`embedlab.data.wikitext`) raises the same error without importing one another.
    """


def unicode_problem(text: str) -> str | None:
    """Why ``text`` is not valid Unicode (a lone surrogate, from a JSON ``"\\ud800"`` escape or from
    undecodable bytes in a command-line argument), or None; tokenizers cannot encode such text."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        return f"lone surrogate {text[error.start]!r} at character {error.start} (not valid Unicode)"
    return None
