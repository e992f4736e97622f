"""The reranker's features built for the candidates only (``clir rerank``): the same data and
the same run as features built for the whole collection, on a padded collection; first stages
loaded from saved (sharded) indexes, a BM25 index scored as query likelihood."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
from test_union import UNION, tiny_reranker_config, tiny_world

from clir.cli import main
from clir.datasets import Collection
from clir.datasets.distractors import pad_collection
from clir.errors import ConfigError, FormatError
from clir.formats import write_run
from clir.pipeline.baselines import BaselineConfig, baseline_stage
from clir.pipeline.features import (
    DEFAULT_FEATURES,
    CollectionFeatures,
    build_rerank_data,
    collection_rerank_data,
    load_stages,
    rerank_collection,
    stage_features,
    train_reranker,
)
from clir.retrieval import FirstStage
from clir.types import Document

NAMES = list(dict.fromkeys([*UNION, *stage_features(DEFAULT_FEATURES)]))


@pytest.fixture(scope="module")
def padded(tmp_path_factory):
    """The tiny world padded with 400 distractors, a reranker trained on it over the union, and
    its BM25 first stages saved in shards of 150 documents (QL is left to the loader)."""
    collection, tables, space = tiny_world(n_docs=40)
    root = tmp_path_factory.mktemp("padded")
    pad_collection(collection, root / "collection", 400, seed=1, progress=False)
    collection = Collection.load(root / "collection")
    model = train_reranker(tiny_reranker_config(UNION, depth=4), collection, space, root / "m", tables=tables)
    for mode in ("qt", "psq", "dt"):
        stage = baseline_stage(mode, "bm25", "en", "sw", tables, BaselineConfig(), progress=False)
        stage.index_shards(collection.documents, root / "stages" / f"{mode}-bm25", shard_docs=150)
    return collection, tables, space, model, root


def _saved(data, path):
    data.save(path)
    return {p.relative_to(path): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}


def test_candidate_only_features_are_the_whole_collections(padded, tmp_path):
    collection, tables, *_ = padded
    whole = CollectionFeatures.build(collection, stage_names=NAMES, tables=tables, progress=False)
    only = CollectionFeatures.build(
        collection, stage_names=NAMES, tables=tables, progress=False, candidates_only=True
    )
    assert only.documents.src == {} and only.documents.n_docs == len(collection.documents) == 440
    assert dict(only.documents.df_src) == dict(whole.documents.df_src)  # read from qt's index
    assert dict(only.documents.df_en) == dict(whole.documents.df_en)  # from dt's
    queries = collection.split("test") + collection.split("dev")
    config = tiny_reranker_config(UNION, depth=4).data
    expected = _saved(collection_rerank_data(whole, queries, data=config, progress=False), tmp_path / "a")
    got = _saved(collection_rerank_data(only, queries, data=config, progress=False), tmp_path / "b")
    assert got == expected  # byte for byte: features, idf, scores, tokens
    candidates = {
        d
        for q in collection_rerank_data(only, queries, data=config, progress=False).queries
        for d in q.docnos
    }
    assert set(only.documents.src) == candidates  # only the candidates were analyzed
    assert len(candidates) < 440 / 2


def test_statistics_streamed_without_an_index_of_the_same_terms(padded):
    collection, tables, _, _, _ = padded
    whole = CollectionFeatures.build(collection, stage_names=["psq-ql"], tables=tables, progress=False)
    only = CollectionFeatures.build(  # no DT stage: df_en needs a pass over the documents
        collection, stage_names=["psq-ql"], tables=tables, progress=False, candidates_only=True
    )
    assert only.documents.src == {}
    assert (dict(only.documents.df_src), dict(only.documents.df_en), only.documents.n_docs) == (
        dict(whole.documents.df_src),
        dict(whole.documents.df_en),
        whole.documents.n_docs,
    )
    queries = collection.split("test")
    a = collection_rerank_data(
        whole, queries, candidates="psq-ql", feature_names=["psq-ql", "overlap_en_idf"]
    )
    b = collection_rerank_data(only, queries, candidates="psq-ql", feature_names=["psq-ql", "overlap_en_idf"])
    for x, y in zip(a.queries, b.queries, strict=True):
        assert (x.docnos, x.idf_en, x.idf_src) == (y.docnos, y.idf_en, y.idf_src)
        assert x.features.tobytes() == y.features.tobytes()


def test_sharded_stage_scores_candidates_as_the_single_index_to_the_bit(padded):
    collection, tables, _, _, root = padded
    queries = collection.split("train")
    docnos = [d.docno for d in collection.documents]
    rng = np.random.default_rng(0)
    candidates = [list(rng.choice(docnos, size=25, replace=False)) for _ in queries]
    for name in ("qt-ql", "psq-bm25", "dt-ql"):
        mode, model = name.split("-")
        single = baseline_stage(mode, model, "en", "sw", tables, BaselineConfig(), progress=False)
        single.index(collection.documents)
        dense = single.retriever.score([single.query_terms(q) for q in queries])
        sharded = load_stages(root / "stages", [name], progress=False)[name]
        assert sharded.model == model and len(sharded.retriever.parts_) == 3
        for query, want, got, row in zip(
            queries, candidates, sharded.candidate_scores(queries, candidates), dense, strict=True
        ):
            ids = [single.retriever.index_.doc_id(d) for d in want]
            assert got.tobytes() == row[ids].tobytes(), query.qid
    with pytest.raises(ConfigError, match=r"docno 'nope' is not in the index \(1 candidates are not\)"):
        sharded.candidate_scores(queries[:1], [["d001", "nope"]])


def test_rerank_runs_are_byte_identical_whole_candidates_only_and_sharded(padded, tmp_path):
    collection, tables, space, model, root = padded
    whole = rerank_collection(model, collection, space, tables=tables, index_cache=tmp_path / "cache")
    only = rerank_collection(model, collection, space, tables=tables)
    sharded = rerank_collection(model, collection, space, tables=tables, stages=root / "stages")
    files = []
    for name, run in (("whole", whole), ("only", only), ("sharded", sharded)):
        write_run(tmp_path / f"{name}.run", run, tag="r")
        files.append((tmp_path / f"{name}.run").read_bytes())
    assert files[0] == files[1] == files[2]
    assert len(whole) == len(collection.split("test"))


def test_load_stages_and_the_cli_refuse_what_is_missing(padded, tmp_path, capsys):
    _, _, _, model, root = padded
    (tmp_path / "only-qt").mkdir()
    assert FirstStage.load(root / "stages" / "qt-bm25").model == "bm25"  # as saved, without model
    with pytest.raises(ConfigError, match=r"no saved first stage 'dt-ql' nor another of mode 'dt'.*\[\]"):
        load_stages(tmp_path / "only-qt", ["dt-ql"])
    with pytest.raises(ConfigError, match=r"stages directory .*nowhere is not a directory"):
        load_stages(tmp_path / "nowhere", ["dt-ql"])
    args = ["rerank", "--model", str(model), "--collection", str(root / "collection"), "--space", "S"]
    code = main([*args, "--out", str(tmp_path / "r.run"), "--stages", str(root), "--index-cache", "C"])
    assert code == 2
    assert "clir: error: --stages" in capsys.readouterr().err


def test_stages_of_other_documents_or_another_language_are_refused(padded):
    collection, tables, space, model, root = padded
    fewer = dataclasses.replace(collection, documents=collection.documents[1:])
    first = collection.documents[0].docno
    renamed = dataclasses.replace(
        collection, documents=[Document("x-new", "maji"), *collection.documents[1:]]
    )
    for other, count, example in (
        (fewer, 439, f"'{first}' is indexed but not in the collection"),
        (renamed, 440, f"'{first}' is indexed but not in the collection"),
    ):
        with pytest.raises(ConfigError) as error:  # they were reranked with the stages' scores
            rerank_collection(model, other, space, tables=tables, stages=root / "stages")
        assert str(error.value) == (
            f"--stages {root / 'stages' / 'qt-bm25'} indexes other documents than collection "
            f"{collection.name!r}: 440 documents, the collection {count} ({example}); index this "
            "collection ('clir index --collection') or give its stages"
        )
    yoruba = dataclasses.replace(collection, doc_lang="yo")
    with pytest.raises(ConfigError, match=r"--stages .*qt-bm25 indexes 'sw' documents, .* is in 'yo'"):
        load_stages(root / "stages", ["qt-bm25"], collection=yoruba)
    assert load_stages(root / "stages", ["qt-ql", "dt-bm25"], collection=collection)  # its own


def test_stages_of_other_texts_under_the_same_docnos_are_refused(padded, tmp_path):
    """An index kept after ``documents.jsonl`` was edited (the same docnos, another text) had
    been reranked with the old texts' scores and document frequencies; one saved before the
    digest was recorded is still accepted, uncompared."""
    collection, tables, space, model, root = padded
    first = collection.documents[0]
    edited = dataclasses.replace(
        collection, documents=[Document(first.docno, "maji ya uzima"), *collection.documents[1:]]
    )
    with pytest.raises(ConfigError) as error:  # sharded, streamed by index_shards
        rerank_collection(model, edited, space, tables=tables, stages=root / "stages")
    assert str(error.value) == (
        f"--stages {root / 'stages' / 'qt-bm25'} indexes other texts than collection "
        f"{collection.name!r} under the same 440 docnos (its documents' digest differs: were the "
        "documents edited after it was indexed?); index this collection ('clir index "
        "--collection') or give its stages"
    )
    stage = baseline_stage("dt", "bm25", "en", "sw", tables, BaselineConfig(), progress=False)
    stage.index(collection.documents).save(tmp_path / "dt-bm25")  # in memory, saved whole
    with pytest.raises(ConfigError, match=r"dt-bm25 indexes other texts than collection"):
        load_stages(tmp_path, ["dt-bm25"], collection=edited)
    backwards = dataclasses.replace(collection, documents=collection.documents[::-1])
    assert load_stages(tmp_path, ["dt-bm25"], collection=backwards)  # the same texts, reordered
    description = tmp_path / "dt-bm25" / "first_stage.json"
    meta = json.loads(description.read_text())
    description.write_text(json.dumps({**meta, "documents_digest": "x"}))
    with pytest.raises(FormatError, match=r"first_stage\.json: documents_digest is 'x', not 64 hex"):
        load_stages(tmp_path, ["dt-bm25"], collection=collection)
    del meta["documents_digest"]  # saved before 2026-12-07: the texts are not compared
    description.write_text(json.dumps(meta))
    assert load_stages(tmp_path, ["dt-bm25"], collection=edited)


def test_stages_of_the_collection_in_any_order_are_its_own(padded, tmp_path):
    collection, tables, *_ = padded
    backwards = dataclasses.replace(collection, documents=collection.documents[::-1])
    for mode, shard_docs in (("qt", 1000), ("dt", 300)):  # one shard, and two
        stage = baseline_stage(mode, "bm25", "en", "sw", tables, BaselineConfig(), progress=False)
        stage.index_shards(backwards.documents, tmp_path / f"{mode}-bm25", shard_docs=shard_docs)
    assert load_stages(tmp_path, ["qt-bm25", "dt-bm25"], collection=collection)
    assert load_stages(tmp_path, ["qt-bm25", "dt-bm25"], collection=backwards)


def test_a_saved_in_memory_index_scored_by_another_model(padded, tmp_path):
    collection, tables, *_ = padded
    queries = collection.split("dev")
    bm25 = baseline_stage("dt", "bm25", "en", "sw", tables, BaselineConfig(), progress=False)
    bm25.index(collection.documents).save(tmp_path / "dt-bm25")
    config = BaselineConfig(model_params={"ql": {"mu": 50}})
    ql = baseline_stage("dt", "ql", "en", "sw", tables, config, progress=False).index(collection.documents)
    loaded = FirstStage.load(tmp_path / "dt-bm25", model="ql", model_params={"mu": 50})
    assert (loaded.model, loaded.retriever.get_params()) == ("ql", {"mu": 50})
    assert loaded.search(queries) == ql.search(queries)  # the scores to the bit
    assert FirstStage.load(tmp_path / "dt-bm25").search(queries) == bm25.search(queries)


def test_stages_indexed_with_other_settings_than_the_model_s_are_refused(padded, tmp_path):
    """`clir rerank --stages` had scored a model with the saved stages' own settings (an index
    of `clir index --k1 0.3`, `--spelling off` or `--psq-top-k 3`): another run than the model's,
    silently (AP 0.81 -> 0.78 on a made-up collection)."""
    collection, tables, space, model, root = padded
    for mode, changed in (
        ("qt", {"model_params": {"bm25": {"k1": 0.3}}}),
        ("dt", {"spelling": None}),
        ("psq", {"psq_top_k": 3}),
        ("psq", {"psq_cumulative": 0.5}),
    ):
        stages = tmp_path / "-".join(map(str, [mode, *changed.values()])).replace(" ", "")
        for name in ("qt", "psq", "dt"):
            config = BaselineConfig(**changed) if name == mode else BaselineConfig()
            stage = baseline_stage(name, "bm25", "en", "sw", tables, config, progress=False)
            stage.index_shards(collection.documents, stages / f"{name}-bm25", shard_docs=300)
        with pytest.raises(ConfigError) as error:
            rerank_collection(model, collection, space, tables=tables, stages=stages)
        message = str(error.value)
        key = next(iter(changed))
        assert message.startswith(
            f"--stages {stages / f'{mode}-bm25'} was indexed with other first-stage settings than the "
            f"model's: {key} "
        ), message
        assert message.endswith("(clir index --k1, --b, --mu, --spelling, --psq-top-k, --psq-cumulative)")
        # the settings a stage was indexed with are the ones asked for: accepted
        assert load_stages(stages, [f"{mode}-bm25"], BaselineConfig(**changed), collection=collection)
    # the model's own settings (the defaults here): its stages are taken, QL scored from BM25's
    assert load_stages(root / "stages", ["qt-ql", "psq-bm25", "dt-bm25"], collection=collection)


def test_stages_indexed_with_other_tables_are_refused(padded, tmp_path):
    """`clir rerank --stages` of stages indexed before the tables were learned again (`clir
    tables --iterations 2` into a new --tables) had reranked the other tables' candidates and
    first-stage scores with these tables' features: a run that neither tables give, silently."""
    collection, tables, space, model, root = padded
    other = tuple(table.prune(top_k=1, cumulative=None) for table in tables)
    for mode in ("qt", "psq", "dt"):
        for name in ("qt", "psq", "dt"):
            made = other if name == mode else tables
            stage = baseline_stage(name, "bm25", "en", "sw", made, BaselineConfig(), progress=False)
            stage.index_shards(collection.documents, tmp_path / mode / f"{name}-bm25", shard_docs=300)
        with pytest.raises(ConfigError) as error:
            rerank_collection(model, collection, space, tables=tables, stages=tmp_path / mode)
        direction = "doc->en" if mode == "dt" else "en->doc"
        assert str(error.value).startswith(
            f"--stages {tmp_path / mode / f'{mode}-bm25'} was indexed with other translation tables "
            f"than the ones given: the {direction} table"
        ), str(error.value)
        # the tables it was indexed with: accepted
        assert load_stages(tmp_path / mode, [f"{mode}-bm25"], collection=collection, tables=other)
    # saved whole (in memory) and loaded again: the same tables, whatever their arrays' types
    stage = baseline_stage("dt", "bm25", "en", "sw", tables, BaselineConfig(), progress=False)
    stage.index(collection.documents).save(tmp_path / "whole" / "dt-bm25")
    assert load_stages(tmp_path / "whole", ["dt-bm25"], collection=collection, tables=tables)
    description = tmp_path / "whole" / "dt-bm25" / "first_stage.json"
    meta = json.loads(description.read_text())
    with pytest.raises(ConfigError, match=r"dt-bm25 was indexed with other translation tables"):
        load_stages(tmp_path / "whole", ["dt-bm25"], collection=collection, tables=other)
    description.write_text(json.dumps({**meta, "table_doc_en_sha256": "x"}))
    with pytest.raises(FormatError, match=r"first_stage\.json: table_doc_en_sha256 is 'x', not 64 hex"):
        load_stages(tmp_path / "whole", ["dt-bm25"], collection=collection, tables=tables)
    del meta["table_doc_en_sha256"]  # saved before 2026-12-07: the table is not compared
    description.write_text(json.dumps(meta))
    assert load_stages(tmp_path / "whole", ["dt-bm25"], collection=collection, tables=other)
    # the stages of the tables given: the run of the collection indexed in memory, byte for byte
    written = rerank_collection(model, collection, space, tables=tables, stages=root / "stages")
    assert written == rerank_collection(model, collection, space, tables=tables)


