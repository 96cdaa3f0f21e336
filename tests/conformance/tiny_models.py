"""Tiny randomly initialised models of every architecture the conformance matrix covers, built from configs.

Each is saved with its language-model head (masked LM or causal LM class) and a tiny lower-cased
WordPiece tokenizer (:func:`save_tiny_tokenizer`: a few hundred ids, the words of the test texts plus
single characters, so every text tokenizes), width 32, two blocks: a vocabulary this small keeps every
vocabulary-sized step (the neural logits, ``avg:``'s table) to milliseconds.
"""

from __future__ import annotations

import string
from pathlib import Path

import torch

SPECIALS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")  # ids 0-4
WIDTH = 32
# Words of every text the conformance tests and the pooling templates use; any other word splits into characters.
WORDS = """a man is playing guitar on the stage two dogs run through snow stock market fell sharply tuesday woman slices an onion in
kitchen plays pair of running share prices dropped steeply cutting player walked and crowd cheered like to when winter comes markets
after announcement bank she cut tomato talk about music this sentence means from paraphrase dictionary which synonym for it dogs""".split()


def _vocabulary() -> list[str]:
    characters = list(string.ascii_lowercase + string.digits + string.punctuation)
    return list(dict.fromkeys([*SPECIALS, *WORDS, *characters, *[f"##{character}" for character in characters]]))


# embedding rows: the tokenizer's ids plus a few spare rows (as real checkpoints pad their vocabulary; a
# decoder's tokenizer may add a special token of its own when loaded)
VOCAB = len(_vocabulary()) + 8
COMMON = dict(vocab_size=VOCAB, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64, pad_token_id=0)


def save_tiny_tokenizer(folder: Path) -> None:
    """A lower-cased WordPiece tokenizer over :data:`WORDS` and single characters, saved with ``tokenizer.json``."""
    from transformers import BertTokenizerFast

    folder.mkdir(parents=True, exist_ok=True)
    tokenizer = BertTokenizerFast(vocab={token: index for index, token in enumerate(_vocabulary())}, do_lower_case=True, model_max_length=128)
    tokenizer.save_pretrained(folder)


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
                                           bos_token_id=2, eos_token_id=3, cls_token_id=2, sep_token_id=3, **COMMON), "ModernBertForMaskedLM"),
        "GPT-2": (tf.GPT2Config(vocab_size=VOCAB, n_embd=WIDTH, n_layer=2, n_head=2, n_positions=128, bos_token_id=2, eos_token_id=3), "GPT2LMHeadModel"),
        "Llama": (tf.LlamaConfig(hidden_size=WIDTH, num_key_value_heads=1, max_position_embeddings=128, **COMMON), "LlamaForCausalLM"),
        "Qwen2": (tf.Qwen2Config(hidden_size=WIDTH, num_key_value_heads=1, max_position_embeddings=128, **COMMON), "Qwen2ForCausalLM"),
        "Gemma3": (tf.Gemma3TextConfig(hidden_size=WIDTH, num_key_value_heads=1, head_dim=16, max_position_embeddings=128, sliding_window=16, **COMMON),
                   "Gemma3ForCausalLM"),
    }


ARCHITECTURES = tuple(_configs())


def build_tiny(architecture: str, folder: Path, seed: int = 0) -> Path:
    """Save a tiny random ``architecture`` model (with its head) and the tiny tokenizer into ``folder``."""
    import transformers

    config, class_name = _configs()[architecture]
    torch.manual_seed(seed)
    model = getattr(transformers, class_name)(config)
    with torch.no_grad():  # visible, non-trivial head vectors (default init leaves norms at 1 and biases at 0)
        for name, parameter in model.named_parameters():
            if parameter.dim() == 1:
                parameter.add_(torch.randn_like(parameter) * 0.1)
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    save_tiny_tokenizer(folder)
    return folder
