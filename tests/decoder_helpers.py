"""Tiny randomly initialised decoder LLMs (GPT-2, Llama) with a small byte-level BPE tokenizer trained here.

Shared by the decoder tests of the token stage, pooling, matching and the harness: nothing is downloaded,
and each folder is an ordinary Hugging Face model folder, as a user's own decoder would be.
"""

from __future__ import annotations

from pathlib import Path

import torch

CORPUS = [
    "A man is playing a guitar on the stage.", "The capital of France is Paris.", "A dog runs across the green field.",
    "Two women are talking about the weather.", "The children read books in the library every morning.",
    "Stock markets fell sharply after the announcement.", "She cooked dinner for her family.",
] * 3


def tiny_tokenizer(add_bos: bool):
    """A byte-level BPE tokenizer (vocabulary ≈ 400) with BOS/EOS/PAD and no mask token; ``add_bos`` makes it
    put its BOS before every sequence, as Llama-2's and Gemma's do (GPT-2's and SmolLM2's add nothing)."""
    from tokenizers import ByteLevelBPETokenizer
    from tokenizers.processors import TemplateProcessing
    from transformers import PreTrainedTokenizerFast

    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(CORPUS, vocab_size=400, min_frequency=1, special_tokens=["<pad>", "<s>", "</s>"], show_progress=False)
    if add_bos:
        bpe.post_processor = TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 1)])
    return PreTrainedTokenizerFast(tokenizer_object=bpe, bos_token="<s>", eos_token="</s>", pad_token="<pad>")


def tiny_decoder(folder: Path, architecture: str = "gpt2", add_bos: bool = False, seed: int = 0, max_positions: int = 64) -> Path:
    """A tiny random GPT-2 or Llama (2 blocks, width 32) saved to ``folder`` with :func:`tiny_tokenizer`."""
    from transformers import GPT2Config, GPT2Model, LlamaConfig, LlamaModel

    tokenizer = tiny_tokenizer(add_bos)
    torch.manual_seed(seed)
    if architecture == "gpt2":
        config = GPT2Config(vocab_size=len(tokenizer), n_embd=32, n_layer=2, n_head=2, n_positions=max_positions,
                            bos_token_id=1, eos_token_id=2, pad_token_id=0)
        model = GPT2Model(config)
    elif architecture == "llama":
        config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                             num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=max_positions,
                             bos_token_id=1, eos_token_id=2, pad_token_id=0)
        model = LlamaModel(config)
    else:
        raise ValueError(architecture)
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    tokenizer.model_max_length = max_positions
    tokenizer.save_pretrained(folder)
    return folder


def _permute_for_gguf(weight, heads: int):
    """llama.cpp's order of a query/key projection's rows (rotary halves interleaved per head), which
    ``transformers`` undoes when it reads a llama GGUF."""
    return weight.reshape(heads, 2, weight.shape[0] // heads // 2, *weight.shape[1:]).swapaxes(1, 2).reshape(weight.shape)


def tiny_gguf(path: Path, seed: int = 0, drop: tuple[str, ...] = (), output_head: bool = False) -> tuple[Path, Path]:
    """A tiny random Llama as a float32 GGUF file at ``path`` (byte-level BPE vocabulary, llama.cpp tensor
    names and key/value layout), and the Hugging Face folder it was written from (beside it). ``drop``: GGUF
    tensor names left out (a damaged file); ``output_head``: an untied ``output.weight`` of its own."""
    import gguf
    from safetensors.numpy import load_file

    folder = tiny_decoder(path.parent / f"{path.stem}-hf", "llama", seed=seed)
    import json

    config = json.loads((folder / "config.json").read_text())
    tokenizer = json.loads((folder / "tokenizer.json").read_text())
    vocabulary = sorted(tokenizer["model"]["vocab"].items(), key=lambda item: item[1])
    merges = [merge if isinstance(merge, str) else " ".join(merge) for merge in tokenizer["model"]["merges"]]
    weights = load_file(str(folder / "model.safetensors"))
    heads, kv_heads = config["num_attention_heads"], config["num_key_value_heads"]

    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_context_length(config["max_position_embeddings"])
    writer.add_embedding_length(config["hidden_size"])
    writer.add_block_count(config["num_hidden_layers"])
    writer.add_feed_forward_length(config["intermediate_size"])
    writer.add_rope_dimension_count(config["hidden_size"] // heads)
    writer.add_rope_freq_base(float(config.get("rope_theta") or config.get("rope_parameters", {}).get("rope_theta", 10000.0)))
    writer.add_head_count(heads)
    writer.add_head_count_kv(kv_heads)
    writer.add_layer_norm_rms_eps(config["rms_norm_eps"])
    writer.add_vocab_size(len(vocabulary))
    writer.add_tokenizer_model("gpt2")
    writer.add_token_list([token for token, _ in vocabulary])
    writer.add_token_types([3 if token in ("<pad>", "<s>", "</s>") else 1 for token, _ in vocabulary])
    writer.add_token_merges(merges)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_pad_token_id(0)
    writer.add_add_bos_token(False)
    names = {"self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
             "self_attn.o_proj": "attn_output", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
             "mlp.down_proj": "ffn_down", "input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm"}
    tensors = {"token_embd.weight": weights["embed_tokens.weight"], "output_norm.weight": weights["norm.weight"]}
    if output_head:
        tensors["output.weight"] = weights["embed_tokens.weight"][::-1].copy() * 0.5  # differs from the embeddings
    for block in range(config["num_hidden_layers"]):
        for hf_name, gguf_name in names.items():
            weight = weights[f"layers.{block}.{hf_name}.weight"]
            if gguf_name == "attn_q":
                weight = _permute_for_gguf(weight, heads)
            elif gguf_name == "attn_k":
                weight = _permute_for_gguf(weight, kv_heads)
            tensors[f"blk.{block}.{gguf_name}.weight"] = weight
    for name, tensor in tensors.items():
        if name not in drop:
            writer.add_tensor(name, tensor)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path, folder
