"""The docs name what exists and their examples run: every dotted ``embedlab.…`` name in README.md and docs/*.md
resolves (a module, or an attribute of one), and every Python block of README.md runs as written on tiny
inputs, with ``random:minilm`` (the model's tokenizer, random token vectors: no transformer run) wherever the
model does not matter. tests/test_readme_tools.py checks the values of the "other tools" blocks against
the tools themselves; this test keeps a moved name or an example that no longer runs from staying in the docs."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import numpy as np
import pytest
from fakes import isolated_eval_cache  # noqa: F401 (autouse fixture)

from embedlab.cli.app import main

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCKS = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(encoding="utf-8"), flags=re.DOTALL)
# a dotted name not inside a path or a longer word (docs/x.md, foo.embedlab.y)
DOTTED = re.compile(r"(?<![\w./-])embedlab(?:\.[A-Za-z_]\w*)+")
# what a block needs but cannot have here
NEEDS_THE_HUB = "mteb.get_tasks"
# the names the README's scikit-learn block takes as given: a tiny labelled split
INPUTS = {"train_texts": ["a red car", "a blue car", "a fast car", "a cat sleeps", "a dog barks", "a bird sings"],
          "train_labels": [0, 0, 0, 1, 1, 1], "test_texts": ["a green car", "a cow moos"], "test_labels": [0, 1]}


def resolve(name: str) -> object:
    """The object a dotted name names: the longest importable module prefix, then attributes."""
    parts = name.split(".")
    for split in range(len(parts), 0, -1):
        try:
            found = importlib.import_module(".".join(parts[:split]))
        except ModuleNotFoundError:
            continue
        for attribute in parts[split:]:
            found = getattr(found, attribute)
        return found
    raise ModuleNotFoundError(name)


def test_every_dotted_embedlab_name_in_the_docs_exists():
    names = {match.group(0): path.name for path in DOCS for match in DOTTED.finditer(path.read_text(encoding="utf-8"))}
    assert len(names) > 20  # the pattern finds the docs' names (36 when written)
    missing = []
    for name, where in sorted(names.items()):
        try:
            resolve(name)
        except (ImportError, AttributeError) as error:
            missing.append(f"{where}: {name} ({error})")
    assert not missing, "the docs name what does not exist:\n" + "\n".join(missing)


def cheap(block: str) -> str:
    """``block`` with every MiniLM spec (``"minilm"``, ``"minilm:OPTIONS"``, ``"st:minilm"``, the ``best-sts``
    preset) as the same spec on random token vectors (without T4's template, which random vectors do not take)."""
    block = block.replace('"best-sts"', '"random:minilm,weights=idf-target,post=quantile-u"')
    block = block.replace('"st:minilm"', '"random:minilm"').replace('"minilm:', '"random:minilm,')
    return block.replace('"minilm"', '"random:minilm"')


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_every_python_block_of_the_readme_runs(index, tmp_path, monkeypatch):
    block = BLOCKS[index]
    if NEEDS_THE_HUB in block:
        pytest.skip("MTEB's task data comes from the Hugging Face hub; tests run offline (tests/interop/test_mteb.py "
                    "runs the adapter on local data)")
    for module in re.findall(r"^(?:import|from) (\w+)", block, flags=re.MULTILINE):
        pytest.importorskip(module, reason=f"the block needs the optional {module!r}")
    monkeypatch.chdir(tmp_path)
    if "vectors.npy" in block:  # the files the README's CLI tour writes
        Path("texts.txt").write_text("A man plays a guitar.\nA woman reads.\nStocks fell today.\nA dog runs.\n", encoding="utf-8")
        for output in ("vectors.npy", "vectors.parquet"):
            assert main(["embed", "random:minilm", "--input", "texts.txt", "--out", output, "--quiet"]) == 0
    names = dict(INPUTS)
    exec(compile(cheap(block), f"README.md python block {index}", "exec"), names)
    if "best_sts" in names:  # the Python tour: what its comments say
        assert (names["vectors"].dtype, names["vectors"].shape) == (np.float32, (2, 384))
        (score,) = names["best_sts"].similarity_pairs([("A man plays a guitar.", "Someone plays an instrument.")])
        assert -1 <= score <= 1 and score != 0  # fitted on the sample, not on the pair itself (which gave 0.0)
        assert names["zscored"].encode(names["sample"]).shape == (12, 384)
    if "nearest_ids" in names:
        assert len(names["nearest_ids"]) == 3 and set(names["nearest_ids"]) <= {1, 2, 3, 4}