def test_a_collection_of_queries_in_another_language_is_refused(padded, tmp_path):
    """The reranker reads queries as English: German queries had trained on features left empty
    (``häuser`` untranslated by a table of ``haus``), with no error."""
    collection, tables, *_ = padded
    german = dataclasses.replace(collection, query_lang="de")
    with pytest.raises(ConfigError, match="'de': the reranker reads queries as English"):
        CollectionFeatures.build(german, stage_names=["qt-bm25"], tables=tables, progress=False)
    whole = CollectionFeatures.build(collection, stage_names=["qt-bm25"], tables=tables, progress=False)
    with pytest.raises(ConfigError, match="queries in 'de'"):
        dataclasses.replace(whole, collection=german)


def test_training_names_a_missing_split_before_building_anything(padded, tmp_path):
    """A collection with no dev split (an import of test topics only) had been refused only
    after its tables, indexes and features were built (11-30 s on a small one)."""
    collection, _, space, *_ = padded
    no_dev = dataclasses.replace(collection, queries={"train": collection.split("train")})
    with pytest.raises(ConfigError, match=r"has no split 'dev'; splits: \['train'\]"):
        train_reranker(tiny_reranker_config(), no_dev, space, tmp_path / "m", tables_dir=tmp_path / "t")
    assert not (tmp_path / "t").exists() and not (tmp_path / "m").exists()
    # an import of test topics only: the message says where judged training queries come from
    test_only = dataclasses.replace(collection, queries={"test": collection.split("test")})
    remedy = (
        r"has no split 'train'; splits: \['test'\]: the reranker trains on judged train queries and "
        r"stops early on judged dev queries: import them \(clir data import --topics train=FILE "
        r"dev=FILE test=FILE ...\), or train on pseudo-queries made from parallel text \(clir data "
        r"pseudo\)"
    )
    with pytest.raises(ConfigError, match=remedy):
        train_reranker(tiny_reranker_config(), test_only, space, tmp_path / "m", tables_dir=tmp_path / "t")


