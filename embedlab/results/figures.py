"""Figures inside an offline HTML page: a matplotlib figure as base64 PNG, and the tag that shows it."""

from __future__ import annotations

import base64
import html
import io
import math

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
    """Plain tick labels (``10``, ``0.05``) on a log-scaled x or y axis (``axis.xaxis``), whose limits are set:
    mathtext is off (:func:`~embedlab.runtime.extras.pyplot`), so matplotlib's default log labels would print as
    code (``$\\mathdefault{10^{0}}$``). ``minor``: label the minor ticks too (a narrow range may hold no major
    one); over more than a decade only the 2s and 5s, so the labels never run into each other. ``form``: the
    labels' format."""
    from matplotlib.ticker import FuncFormatter, NullFormatter

    axis_part.set_major_formatter(form)
    if not minor:
        axis_part.set_minor_formatter(NullFormatter())
        return
    low, high = sorted(axis_part.get_view_interval())
    wide = low > 0 and high / low > 10

    def label(value: float, position: int | None = None) -> str:
        mantissa = round(value / 10 ** math.floor(math.log10(value) + 1e-9)) if value > 0 else 0
        return form.format(x=value) if not wide or mantissa in (2, 5) else ""

    axis_part.set_minor_formatter(FuncFormatter(label))
