"""The report in a real browser: a small real results database (the default model on slices of the
shared data, every kind of section: bars, a layer curve, ALIGN-SIM tables and ε-histograms), written by
``embedlab report`` and opened in headless Chromium (Debian package ``chromium``), which must load every
image and log nothing to its console.

The report itself holds no script; the test adds one that records, once the page has loaded, each
image's ``naturalWidth`` and any error event into the DOM, and reads it back with ``--dump-dom``.
Skipped when Chromium is missing, except in CI (``$CI`` set), where its absence is a failure.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from fakes import isolated_eval_cache  # noqa: F401 (autouse fixture)

from embedlab.cli.app import main

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
VIEWPORT = 760  # CSS pixels: a laptop window beside an editor, narrower than the five-method tables' natural width
METHODS = ("minilm", "minilm:post=normalize", "minilm:layers=1", "minilm:layers=2", "minilm:layers=3")

# Runs in the page before anything else: collects error events, then the image states at load time.
PROBE = """<script>
window.__errors = [];
window.addEventListener("error", (event) => window.__errors.push(String(event.message || event.type)), true);
window.addEventListener("load", () => {
  const images = Array.from(document.images);
  document.documentElement.setAttribute("data-probe", JSON.stringify({
    images: images.length,
    broken: images.filter((image) => !image.complete || image.naturalWidth === 0).map((image) => image.alt),
    loaded: images.filter((image) => image.complete && image.naturalWidth > 0).map((image) => image.alt),
    errors: window.__errors,
    viewport: document.documentElement.clientWidth,
    page_width: document.documentElement.scrollWidth,
    table_right: Math.max(...Array.from(document.querySelectorAll("table")).map((table) => table.getBoundingClientRect().right)),
  }));
});
</script>"""


def chromium_or_skip() -> str:
    if CHROMIUM:
        return CHROMIUM
    if os.environ.get("CI"):
        pytest.fail("chromium is not installed; CI installs it (scripts/run.sh test set-up: apt-get install chromium)")
    pytest.skip("chromium is not installed (apt-get install chromium); CI runs this test")


def build_report(folder: Path, sts_test_rows) -> Path:
    """A real results database and its report: STS and clustering slices for five specs (three sweep
    ``layers=``), ALIGN-SIM criterion 1 on MRPC for two."""
    from embedlab.data.senteval import trec

    pairs = folder / "stsb_slice.tsv"
    pairs.write_text("".join(f"{a}\t{b}\t{gold}\n" for gold, a, b in sts_test_rows[:80]))
    questions = trec("test")
    labelled = folder / "trec_slice.tsv"
    labelled.write_text("".join(f"{questions.label_names[label]}\t{text}\n"
                                for text, label in list(zip(questions.texts, questions.labels.tolist()))[:150]))
    database, page = folder / "results.sqlite", folder / "report.html"
    assert main(["eval", *METHODS, "--tasks", f"sts:@{pairs},clustering:@{labelled}", "--db", str(database), "--quiet"]) == 0
    assert main(["alignsim", *METHODS[:2], "--criteria", "1", "--datasets", "mrpc", "--pairs-per-label", "12",
                 "--db", str(database), "--out", str(folder / "alignsim"), "--quiet"]) == 0
    assert main(["report", "--db", str(database), "--out", str(page), "--title", "embedlab report: minilm variants"]) == 0
    return page


def open_in_chromium(page: Path, browser: str) -> tuple[dict, str]:
    """(the probe's findings, Chromium's log) for ``page`` with the probe script added."""
    probed = page.with_name("probed.html")
    probed.write_text(page.read_text(encoding="utf-8").replace("<head>", "<head>" + PROBE, 1), encoding="utf-8")
    finished = subprocess.run(
        [browser, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--enable-logging=stderr", "--v=0",
         "--virtual-time-budget=15000", f"--window-size={VIEWPORT},900", f"--user-data-dir={page.parent / 'chromium-profile'}", "--dump-dom", probed.as_uri()],
        capture_output=True, text=True, timeout=180)
    assert finished.returncode == 0, finished.stderr[-2000:]
    found = re.search(r'data-probe="([^"]*)"', finished.stdout)
    assert found, f"the page never finished loading:\n{finished.stdout[:500]}"
    return json.loads(found.group(1).replace("&quot;", '"').replace("&amp;", "&")), finished.stderr


@pytest.mark.slow
def test_report_loads_every_image_without_console_errors(tmp_path, sts_test_rows):
    browser = chromium_or_skip()
    page = build_report(tmp_path, sts_test_rows)
    text = page.read_text(encoding="utf-8")
    assert "<script" not in text and "http://" not in text and "https://" not in text  # one offline file
    for section in ("<h2>sts</h2>", "<h2>clustering</h2>", "<h2>alignsim</h2>", "sts spearman by layer",
                    "<h3>Criterion 1: semantic distinction", "ε-histograms"):
        assert section in text
    probe, log = open_in_chromium(page, browser)
    assert probe["images"] == text.count("data:image/png;base64,") >= 6  # bars and layer curves of 2 tasks, 2 histograms
    assert probe["broken"] == [] and probe["errors"] == []
    # the answer to "is it better, and at what cost": per task, the paired difference chart and the cost scatter
    for task in ("sts", "clustering"):
        assert any(alt.startswith(f"{task} ") and "difference from the best with paired 95% intervals" in alt
                   for alt in probe["loaded"]), task
        assert any(alt.startswith(f"{task} ") and "quality against cost, Pareto front" in alt for alt in probe["loaded"]), task
    # every table wraps within the window: nothing runs off the page, no sideways scrolling
    assert probe["viewport"] <= VIEWPORT and probe["table_right"] <= probe["viewport"]
    assert probe["page_width"] <= probe["viewport"]
    console = [line for line in log.splitlines() if "CONSOLE" in line]
    assert console == []
