"""The conformance matrix: every architecture (tiny random models) × every method family.

Each cell either runs — vectors (or pair scores) that are finite, deterministic (two cold runs in one
process agree bit for bit: same batches, kernels and threads) and batch-independent (each text alone gives
cosine ≥ 0.99999 with the batch, pair scores within 1e-5) and, for vectors, of the width the method reports — or refuses with one clear message
raised by embedlab itself. Anything else (an exception raised inside a library, a wrong width, a
non-finite value) is a broken cell.

The table in docs/models.md is this module's output: ``EMBEDLAB_WRITE_MATRIX=1 pytest tests/conformance``
rewrites each architecture's row; without the variable the tests compare the committed rows.
"""

from __future__ import annotations

import contextlib
import io
import re
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

import embedlab
from embedlab.runtime.memo import clear
from tolerance import UNIT_ATOL, scaled_atol

TEXTS = [
    "A man is playing a guitar on the stage.",
    "Two dogs run through the snow.",
    "The stock market fell sharply on Tuesday.",
    "A woman slices an onion in the kitchen.",
]
# ALIGN-SIM criterion 1 on a handful of texts: paraphrase pairs against the same sentences deranged.
PARAPHRASES = [
    ("A man is playing a guitar on the stage.", "On stage, a man plays the guitar."),
    ("Two dogs run through the snow.", "A pair of dogs is running in the snow."),
    ("The stock market fell sharply on Tuesday.", "Share prices dropped steeply on Tuesday."),
    ("A woman slices an onion in the kitchen.", "In the kitchen a woman is cutting an onion."),
]
TINY_CORPUS = [
    "The guitar player walked on the stage and the crowd cheered.",
    "Dogs like to run in the snow when winter comes.",
    "Markets fell on Tuesday after the announcement of the bank.",
    "She cut the onion and the tomato in the kitchen.",
    "A man and a woman talk about music, snow and prices.",
]
EMBEDLAB_ROOT = Path(embedlab.__file__).resolve().parent


@dataclass(frozen=True)
class Outcome:
    status: str  # "runs", "refuses" or "broken"
    detail: str  # width (runs), the message (refuses), what went wrong (broken)

    def cell(self) -> str:
        return {"runs": f"✓ {self.detail}", "refuses": "✗", "broken": "BROKEN"}[self.status]


class CellFailure(AssertionError):
    """A cell that ran but broke a property (width, finiteness, determinism, batch independence)."""


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(axis=1) / np.maximum(np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1), 1e-30)


def _cold(cache: Path, compute: Callable[[], object]):
    """``compute`` with every memo forgotten and an empty cache folder: nothing is read back."""
    import os

    previous = os.environ.get("EMBEDLAB_CACHE")
    os.environ["EMBEDLAB_CACHE"] = str(cache)
    clear()
    try:
        return compute()
    finally:
        clear()
        if previous is None:
            del os.environ["EMBEDLAB_CACHE"]
        else:
            os.environ["EMBEDLAB_CACHE"] = previous


def vector_cell(spec: str, work: Path) -> str:
    """Run a vector method three times cold (batch, batch again, one text at a time); return its width."""
    def batch() -> tuple[np.ndarray, int]:
        method = embedlab.load(spec)
        return method.encode(TEXTS), int(method.dimension)

    first, width = _cold(work / "first", batch)
    second, _ = _cold(work / "second", batch)
    alone = _cold(work / "alone", lambda: np.vstack([embedlab.load(spec).encode([text]) for text in TEXTS]))
    if first.shape != (len(TEXTS), width) or first.dtype != np.float32:
        raise CellFailure(f"shape {first.shape} {first.dtype}, the method reports width {width}")
    if not np.isfinite(first).all():
        raise CellFailure("non-finite values")
    if not np.array_equal(first, second):  # bit-identical by construction: the same call in the same process
        raise CellFailure(f"two cold runs differ by {np.abs(first - second).max():.2e}")
    if _cosines(first, alone).min() < 0.99999:
        raise CellFailure(f"batch-dependent: cosine {_cosines(first, alone).min():.6f} between a text alone and in the batch")
    return str(width)


