"""GGUF conversion (embedlab/models/gguf.py) on a tiny random Llama written in the test: the cached folder holds
exactly the weights the GGUF was written from, and one conversion parses the file once."""

from __future__ import annotations

import numpy as np
import pytest
from safetensors.numpy import load_file

from decoder_helpers import tiny_gguf
from embedlab.models.gguf import convert_gguf

gguf = pytest.importorskip("gguf")
pytest.importorskip("accelerate")


def test_a_conversion_parses_the_file_once_and_gives_the_source_weights(tmp_path, isolated_cache, monkeypatch):
    path, folder = tiny_gguf(tmp_path / "model" / "tiny-llama.gguf")
    readers: list[str] = []
    name_maps: list[tuple] = []
    original_reader, original_name_map = gguf.GGUFReader, gguf.get_tensor_name_map

    class CountedReader(original_reader):  # type: ignore[misc, valid-type]
        def __init__(self, file, *arguments, **options):
            readers.append(str(file))
            super().__init__(file, *arguments, **options)

    def counted_name_map(*arguments):
        name_maps.append(arguments)
        return original_name_map(*arguments)

    monkeypatch.setattr(gguf, "GGUFReader", CountedReader)
    monkeypatch.setattr(gguf, "get_tensor_name_map", counted_name_map)
    converted = convert_gguf(path, "tiny-llama")
    # transformers alone would read the header three times (configuration, tokenizer, weights) and build the
    # tensor-name map once per module; the check before converting would read it a fourth time
    assert len(readers) == 1 and len(name_maps) == len(set(name_maps)) == 1
    assert gguf.GGUFReader is CountedReader and gguf.get_tensor_name_map is counted_name_map  # put back afterwards
    source, ours = load_file(str(folder / "model.safetensors")), load_file(str(converted / "model.safetensors"))
    ours = {name.removeprefix("model."): tensor for name, tensor in ours.items()}
    source = {name.removeprefix("model."): tensor for name, tensor in source.items() if name != "lm_head.weight"}
    assert sorted(ours) == sorted(source)
    for name, tensor in source.items():
        np.testing.assert_array_equal(ours[name], tensor, err_msg=name)


def test_the_check_before_a_conversion_and_the_conversion_parse_the_file_once(tmp_path, isolated_cache, monkeypatch):
    from embedlab.models.gguf import check_gguf

    path, _ = tiny_gguf(tmp_path / "model" / "tiny-llama.gguf")
    readers: list[str] = []
    original_reader = gguf.GGUFReader

    class CountedReader(original_reader):  # type: ignore[misc, valid-type]
        def __init__(self, file, *arguments, **options):
            readers.append(str(file))
            super().__init__(file, *arguments, **options)

    monkeypatch.setattr(gguf, "GGUFReader", CountedReader)
    assert check_gguf(path, "tiny-llama") == "llama"  # what embedlab.load does for a file not converted yet
    converted = convert_gguf(path, "tiny-llama")
    # the conversion starts from the check's reader (SmolLM2: ≈ 2 CPU s a parse); before, it parsed the file again
    assert len(readers) == 1 and (converted / ".complete").exists()
