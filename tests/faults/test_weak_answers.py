"""The weak answers of issue 49, item 7, made clear: a text of zero-width characters only is empty, ``match:``
refuses an empty text instead of scoring ``('', '')``, and ``similarity`` / ``similarity_pairs`` name a
width mismatch and a pair that is not a pair. None of these runs a model."""

from __future__ import annotations

import numpy as np
import pytest

import embedlab
from embedlab.data import DataFormatError, is_blank
from embedlab.data.corpus import Corpus
from embedlab.errors import InputError, InputTypeError

ZERO_WIDTH = "\u200b\u200d\ufeff"


def test_zero_width_characters_alone_are_blank():
    assert is_blank(ZERO_WIDTH) and is_blank(f" {ZERO_WIDTH}\t") and not is_blank(f"a{ZERO_WIDTH}")


def test_a_zero_width_only_line_is_an_empty_line_of_the_input(tmp_path):
    path = tmp_path / "texts.txt"
    path.write_text(f"A dog runs.\n{ZERO_WIDTH}\n", encoding="utf-8")
    with pytest.raises(DataFormatError, match=r"texts.txt:2: empty line"):
        Corpus(str(path), "auto").read_all()


def test_match_refuses_an_empty_text_instead_of_scoring_it():
    method = embedlab.load("match:minilm,weights=none")
    for pair in (("", ""), ("A dog runs.", ZERO_WIDTH)):
        with pytest.raises(InputError, match="pair at index 0 has an empty text"):
            method.similarity_pairs([pair])


def test_bertscore_refuses_a_zero_width_only_candidate():
    with pytest.raises(InputError, match="candidate 0 is empty"):
        embedlab.bertscore([ZERO_WIDTH], ["A dog runs."])


def test_similarity_names_a_width_mismatch():
    method = embedlab.load("random:minilm")
    with pytest.raises(InputError, match="emb_a has 3 columns and emb_b 4"):
        method.similarity(np.ones((2, 3), np.float32), np.ones((2, 4), np.float32))


def test_similarity_pairs_names_a_pair_that_is_not_a_pair():
    method = embedlab.load("random:minilm")
    with pytest.raises(InputTypeError, match="pair at index 1 is a 1-item tuple, not a"):
        method.similarity_pairs([("A dog runs.", "A cat sleeps."), ("A dog runs.",)])


@pytest.mark.parametrize("payload, hint", [
    ("A dog runs.\n".encode("utf-16"), "UTF-16 byte-order mark: save it as UTF-8"),
    (__import__("gzip").compress(b"A dog runs.\n", mtime=0), "gzip-compressed"),
])
def test_a_utf16_or_gzip_input_is_named_as_such(tmp_path, payload, hint):
    path = tmp_path / "texts.txt"
    path.write_bytes(payload)
    with pytest.raises(DataFormatError, match=f"texts.txt:1: not valid UTF-8.*{hint}"):
        Corpus(str(path), "auto").read_all()


@pytest.mark.parametrize("name, content, message", [
    ("texts.jsonl", '{"text": "A dog runs.", "text": "A cat sleeps."}\n', r"texts.jsonl:1: the key 'text' appears twice"),
    ("texts.csv", "text,id,text\nA dog runs.,1,A cat sleeps.\n", r"texts.csv:1: the header row names the 'text' column 2 times"),
])
def test_a_duplicate_text_key_or_column_is_refused(tmp_path, name, content, message):
    path = tmp_path / name
    path.write_text(content, encoding="utf-8")
    with pytest.raises(DataFormatError, match=message):
        Corpus(str(path), "auto").read_all()


def test_dictionary_encoded_parquet_text_is_read(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    texts = ["A dog runs.", "A cat sleeps.", "A dog runs."]
    path = tmp_path / "texts.parquet"
    pq.write_table(pa.table({"text": pa.array(texts).dictionary_encode()}), path)
    assert Corpus(str(path), "auto").read_all()[1] == texts


def test_a_comma_in_a_task_path_is_escaped_with_a_backslash(tmp_path):
    from embedlab.evaluation.harness import parse_tasks, split_selection

    assert split_selection(r"sts:stsb,triplets:@a\,b.tsv,retrieval:./my\,corpus") == [
        "sts:stsb", "triplets:@a,b.tsv", "retrieval:./my,corpus"]
    path = tmp_path / "a,b.tsv"
    path.write_text("group\ttext\n1\tA dog runs.\n1\tA dog is running.\n2\tA cat sleeps.\n2\tThe cat is asleep.\n")
    assert len(parse_tasks("sts:stsb," + f"triplets:@{path}".replace(",", "\\,"))) == 2
    with pytest.raises(FileNotFoundError, match=r"x,b\.tsv"):  # the whole name reaches the task, not 'x'
        parse_tasks(f"triplets:@{tmp_path}/x\\,b.tsv")


def test_the_avg_table_build_draws_no_bar_on_a_non_terminal(tmp_path, capfd, isolated_cache):
    from decoder_helpers import tiny_decoder
    from embedlab.models.loading import load_model
    from embedlab.pooling.static import avg_tables

    model = load_model(str(tiny_decoder(tmp_path / "gpt2", "gpt2")))
    capfd.readouterr()
    avg_tables(model, ["A dog runs.", "The cat sleeps."])  # stderr is not a terminal under pytest
    assert "Avg static tables" not in capfd.readouterr().err


def test_encode_show_progress_bar_reaches_the_avg_table_build(tmp_path, isolated_cache, monkeypatch):
    """``encode(show_progress_bar=...)`` is what the table's build on first use is told (pooled and mixed alike)."""
    import numpy as np
    from decoder_helpers import tiny_decoder
    import embedlab
    from embedlab.pooling import sources

    folder = tiny_decoder(tmp_path / "gpt2", "gpt2")
    asked: list[object] = []

    def fake_avg_tables(model, contexts=None, show_progress_bar=None):
        asked.append(show_progress_bar)
        return np.ones((model.num_layers + 2, len(model.tokenizer), model.hidden_size), np.float32)

    monkeypatch.setattr(sources, "avg_tables", fake_avg_tables)
    for spec in (f"avg:{folder},layers=1", f"bert+avg:{folder},w=0.5"):
        for choice in (False, True):
            asked.clear()
            embedlab.load(spec).encode(["A dog runs.", "The cat sleeps."], show_progress_bar=choice)
            assert asked[0] is choice, (spec, asked)  # the first call builds the table (later ones read its memo)