def test_rerank_data_refuses_a_repeated_qid():
    """Two queries under one qid had both taken that qid's candidates, and their score features
    the last query's terms (the stage looks terms up by qid), silently."""
    import scipy.sparse as sp

    from clir.pipeline.features import DocumentTokens
    from clir.text import get_analyzer
    from clir.translation import TranslationTable
    from clir.types import Query

    en_doc = TranslationTable(["water", "fish"], ["maji", "samaki"], sp.csr_matrix(np.eye(2)), "en", "sw")
    doc_en = TranslationTable(["maji", "samaki"], ["water", "fish"], sp.csr_matrix(np.eye(2)), "sw", "en")
    docs = [Document("d1", "maji maji"), Document("d2", "samaki"), Document("d3", "maji samaki")]
    sw = get_analyzer("sw")
    tokens = DocumentTokens.build(docs, sw, doc_en, progress=False)
    stage = FirstStage("qt", "bm25", doc_analyzer=sw, table_en_doc=en_doc, progress=False).index(docs)
    queries = [Query("q1", "water"), Query("q1", "fish")]
    with pytest.raises(ConfigError, match="duplicate qid 'q1'"):
        build_rerank_data(
            queries, {"q1": {"d1": 2.0, "d2": 1.0}}, documents=tokens, table_en_doc=en_doc, doc_lang="sw",
            stages={"qt-bm25": stage}, features=("overlap_src",), progress=False,
        )  # fmt: skip


