"""Tiny randomly initialised models of every architecture the conformance matrix covers, built from configs.

Each is saved with its language-model head (masked LM or causal LM class) and MiniLM's tokenizer (a
BERT WordPiece vocabulary of 30,522 ids works for any architecture's embedding table), width 32, two
blocks: seconds to build and run.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import torch

TOKENIZER_FILES = ("vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")
VOCAB = 30522
WIDTH = 32
COMMON = dict(vocab_size=VOCAB, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64, pad_token_id=0)


def _configs() -> dict[str, tuple[object, str]]:
    """Architecture → (config, the class saved: its language-model class)."""
    import transformers as tf

    return {
        "BERT": (tf.BertConfig(hidden_size=WIDTH, max_position_embeddings=128, **COMMON), "BertForMaskedLM"),
        "RoBERTa": (tf.RobertaConfig(hidden_size=WIDTH, max_position_embeddings=130, **COMMON), "RobertaForMaskedLM"),
        "DistilBERT": (tf.DistilBertConfig(vocab_size=VOCAB, dim=WIDTH, n_layers=2, n_heads=2, hidden_dim=64, max_position_embeddings=128, pad_token_id=0),
                       "DistilBertForMaskedLM"),
        "ALBERT": (tf.AlbertConfig(hidden_size=WIDTH, embedding_size=16, max_position_embeddings=128, **COMMON), "AlbertForMaskedLM"),
        "ELECTRA": (tf.ElectraConfig(hidden_size=WIDTH, embedding_size=16, max_position_embeddings=128, **COMMON), "ElectraForMaskedLM"),
        "MPNet": (tf.MPNetConfig(hidden_size=WIDTH, max_position_embeddings=130, **COMMON), "MPNetForMaskedLM"),
        "ModernBERT": (tf.ModernBertConfig(hidden_size=WIDTH, max_position_embeddings=128, local_attention=16, global_attn_every_n_layers=2,
                                           bos_token_id=101, eos_token_id=102, cls_token_id=101, sep_token_id=102, **COMMON), "ModernBertForMaskedLM"),
        "GPT-2": (tf.GPT2Config(vocab_size=VOCAB, n_embd=WIDTH, n_layer=2, n_head=2, n_positions=128, bos_token_id=101, eos_token_id=102), "GPT2LMHeadModel"),
        "Llama": (tf.LlamaConfig(hidden_size=WIDTH, num_key_value_heads=1, max_position_embeddings=128, **COMMON), "LlamaForCausalLM"),
        "Qwen2": (tf.Qwen2Config(hidden_size=WIDTH, num_key_value_heads=1, max_position_embeddings=128, **COMMON), "Qwen2ForCausalLM"),
        "Gemma3": (tf.Gemma3TextConfig(hidden_size=WIDTH, num_key_value_heads=1, head_dim=16, max_position_embeddings=128, sliding_window=16, **COMMON),
                   "Gemma3ForCausalLM"),
    }


ARCHITECTURES = tuple(_configs())


def build_tiny(architecture: str, folder: Path, seed: int = 0) -> Path:
    """Save a tiny random ``architecture`` model (with its head) and MiniLM's tokenizer into ``folder``."""
    import transformers

    from embedlab.models import resolve_model_path

    config, class_name = _configs()[architecture]
    torch.manual_seed(seed)
    model = getattr(transformers, class_name)(config)
    with torch.no_grad():  # visible, non-trivial head vectors (default init leaves norms at 1 and biases at 0)
        for name, parameter in model.named_parameters():
            if parameter.dim() == 1:
                parameter.add_(torch.randn_like(parameter) * 0.1)
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    source = resolve_model_path("minilm")
    for name in TOKENIZER_FILES:
        if (source / name).exists():
            shutil.copy(source / name, folder / name)
    return folder
