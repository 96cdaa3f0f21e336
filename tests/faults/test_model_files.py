"""A model file is input like a text file (issue 49, items 1 and 2): GGUF files, transformers folders and
model2vec folders that parse but are wrong are refused with one error naming the file and the tensor or
key; the converted GGUF folder is a checksummed cache entry (verified on load, converted again with a
warning when damaged or deleted, removed by ``cache clear``); a cache that cannot take it gets a temporary
folder and one warning; a GGUF's own untied ``output.weight`` is kept. Every file is tiny and built here."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest
import torch
from safetensors.numpy import load_file, save_file

from decoder_helpers import tiny_gguf, tiny_tokenizer
from embedlab.models.checks import ModelFileError
from embedlab.models.gguf import convert_gguf, converted_gguf_folder
from embedlab.models.loading import load_model
from embedlab.pooling.static_folders import StaticModelError, load_static_model
from embedlab.runtime.cache.budget import clear_cache
from embedlab.runtime.memo import clear

pytest.importorskip("gguf")
pytest.importorskip("accelerate")


@pytest.fixture(scope="module")
def gguf_files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("gguf")
    return {"whole": tiny_gguf(folder / "whole" / "tiny.gguf")[0],
            "missing": tiny_gguf(folder / "missing" / "tiny.gguf", drop=("blk.1.attn_q.weight",))[0],
            "head": tiny_gguf(folder / "head" / "tiny.gguf", output_head=True)[0]}


def test_a_gguf_missing_a_tensor_is_refused_naming_it(gguf_files, isolated_cache, capfd):
    with pytest.raises(ModelFileError, match=r"tiny.gguf lacks 1 tensor.*layers\.1\.self_attn\.q_proj\.weight.*random"):
        convert_gguf(gguf_files["missing"], "tiny")
    assert not converted_gguf_folder(gguf_files["missing"]).exists()  # nothing random was cached
    error = capfd.readouterr().err
    assert "MISSING" not in error and "de-quantizing" not in error  # the one error: no report, no bar off a terminal


def test_a_damaged_or_deleted_conversion_is_converted_again_with_a_warning(gguf_files, isolated_cache):
    path = gguf_files["whole"]
    folder = convert_gguf(path, "tiny")
    weights = load_file(str(folder / "model.safetensors"))
    (folder / "model.safetensors").write_bytes((folder / "model.safetensors").read_bytes()[:1000])  # truncated
    with pytest.warns(RuntimeWarning, match="does not match its checksum"):
        assert convert_gguf(path, "tiny") == folder
    (folder / "model.safetensors").unlink()  # deleted, .complete kept
    with pytest.warns(RuntimeWarning, match="missing its weights"):
        convert_gguf(path, "tiny")
    assert clear_cache("models") > 0  # `embedlab cache clear` removes the conversion
    assert not (folder / "model.safetensors").exists()
    with pytest.warns(RuntimeWarning, match="incomplete"):
        convert_gguf(path, "tiny")
    again = load_file(str(folder / "model.safetensors"))
    assert sorted(again) == sorted(weights)
    for name, tensor in weights.items():
        np.testing.assert_array_equal(again[name], tensor, err_msg=name)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        convert_gguf(path, "tiny")  # whole again: no warning, nothing converted


def test_a_ggufs_own_output_head_is_kept(gguf_files, isolated_cache):
    import gguf

    path = gguf_files["head"]
    folder = convert_gguf(path, "tiny")
    head = next(tensor for tensor in gguf.GGUFReader(str(path)).tensors if tensor.name == "output.weight")
    converted = load_file(str(folder / "model.safetensors"))
    np.testing.assert_array_equal(converted["lm_head.weight"], np.asarray(head.data).reshape(converted["lm_head.weight"].shape))
    assert json.loads((folder / "config.json").read_text())["tie_word_embeddings"] is False


def test_an_unwritable_cache_converts_into_a_temporary_folder_with_one_warning(gguf_files, tmp_path, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("EMBEDLAB_CACHE", str(blocker / "cache"))  # every write into it fails, even for root
    clear()
    with pytest.warns(RuntimeWarning, match="not writable") as caught:
        folder = convert_gguf(gguf_files["whole"], "tiny")
        assert convert_gguf(gguf_files["whole"], "tiny") == folder
    assert len([w for w in caught if "not writable" in str(w.message)]) == 1
    assert (folder / "model.safetensors").is_file() and not str(folder).startswith(str(blocker))


def tiny_llama_folder(folder, vocab_size: int | None = None, nan: bool = False):
    from transformers import LlamaConfig, LlamaModel

    tokenizer = tiny_tokenizer(add_bos=False)
    torch.manual_seed(0)
    model = LlamaModel(LlamaConfig(vocab_size=vocab_size or len(tokenizer), hidden_size=16, intermediate_size=32,
                                   num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1,
                                   max_position_embeddings=32))
    if nan:
        with torch.no_grad():
            model.layers[0].mlp.up_proj.weight[3, 2] = float("nan")
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def test_a_vocabulary_beyond_the_embedding_table_is_refused_naming_both_sizes(tmp_path):
    folder = tiny_llama_folder(tmp_path / "small-table", vocab_size=100)
    with pytest.raises(ModelFileError, match=r"small-table.*embedding table has 100 rows but the tokenizer gives ids up to"):
        load_model(str(folder))


def test_a_nan_weight_is_refused_naming_the_tensor(tmp_path):
    folder = tiny_llama_folder(tmp_path / "nan", nan=True)
    with pytest.raises(ModelFileError, match=r"layers\.0\.mlp\.up_proj\.weight holds NaN"):
        load_model(str(folder))


def model2vec_folder(folder, arrays: dict, config: dict):
    folder.mkdir()
    tokenizer = tiny_tokenizer(add_bos=False)
    tokenizer.backend_tokenizer.save(str(folder / "tokenizer.json"))
    save_file(arrays(len(tokenizer)) if callable(arrays) else arrays, str(folder / "model.safetensors"))
    (folder / "config.json").write_text(json.dumps({"model_type": "model2vec", **config}))
    return folder


def test_a_float_mapping_is_refused_not_truncated(tmp_path):
    folder = model2vec_folder(tmp_path / "float-mapping", lambda size: {
        "embeddings": np.ones((10, 4), np.float32), "mapping": np.full(size, 9.99, np.float32)}, {})
    with pytest.raises(StaticModelError, match="'mapping' has dtype float32"):
        load_static_model(str(folder))


@pytest.mark.parametrize("key, value", [("normalize", "yes"), ("hidden_dim", "4"), ("hidden_dim", 4.5)])
def test_config_values_of_the_wrong_type_name_the_key(tmp_path, key, value):
    folder = model2vec_folder(tmp_path / "config", lambda size: {"embeddings": np.ones((size, 4), np.float32)}, {key: value})
    with pytest.raises(StaticModelError, match=f"config.json: '{key}' is {value!r}; model2vec reads"):
        load_static_model(str(folder))


def test_an_empty_text_alone_on_a_decoder_that_adds_no_token_is_named(tmp_path):
    """SmolLM2 and GPT-2 add no special token: ``encode([''])`` has nothing to run, which was a torch reshape
    error; now, as beside other texts, pooling names the text."""
    import embedlab
    from decoder_helpers import tiny_decoder
    from embedlab.errors import InputError

    folder = tiny_decoder(tmp_path / "llama", "llama")  # no BOS, as SmolLM2
    with pytest.raises(InputError, match="text at index 0 has no tokens"):
        embedlab.load(f"{folder}:pool=mean").encode([""])
