"""A tiny BERT saved with or without its masked-LM head: shared by the head-loading and head-training tests."""

from __future__ import annotations

import shutil
from pathlib import Path

import torch

TOKENIZER_FILES = ("vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")


def tiny_bert(folder: Path, with_head: bool, seed: int = 0):
    """A tiny randomly initialised BERT (MiniLM's tokenizer) saved with or without its masked-LM head."""
    from transformers import BertConfig, BertForMaskedLM

    from embedlab.models.loading import resolve_model_path

    torch.manual_seed(seed)
    config = BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64, max_position_embeddings=128)
    model = BertForMaskedLM(config)
    with torch.no_grad():  # make the head clearly not BERT's initialisation
        for name, parameter in model.named_parameters():
            if name.startswith("cls.predictions.transform.") or name == "cls.predictions.bias":
                parameter.uniform_(-0.5, 0.5)
    folder.mkdir(parents=True, exist_ok=True)
    if with_head:
        model.save_pretrained(folder)
    else:
        model.bert.save_pretrained(folder)
    source = resolve_model_path("minilm")
    for name in TOKENIZER_FILES:
        if (source / name).exists():
            shutil.copy(source / name, folder / name)
    return model
