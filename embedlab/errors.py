"""embedlab's own error types: the command line decides whose fault a failure was from these, never from
Python's built-in exception classes (an internal ``KeyError`` is a bug, not the user's input).

:class:`InputError` is raised where input is judged (a method spec, a file and its line, a text and its
index, an option or an environment variable) and names what is wrong and where; ``embedlab`` exits 2 on it.
Each class also derives from the built-in class such code raised before (``ValueError``, ``TypeError``,
``LookupError``), so library callers that catch those keep working.
"""

from __future__ import annotations


class EmbedlabError(Exception):
    """An error embedlab raises on purpose."""


class InputError(EmbedlabError, ValueError):
    """Input the user can fix: a bad value, file, option or combination of options."""


class InputTypeError(InputError, TypeError):
    """Input of the wrong type (a single string where a list of texts belongs, a pairwise method where
    vectors are needed)."""


class UnknownNameError(InputError, LookupError):
    """A name that names nothing here (a model, a cache kind)."""
