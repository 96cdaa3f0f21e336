"""Every input error exits 2 with one line (issue 49, item 5), and a spec is checked at ``load()`` against a
GGUF's header before its conversion (item 6). Each case is cheap: spec parsing, config files, tiny GGUF
files built here; the command line's status comes from its one mapping, ``exit_status``."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import embedlab
from decoder_helpers import tiny_gguf
from embedlab.cli.app import exit_status
from embedlab.errors import InputError
from embedlab.models.checks import ModelFileError
from embedlab.models.gguf import converted_gguf_folder
from embedlab.neural.head import HeadError, read_head_file
from embedlab.pooling.postprocess import make_step

pytest.importorskip("gguf")


def test_a_junk_head_file_is_a_head_error_that_exits_2(tmp_path):
    junk = tmp_path / "head.safetensors"
    junk.write_bytes(b"junk")
    with pytest.raises(HeadError, match=f"head file {junk}: not a readable safetensors file") as caught:
        read_head_file(junk)
    assert isinstance(caught.value, InputError) and isinstance(caught.value, RuntimeError)
    assert exit_status(caught.value) == 2


def test_zero_epochs_is_refused_when_the_spec_is_read():
    with pytest.raises(InputError, match="epochs.*at least 1"):
        embedlab.load("neural:minilm,epochs=0")


def test_a_layer_the_model_lacks_exits_2():
    with pytest.raises(InputError, match="layer 9 is beyond model 'minilm'") as caught:
        embedlab.load("minilm:layers=9")
    assert exit_status(caught.value) == 2


def test_fitting_a_step_on_one_text_exits_2():
    with pytest.raises(InputError, match="needs at least 2") as caught:
        make_step("zscore").fit(np.zeros((1, 4)))
    assert exit_status(caught.value) == 2


def test_truncate_1_is_refused_at_load_naming_truncate_and_the_special_tokens():
    for cut in (1, 2):  # [CLS] and [SEP] alone: no text
        with pytest.raises(InputError, match=rf"truncate={cut}: the 2 special token\(s\) minilm adds leave no room.*truncate=3 to truncate=256"):
            embedlab.load(f"minilm:truncate={cut}")
    embedlab.load("minilm:truncate=3")  # one text token fits


def test_prompteol_with_mean_pooling_warns_with_the_usual_pairing():
    with pytest.warns(UserWarning, match="paired with pool=last"):
        embedlab.load("minilm:template=prompteol,pool=mean")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        embedlab.load("minilm:template=prompteol,pool=last")


@pytest.fixture(scope="module")
def gguf_file(tmp_path_factory):
    return tiny_gguf(tmp_path_factory.mktemp("gguf") / "tiny.gguf")[0]


@pytest.mark.parametrize("options, message", [
    ("layers=3", "layer 3 is beyond model"),
    ("pool=cls", "pool=cls takes the first token"),
    ("truncate=65", "takes at most 64 input tokens"),
])
def test_a_never_converted_gguf_checks_the_spec_against_its_header(gguf_file, isolated_cache, options, message):
    with pytest.raises(InputError, match=message):
        embedlab.load(f"{gguf_file}:{options}")
    assert not converted_gguf_folder(gguf_file).exists()  # refused before minutes of conversion


def test_a_gguf_without_tokenizer_metadata_exits_2_naming_the_file(tmp_path):
    import gguf

    path = tmp_path / "no-tokenizer.gguf"
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_block_count(1)
    writer.add_tensor("token_embd.weight", np.zeros((8, 4), np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    with pytest.raises(ModelFileError, match=f"{path} has no tokenizer metadata") as caught:
        embedlab.load(str(path))
    assert exit_status(caught.value) == 2