def test_an_index_cache_and_stages_together_are_refused(padded, tmp_path):
    # the Python API indexed the collection into the cache and ignored the stages (the CLI
    # refuses --index-cache with --stages)
    collection, tables, space, model, _ = padded
    with pytest.raises(ConfigError, match=r"give index_cache .* or stages .*, not both"):
        rerank_collection(
            model, collection, space, tables=tables, index_cache=tmp_path / "cache", stages=tmp_path / "s"
        )
    assert not (tmp_path / "cache").exists()


def test_rerank_names_a_missing_split_before_learning_tables_or_indexing(
    padded, tmp_path, capsys, monkeypatch
):
    """``clir rerank --split dve`` had learned the tables into ``--tables`` and indexed the
    collection before it was told the split does not exist (10 s on a tiny collection)."""
    from clir.pipeline import features as features_module

    collection, _, space, model, root = padded

    def indexed(*args, **kwargs):
        raise AssertionError("indexed before the split was checked")

    monkeypatch.setattr(features_module, "first_stage", indexed)
    with pytest.raises(ConfigError, match=r"has no split 'dve'; splits: \['dev', 'test', 'train'\]"):
        rerank_collection(model, collection, space, split="dve", tables_dir=tmp_path / "t")
    assert not (tmp_path / "t").exists()
    args = ["rerank", "--model", str(model), "--collection", str(root / "collection"), "--space", "S"]
    code = main([*args, "--split", "dve", "--tables", str(tmp_path / "t"), "--out", str(tmp_path / "r.run")])
    assert code == 2
    assert f"clir: error: collection {collection.name!r} has no split 'dve'" in capsys.readouterr().err
    assert not (tmp_path / "t").exists() and not (tmp_path / "r.run").exists()
