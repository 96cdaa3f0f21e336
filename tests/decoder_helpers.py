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
