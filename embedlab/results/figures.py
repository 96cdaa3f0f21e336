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
