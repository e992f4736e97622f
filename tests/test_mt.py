"""MarianTranslator plumbing on a tiny random Marian model built inside the test (no download)."""

from __future__ import annotations

import re
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


def save_tiny_marian(path: Path, words: list[str], seed: int = 0) -> Path:
    """A random 1-layer Marian model whose word-level tokenizer knows ``words``, saved to ``path``."""
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import MarianConfig, MarianMTModel, PreTrainedTokenizerFast

    vocab = {"<pad>": 0, "</s>": 1, "<unk>": 2, **{w: i + 3 for i, w in enumerate(sorted(set(words)))}}
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
    torch.manual_seed(seed)
    MarianMTModel(config).eval().save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    words = [w for s in SENTENCES for w in s.split()] + ["god", "king", "son", "water", "day"]
    words += ["swh_Latn", "eng_Latn"]  # the NLLB codes of sw and en, as NLLB's vocabulary has them
    return save_tiny_marian(tmp_path_factory.mktemp("tiny_marian"), words)


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
    vocab_words = {w for s in SENTENCES for w in s.split()} | {
        "god",
        "king",
        "son",
        "water",
        "day",
        "swh_Latn",
        "eng_Latn",
    }
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


def test_an_empty_text_translates_to_nothing(tiny_model: Path) -> None:
    """A blank document or query had gone to the model, which made words up from nothing (an
    empty passage indexed with invented English terms by the dt first stages)."""
    from clir.translation import MarianTranslator

    translator = MarianTranslator(tiny_model, batch_size=2, max_length=12)
    expected = translator.translate(SENTENCES[:3])
    out = translator.translate(["", SENTENCES[0], " \n", SENTENCES[1], SENTENCES[2], "\t"])
    assert out == ["", expected[0], "", expected[1], expected[2], ""]
    assert translator.translate(["", " "]) == ["", ""]


def test_missing_model_directory(tmp_path: Path) -> None:
    from clir.errors import ConfigError
    from clir.translation import MarianTranslator

    with pytest.raises(DataNotFoundError, match="no local model directory"):
        MarianTranslator(tmp_path / "absent")
    (tmp_path / "empty").mkdir()  # a directory without a model: transformers' ValueError, unnamed
    with pytest.raises(ConfigError, match=r"empty: not a saved seq2seq model and tokenizer \("):
        MarianTranslator(tmp_path / "empty")


