"""embedlab.results.figures.plain_log_ticks: a log axis labelled with plain numbers, never mathtext source, and
over more than a decade only at the 2s and 5s so that the labels never run into each other."""

from __future__ import annotations

from embedlab.results.figures import plain_log_ticks
from embedlab.runtime.extras import pyplot


def _labels(low: float, high: float, **options) -> list[str]:
    plt = pyplot()
    figure, axis = plt.subplots()
    axis.set_xscale("log")
    axis.set_xlim(low, high)
    plain_log_ticks(axis.xaxis, **options)
    figure.canvas.draw()
    ticks = [*zip(axis.get_xticks(), axis.get_xticklabels()), *zip(axis.get_xticks(minor=True), axis.get_xticklabels(minor=True))]
    labels = [label.get_text() for where, label in ticks if low <= where <= high and label.get_text()]  # those shown
    plt.close(figure)
    return labels


def test_log_ticks_read_as_plain_numbers() -> None:
    assert sorted(_labels(0.025, 0.3), key=float) == ["0.05", "0.1", "0.2"]  # over a decade: 2s and 5s
    assert sorted(_labels(0.031, 0.062), key=float) == ["0.04", "0.05", "0.06"]  # within one: every minor tick
    assert _labels(40, 2000, minor=False, form="{x:,.0f}") == ["100", "1,000"]