def pair_cell(spec: str, work: Path) -> str:
    """Run a pairwise method (token matching) three times cold on the paraphrase pairs."""
    def scores(pairs) -> np.ndarray:
        return np.asarray(embedlab.load(spec).similarity_pairs(pairs), dtype=np.float64)

    first = _cold(work / "first", lambda: scores(PARAPHRASES))
    second = _cold(work / "second", lambda: scores(PARAPHRASES))
    alone = _cold(work / "alone", lambda: np.concatenate([scores([pair]) for pair in PARAPHRASES]))
    if first.shape != (len(PARAPHRASES),) or not np.isfinite(first).all():
        raise CellFailure(f"scores {first}")
    # two cold runs: bit-identical by construction; one pair at a time: other batches, float32 rounding
    if not np.array_equal(first, second) or np.abs(first - alone).max() > UNIT_ATOL:
        raise CellFailure("pair scores not deterministic or batch-dependent")
    return "score"


def alignsim_cell(spec: str, work: Path) -> str:
    """ALIGN-SIM criterion 1 (paraphrases vs random pairs: similarity and NED) with ``spec``'s vectors."""
    from embedlab.evaluation.alignsim import metrics
    from embedlab.evaluation.scoring import cosines

    def criterion_1() -> np.ndarray:
        method = embedlab.load(spec)
        originals = method.encode([first for first, _ in PARAPHRASES])
        paraphrases = method.encode([second for _, second in PARAPHRASES])
        random = np.roll(paraphrases, 1, axis=0)  # a derangement: each sentence against another's paraphrase
        return np.array([
            cosines(originals, paraphrases).mean() - cosines(originals, random).mean(),
            metrics.ned(originals, paraphrases).mean() - metrics.ned(originals, random).mean(),
        ])

    first = _cold(work / "first", criterion_1)
    second = _cold(work / "second", criterion_1)
    if not np.isfinite(first).all() or not np.array_equal(first, second):  # bit-identical: the same call twice
        raise CellFailure(f"criterion 1 values {first} / {second}")
    return "c1"


def embed_out_cell(spec: str, work: Path) -> str:
    """``embedlab embed SPEC --input texts.txt --out FOLDER``: the shards hold the method's own vectors."""
    from embedlab.cli.app import main
    from embedlab.engines.shards import read_shards

    source = work / "texts.txt"
    source.parent.mkdir(parents=True, exist_ok=True)
    source.write_text("\n".join(TEXTS) + "\n")
    folder = work / "shards"
    errors = io.StringIO()

    def run() -> int:
        with contextlib.redirect_stderr(errors):
            try:
                return main(["embed", spec, "--input", str(source), "--out", str(folder), "--shard-size", "2"])
            except SystemExit as exit_:  # argparse's usage errors
                return int(exit_.code or 0)

    status = _cold(work / "cache", run)
    if status != 0:
        raise Refusal(errors.getvalue().strip().splitlines()[-1] if errors.getvalue().strip() else f"exit status {status}")
    ids, vectors = read_shards(folder)
    expected = _cold(work / "direct", lambda: embedlab.load(spec).encode(TEXTS))
    # shards of two vs one encode call: other batches, float32 rounding at the vectors' scale
    if vectors.shape != expected.shape or np.abs(vectors - expected).max() > scaled_atol(expected):
        raise CellFailure(f"shards {vectors.shape} differ from encode {expected.shape}")
    return str(vectors.shape[1])


class Refusal(Exception):
    """A refusal reported by the CLI as its one error line (the CLI catches the exception itself)."""


# column → (how the cell runs, the spec it runs, given the model folder)
COLUMNS: dict[str, tuple[Callable[[str, Path], str], Callable[[str], str]]] = {
    "mean": (vector_cell, lambda model: model),
    "cls": (vector_cell, lambda model: f"{model}:pool=cls"),
    "last": (vector_cell, lambda model: f"{model}:pool=last"),
    **{f"T{index}": (vector_cell, lambda model, index=index: f"{model}:template=T{index},pool=mask") for index in range(5)},
    # the templates for models without a mask token (decoder prompting; any model can take them)
    "PromptEOL": (vector_cell, lambda model: f"{model}:template=prompteol,pool=last"),
    "echo": (vector_cell, lambda model: f"{model}:template=echo,pool=mask"),
    "random:": (vector_cell, lambda model: f"random:{model}"),
    "avg:": (vector_cell, lambda model: f"avg:{model}"),
    "neural: exact": (vector_cell, lambda model: f"neural:{model},epochs=3"),
    "neural: candidates": (vector_cell, lambda model: f"neural:{model},epochs=3,softmax=candidates,candidates=16"),
    "match:": (pair_cell, lambda model: f"match:{model},weights=none"),
    "ALIGN-SIM c1": (alignsim_cell, lambda model: model),
    "embed --out": (embed_out_cell, lambda model: model),
}


