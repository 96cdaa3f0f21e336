"""Optional dependency groups: the error that names the missing extra, and matplotlib set up for files."""

from __future__ import annotations


class MissingExtraError(ImportError):
    """An optional dependency group is not installed; the message names the extra that provides it."""

    def __init__(self, extra: str, purpose: str) -> None:
        super().__init__(f"{purpose} needs the optional '{extra}' dependencies: pip install 'embedlab[{extra}]'")
        self.extra = extra


def pyplot():
    """matplotlib's pyplot on the file-only Agg backend (plots are written, never shown), or a clear
    error naming the ``plots`` extra when matplotlib is not installed."""
    try:
        import matplotlib
    except ImportError as error:
        raise MissingExtraError("plots", "drawing plots (matplotlib)") from error
    matplotlib.use("Agg")
    matplotlib.rcParams["text.parse_math"] = False  # labels hold user text (dataset names): drawn literally, never as mathtext
    import matplotlib.pyplot as plt

    return plt
