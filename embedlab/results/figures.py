"""Figures inside an offline HTML page: a matplotlib figure as base64 PNG, and the tag that shows it."""

from __future__ import annotations

import base64
import html
import io

from embedlab.runtime.extras import pyplot


def png_base64(figure) -> str:
    """``figure`` as a base64 PNG (the figure is closed)."""
    plt = pyplot()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=110, bbox_inches="tight")
    plt.close(figure)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def img_tag(image: str, alt: str, klass: str = "") -> str:
    return f"<img class='{klass}' alt='{html.escape(alt)}' src='data:image/png;base64,{image}'>"


def plain_log_ticks(axis_part, minor: bool = True, form: str = "{x:.3g}") -> None:
    """Plain tick labels (``10``, ``0.05``) on a log-scaled x or y axis (``axis.xaxis``): mathtext is off
    (:func:`~embedlab.runtime.extras.pyplot`), so matplotlib's default log labels would print as code
    (``$\\mathdefault{10^{0}}$``). ``minor``: label the minor ticks too (a narrow range may hold no major one);
    ``form``: the labels' format."""
    from matplotlib.ticker import NullFormatter

    axis_part.set_major_formatter(form)
    axis_part.set_minor_formatter(form if minor else NullFormatter())