def test_missing_transformers(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from clir.translation import MarianTranslator

    monkeypatch.setitem(sys.modules, "transformers", None)  # import now raises ImportError
    with pytest.raises(MissingDependencyError, match=r"transformers.*pip install .clir-lowres\[hf\]."):
        MarianTranslator(tmp_path)


def test_a_multilingual_tokenizer_gets_nllb_language_codes(tiny_model: Path) -> None:
    from clir.translation import MarianTranslator

    translator = MarianTranslator(tiny_model, max_length=12, source_lang="en", target_lang="sw")
    plain = translator.translate(SENTENCES)
    translator.tokenizer.src_lang = None  # as NLLB's tokenizer has
    forced = translator.translate(SENTENCES)
    assert translator.tokenizer.src_lang == "eng_Latn"
    assert all(text.split()[0] == "swh_Latn" for text in forced)  # the target code's token first
    assert not all(text.split()[:1] == ["swh_Latn"] for text in plain)


@pytest.mark.parametrize(
    ("source", "target", "missing"),
    [("en", "yo", "'yo' (target_lang 'yo')"), ("xh", "en", "'xh' (source_lang 'xh')")],
)
def test_a_language_code_the_multilingual_tokenizer_lacks_is_refused(
    tiny_model: Path, source: str, target: str, missing: str
) -> None:
    """A code with no token in the vocabulary had been looked up as the unknown token and forced
    as the first generated one (or set as ``src_lang``): output in no named language, silently."""
    from clir.errors import ConfigError
    from clir.translation import MarianTranslator

    translator = MarianTranslator(tiny_model, max_length=12, source_lang=source, target_lang=target)
    translator.tokenizer.src_lang = None  # as NLLB's tokenizer has
    with pytest.raises(
        ConfigError, match=r"tiny_marian\d*: the tokenizer has no language token " + re.escape(missing)
    ):
        translator.translate(SENTENCES[:1])


def test_mt_mode_feeds_the_first_stages_and_the_reranker_views(tmp_path: Path) -> None:
    """``translation: {mode: mt}``: dt indexes the English MT of each document, qt searches the
    MT of the query, D-hat_en and Q-hat are those translations analyzed; PSQ keeps the table."""
    from test_union import EN, SW, tiny_reranker_config, tiny_world

    from clir.pipeline.baselines import BaselineConfig, TranslationConfig
    from clir.pipeline.features import (
        CollectionFeatures,
        collection_rerank_data,
        rerank_collection,
        train_reranker,
    )
    from clir.retrieval import get_retriever
    from clir.text import get_analyzer
    from clir.translation import MarianTranslator
    from clir.translation.mt import MTModels

    collection, tables, space = tiny_world()
    to_en = save_tiny_marian(tmp_path / "sw-en", EN + SW, seed=1)
    from_en = save_tiny_marian(tmp_path / "en-sw", EN + SW, seed=2)
    models = {"sw": MTModels(to_en=str(to_en), from_en=str(from_en), max_length=20)}
    mt = BaselineConfig(spelling=None, translation=TranslationConfig("mt", models))
    stages = [f"{mode}-{model}" for mode in ("dt", "qt", "psq") for model in ("bm25", "ql")]
    options = {"stage_names": stages, "tables": tables, "progress": False}
    features = CollectionFeatures.build(collection, baseline=mt, **options)
    table = CollectionFeatures.build(collection, baseline=BaselineConfig(spelling=None), **options)

    english, swahili = get_analyzer("en"), get_analyzer("sw")
    documents = collection.documents
    queries = collection.split("test")
    doc_mt = MarianTranslator(to_en, max_length=20).translate([d.text for d in documents])
    query_mt = MarianTranslator(from_en, max_length=20).translate([q.text for q in queries])
    assert features.documents.en == {
        d.docno: english.analyze(t) for d, t in zip(documents, doc_mt, strict=True)
    }
    assert features.documents.en != table.documents.en and features.documents.src == table.documents.src

    def bm25(terms: dict[str, list[str]], query_terms: dict[str, list[str]]):
        retriever = get_retriever("bm25").index(list(terms), list(terms.values()), progress=False)
        return retriever.search(query_terms, k=1000, progress=False)

    qids = [q.qid for q in queries]
    assert features.stages["dt-bm25"].search(queries) == bm25(
        features.documents.en, {q.qid: english.analyze(q.text) for q in queries}
    )
    q_src = {qid: swahili.analyze(text) for qid, text in zip(qids, query_mt, strict=True)}
    assert features.stages["qt-bm25"].search(queries) == bm25(features.documents.src, q_src)
    assert features.stages["psq-bm25"].search(queries) == table.stages["psq-bm25"].search(queries)

    data = collection_rerank_data(features, "test", candidates="qt-bm25", progress=False)
    assert {q.qid: list(q.query_src) for q in data.queries} == q_src
    assert all(data.doc_en[d] == features.documents.en[d] for d in data.doc_en)

    model = train_reranker(tiny_reranker_config(), collection, space, tmp_path / "model", tables=tables)
    run = rerank_collection(model, collection, space, tables=tables, baseline=mt)
    assert set(run) == set(qids) and run != rerank_collection(model, collection, space, tables=tables)


def test_the_experiment_s_translation_section(tmp_path: Path) -> None:
    import dataclasses

    from clir.errors import ConfigError
    from clir.pipeline.baselines import TranslationConfig
    from clir.pipeline.config import load_experiment
    from clir.translation.mt import MTModels

    fast = Path(__file__).resolve().parents[1] / "configs" / "experiment-fast.yaml"
    config = load_experiment(fast)
    assert config.translation is None and config.baseline_config().translation is None
    m = tmp_path / "m"
    for name in ("sw-en", "en-sw", "tl-en"):
        (m / name).mkdir(parents=True)
        (m / name / "config.json").write_text("{}")
    section = (
        f"translation:\n  mode: mt\n  models:\n    sw: {{to_en: {m}/sw-en, from_en: {m}/en-sw}}\n"
        f"    tl: {{to_en: {m}/tl-en, num_beams: 4}}\n"
    )
    base = fast.read_text().replace("reranker-tiny.yaml", str(fast.parent / "reranker-tiny.yaml"))
    (tmp_path / "mt.yaml").write_text(base + section)
    config = load_experiment(tmp_path / "mt.yaml")
    models = config.baseline_config().translation.models
    assert models["sw"] == MTModels(to_en=f"{m}/sw-en", from_en=f"{m}/en-sw")
    assert (models["tl"].from_en, models["tl"].num_beams) == (None, 4)
    # a model replaced at the same path changes the steps' keys (the old translations had been
    # served from the cache); the table mode adds nothing to them
    key = config.baseline_config().translation.files_key()
    assert set(key["mt_files"]) == {"sw", "tl"}
    (m / "sw-en" / "config.json").write_text('{"d_model": 8}')
    changed = config.baseline_config().translation.files_key()["mt_files"]
    assert changed["sw"] != key["mt_files"]["sw"] and changed["tl"] == key["mt_files"]["tl"]
    assert TranslationConfig("table", {}).files_key() == {}
    # a missing model directory is refused when the config is loaded, before any step runs
    (tmp_path / "missing.yaml").write_text(base + section.replace(f"{m}/tl-en", f"{m}/absent"))
    with pytest.raises(
        ConfigError, match=r"missing\.yaml: translation\.models\.tl\.to_en=.*absent' is invalid"
    ):
        load_experiment(tmp_path / "missing.yaml")
    with pytest.raises(
        ConfigError, match=r"translation\.models=\['sw'\] is invalid; expected MT models of 'tl'"
    ):
        dataclasses.replace(config, translation=TranslationConfig("mt", {"sw": models["sw"]}))
    with pytest.raises(ConfigError, match=r"models=\{\} is invalid; expected \{<doc_lang>"):
        TranslationConfig("mt", {})
    table = dataclasses.replace(config, translation=TranslationConfig("table", {}))
    assert table.baseline_config().translation is None  # table mode: the steps' keys as before
    # models beside mode table are read by nothing: said (they had been ignored without a word)
    with pytest.warns(UserWarning, match=r"models \['sw'\] are not used in mode 'table'.*mode: mt"):
        TranslationConfig("table", {"sw": models["sw"]})


def test_an_mt_device_the_machine_lacks_is_refused_when_the_config_is_loaded(
    tmp_path: Path, tiny_model
) -> None:
    """``translation.models.<lang>.device`` was read by torch only when the model was loaded, at
    the experiment's first MT step (after its collections and tables): ``gpu`` was an "unexpected
    RuntimeError", ``cuda`` without CUDA an "unexpected AssertionError", neither naming the key."""
    from clir.errors import ConfigError
    from clir.pipeline.config import load_experiment
    from clir.translation import MarianTranslator

    fast = Path(__file__).resolve().parents[1] / "configs" / "experiment-fast.yaml"
    base = fast.read_text().replace("reranker-tiny.yaml", str(fast.parent / "reranker-tiny.yaml"))
    (tmp_path / "sw-en").mkdir()
    for device, expected in (("gpu", "a torch device, e.g. 'cpu' or 'cuda'"), ("cuda:99", "")):
        models = (
            f"    sw: {{to_en: {tmp_path}/sw-en, device: '{device}'}}\n    tl: {{to_en: {tmp_path}/sw-en}}\n"
        )
        (tmp_path / "mt.yaml").write_text(base + "translation:\n  mode: mt\n  models:\n" + models)
        with pytest.raises(
            ConfigError,
            match=rf"mt\.yaml: translation\.models\.sw\.device='{device}' is invalid; expected {expected}",
        ):
            load_experiment(tmp_path / "mt.yaml")
        with pytest.raises(ConfigError, match=rf"^device '{device}' is invalid; expected {expected}"):
            MarianTranslator(tiny_model, device=device)
    assert MarianTranslator(tiny_model, device="cpu").model.device.type == "cpu"


def test_a_text_longer_than_max_length_is_translated_in_pieces_not_cut(tiny_model: Path) -> None:
    # the model had read a text's first max_length tokens only: the tail of a longer document
    # was never translated (nor indexed in the dt first stages, nor in the D-hat_en view)
    from clir.translation import MarianTranslator

    translator = MarianTranslator(tiny_model, batch_size=2, max_length=8)
    text = "mungu aliumba mbingu na nchi. mfalme alikuwa na mwana. maji ya kisima siku ya saba"
    pieces = translator.pieces(text)
    assert pieces == [
        "mungu aliumba mbingu na nchi.",
        "mfalme alikuwa na mwana.",
        "maji ya kisima siku ya saba",
    ]
    assert all(len(translator.tokenizer(piece)["input_ids"]) <= 8 for piece in pieces)
    # a sentence longer than max_length is cut at the space nearest its middle
    long = "mwana wa mfalme alikwenda nchi ya mbali mungu aliumba"
    assert translator.pieces(long) == ["mwana wa mfalme alikwenda", "nchi ya mbali mungu aliumba"]
    short = "maji ya kisima"
    assert translator.pieces(short) == [short]
    out = translator.translate([text, short, "", long])
    alone = [translator.translate([piece])[0] for piece in pieces]
    assert out[0] == " ".join(alone) and out[1:3] == [translator.translate([short])[0], ""]
    assert out[3] == " ".join(translator.translate(translator.pieces(long)))
