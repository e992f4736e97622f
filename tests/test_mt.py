"""MarianTranslator plumbing on a tiny random Marian model built inside the test (no download)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from clir.errors import DataNotFoundError, MissingDependencyError
from clir.types import Document, Query

pytest.importorskip("transformers")
pytest.importorskip("tokenizers")

SENTENCES = [
    "mungu aliumba mbingu na nchi",
    "mfalme alikuwa na mwana",
    "maji ya kisima",
    "siku ya saba",
    "mwana wa mfalme alikwenda nchi ya mbali",
]


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import MarianConfig, MarianMTModel, PreTrainedTokenizerFast

    words = sorted({w for s in SENTENCES for w in s.split()} | {"god", "king", "son", "water", "day"})
    vocab = {"<pad>": 0, "</s>": 1, "<unk>": 2, **{w: i + 3 for i, w in enumerate(words)}}
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    backend.post_processor = processors.TemplateProcessing(single="$A </s>", special_tokens=[("</s>", 1)])
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend, pad_token="<pad>", eos_token="</s>", unk_token="<unk>"
    )
    config = MarianConfig(
        vocab_size=len(vocab),
        d_model=16,
        encoder_layers=1,
        decoder_layers=1,
        encoder_attention_heads=2,
        decoder_attention_heads=2,
        encoder_ffn_dim=32,
        decoder_ffn_dim=32,
        max_position_embeddings=64,
        pad_token_id=0,
        eos_token_id=1,
        decoder_start_token_id=0,
        forced_eos_token_id=1,
    )
    torch.manual_seed(0)
    model = MarianMTModel(config).eval()
    path = tmp_path_factory.mktemp("tiny_marian")
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def test_translate_end_to_end(tiny_model: Path) -> None:
    from clir.translation import MarianTranslator

    unbatched = MarianTranslator(tiny_model, batch_size=len(SENTENCES), max_length=12)
    out = unbatched.translate(SENTENCES)
    assert len(out) == len(SENTENCES)
    assert all(isinstance(text, str) for text in out)
    assert any(out), "a random model still emits some tokens"
    assert unbatched.translate(SENTENCES) == out  # deterministic
    batched = MarianTranslator(tiny_model, batch_size=2, max_length=12)
    assert batched.translate(SENTENCES) == out  # batching (with padding) changes nothing
    assert [batched.translate([s])[0] for s in SENTENCES] == out
    vocab_words = {w for s in SENTENCES for w in s.split()} | {"god", "king", "son", "water", "day"}
    assert all(set(text.split()) <= vocab_words for text in out)


def test_translate_records(tiny_model: Path) -> None:
    from clir.translation import MarianTranslator, get_translator

    translator = get_translator("marian", path=tiny_model, batch_size=2, max_length=12)
    assert isinstance(translator, MarianTranslator)
    expected = translator.translate(SENTENCES[:2])
    docs = translator.translate_documents(
        [Document("d1", SENTENCES[0], {"title": "t"}), Document("d2", SENTENCES[1])]
    )
    assert [d.fields["text_en"] for d in docs] == expected
    assert docs[0].fields["title"] == "t" and docs[0].text == SENTENCES[0]
    queries = translator.translate_queries(
        [Query("q1", SENTENCES[0], SENTENCES[1]), Query("q2", SENTENCES[1])]
    )
    assert [q.text for q in queries] == expected
    assert queries[0].description == expected[1] and queries[1].description == ""
    assert translator.translate([]) == []


def test_missing_model_directory(tmp_path: Path) -> None:
    from clir.translation import MarianTranslator

    with pytest.raises(DataNotFoundError, match="no local model directory"):
        MarianTranslator(tmp_path / "absent")


def test_missing_transformers(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from clir.translation import MarianTranslator

    monkeypatch.setitem(sys.modules, "transformers", None)  # import now raises ImportError
    with pytest.raises(MissingDependencyError, match=r"transformers.*pip install .clir-lowres\[hf\]."):
        MarianTranslator(tmp_path)