def _message(error: BaseException, model: str, work: Path) -> str:
    text = " ".join(str(error).split())
    return text.replace(model, "MODEL").replace(str(work), "WORK")


def _raised_by_embedlab(error: BaseException) -> bool:
    """Whether ``error`` comes from an explicit ``raise`` in embedlab's own code (a refusal), not from a
    library or an operation that failed inside embedlab (a numpy broadcast, an index out of range)."""
    frames = traceback.extract_tb(error.__traceback__)
    if not frames or not Path(frames[-1].filename).resolve().is_relative_to(EMBEDLAB_ROOT):
        return False
    return (frames[-1].line or "").lstrip().startswith("raise")


def run_cell(column: str, model: str, work: Path) -> Outcome:
    runner, spec_of = COLUMNS[column]
    try:
        return Outcome("runs", runner(spec_of(model), work))
    except CellFailure as failure:
        return Outcome("broken", str(failure))
    except Refusal as refusal:
        return Outcome("refuses", _message(refusal, model, work).removeprefix("embedlab: error: ").removeprefix("error: "))
    except Exception as error:  # noqa: BLE001 - classified below: embedlab's own message, or a traceback from a library
        if _raised_by_embedlab(error):
            return Outcome("refuses", _message(error, model, work))
        return Outcome("broken", f"{type(error).__name__} inside {traceback.extract_tb(error.__traceback__)[-1].filename}: {_message(error, model, work)}")


def run_row(model: str, work: Path) -> dict[str, Outcome]:
    """Every column for one model folder (``work``: a private scratch folder)."""
    return {column: run_cell(column, model, work / re.sub(r"\W+", "-", column)) for column in COLUMNS}


# --- the table in docs/models.md ----------------------------------------------------------------------

DOC = Path(__file__).resolve().parents[2] / "docs" / "models.md"
TABLE_START, TABLE_END = "<!-- conformance-matrix:start -->", "<!-- conformance-matrix:end -->"


def row_lines(architecture: str, row: dict[str, Outcome]) -> tuple[str, str]:
    """The architecture's table row and its line in the refusals list."""
    cells = " | ".join(outcome.cell() for outcome in row.values())
    refusals = "; ".join(f"{column}: {outcome.detail}" for column, outcome in row.items() if outcome.status == "refuses") or "none"
    return f"| {architecture} | {cells} |", f"- **{architecture}** — {refusals}"


def documented_lines(architecture: str) -> tuple[str | None, str | None]:
    """The committed row and refusals line of ``architecture`` in docs/models.md (None where missing)."""
    text = DOC.read_text(encoding="utf-8") if DOC.exists() else ""
    row = next((line for line in text.splitlines() if line.startswith(f"| {architecture} |")), None)
    refusals = next((line for line in text.splitlines() if line.startswith(f"- **{architecture}** — ")), None)
    return row, refusals


def write_row(architecture: str, row: dict[str, Outcome], order: tuple[str, ...]) -> None:
    """Rewrite the architecture's lines of the table (under a lock: test workers write rows concurrently)."""
    from filelock import FileLock

    with FileLock(str(DOC) + ".lock"):
        text = DOC.read_text(encoding="utf-8")
        head, rest = text.split(TABLE_START, 1)
        _, tail = rest.split(TABLE_END, 1)
        old_rows = {line.split(" | ")[0][2:]: line for line in _between(text).splitlines() if line.startswith("| ") and not line.startswith("| architecture")}
        old_refusals = {line[4:].split("** — ")[0]: line for line in _between(text).splitlines() if line.startswith("- **")}
        new_row, new_refusals = row_lines(architecture, row)
        old_rows[architecture], old_refusals[architecture] = new_row, new_refusals
        header = "| architecture | " + " | ".join(COLUMNS) + " |\n|" + "---|" * (len(COLUMNS) + 1)
        rows = "\n".join(old_rows[name] for name in order if name in old_rows)
        notes = "\n".join(old_refusals[name] for name in order if name in old_refusals)
        body = f"\n{header}\n{rows}\n\nRefusals (✗), each one embedlab error message (MODEL = the model folder):\n\n{notes}\n"
        DOC.write_text(head + TABLE_START + body + TABLE_END + tail, encoding="utf-8")


def _between(text: str) -> str:
    return text.split(TABLE_START, 1)[1].split(TABLE_END, 1)[0] if TABLE_START in text else ""
