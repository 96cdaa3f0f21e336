"""Static recipes beside each other (docs/static.md): model2vec-style distillation (each vocabulary token
alone through the model), the pooling paper's context averaging (Avg) and random token vectors, each
plain and with idf^W + z-score (the paper's Table 4 recipe for static models), plus the shipped
tokenlearn model2vec model, on STS-B, a clustering set and TREC, through `embedlab eval`.

Avg over all of WikiText-2 train is one MiniLM pass over ~2.4 M tokens per layer set (hours on this
session's shared 2-core machine); with ``--avg-paragraphs N`` the table averages over the first N
paragraphs only (tokens absent from them get their one-token-context vectors, as avg: does), is written
as a model2vec folder and evaluated as ``static:FOLDER,normalize=no``. ``--avg-paragraphs 0`` uses the
full corpus.

    nice -n 10 python scripts/static_recipes.py --db results/static.sqlite [--avg-paragraphs 512]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402

from embedlab.cli.app import main as embedlab_main  # noqa: E402
from embedlab.data.wikitext import wikitext2_paragraphs  # noqa: E402
from embedlab.models.loading import load_model  # noqa: E402
from embedlab.pooling.static import avg_tables  # noqa: E402
from embedlab.pooling.static_folders import write_static_folder  # noqa: E402

POST = "weights=idf-ref,post=zscore"
TASKS = "sts:stsb,clustering:tweet,classification:trec"


def avg_folder(paragraphs: int, out: Path) -> Path:
    """The last-layer Avg table of MiniLM over the first ``paragraphs`` WikiText-2 train paragraphs, as a model2vec folder."""
    model = load_model("minilm")
    contexts = wikitext2_paragraphs("train", unk_token=model.tokenizer.unk_token)
    tables = avg_tables(model, contexts[:paragraphs] if paragraphs else contexts, show_progress_bar=True)
    if not (out / "model.safetensors").exists():
        write_static_folder(out, np.asarray(tables[model.num_layers + 1]), model.tokenizer.backend_tokenizer.to_str(),
                            {"model_type": "model2vec", "normalize": False, "max_length": None,
                             "embedlab_recipe": f"avg:minilm (last layer) over the first {paragraphs or 'all'} WikiText-2 train paragraphs"})
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", default="results/static.sqlite")
    parser.add_argument("--avg-paragraphs", type=int, default=512)
    parser.add_argument("--folder", type=Path, default=Path("results/static_avg_minilm"))
    args = parser.parse_args()
    folder = avg_folder(args.avg_paragraphs, args.folder)
    specs = [
        "random:minilm,special=exclude", f"random:minilm,special=exclude,{POST}",
        "static:tokenlearn", f"static:tokenlearn,{POST}",
        f"static:{folder},normalize=no", f"static:{folder},normalize=no,{POST}",
        "distil:minilm,special=exclude", f"distil:minilm,special=exclude,{POST}",
    ]
    return embedlab_main(["eval", *specs, "--tasks", TASKS, "--db", args.db, "--format", "markdown"])


if __name__ == "__main__":
    raise SystemExit(main())
