"""Tests of hard negatives (``optim.hard_negatives``): negatives from the top of the first-stage list."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_training import make_data, make_space, map_metric, tiny_config

import clir.training.trainer as trainer_module
from clir.errors import ConfigError
from clir.pipeline.config import load_experiment
from clir.training import (
    HardNegativesConfig,
    RerankData,
    RerankQuery,
    TrainConfig,
    Trainer,
    sample_groups,
    sample_pairs,
)


def reference_groups(data: RerankData, qrels, rng: np.random.Generator, k: int, depth: int | None):
    """The uniform sampling as it was before hard negatives existed (commit d18e401), verbatim."""
    groups = []
    for qi, query in enumerate(data.queries):
        judged: Mapping[str, int] = qrels.get(query.qid, {})
        docnos = query.docnos if depth is None else query.docnos[:depth]
        positives = [d for d in docnos if judged.get(d, 0) >= 1]
        negatives = [d for d in docnos if judged.get(d, 0) < 1]
        if not positives or not negatives:
            continue
        replace = len(negatives) < k
        for positive in positives:
            chosen = rng.choice(len(negatives), size=k, replace=replace)
            groups.append((qi, positive, [negatives[j] for j in chosen]))
    return groups


def one_query_data(n_docs: int, relevant: list[int]) -> tuple[RerankData, dict[str, dict[str, int]]]:
    """One query over d0..d{n-1} in that first-stage order; ``relevant`` are their indices."""
    docnos = [f"d{i}" for i in range(n_docs)]
    query = RerankQuery(
        "q", ["e"], ["x"], [1.0], [1.0], docnos, -np.arange(n_docs, dtype=float), np.zeros((n_docs, 0))
    )
    data = RerankData("xx", [query], {d: ["x"] for d in docnos}, {d: ["e"] for d in docnos})
    return data, {"q": {docnos[i]: 1 for i in relevant}}


@st.composite
def worlds(draw):
    """Random queries (1-12 candidates each, some relevant, some judged 0, some unjudged)."""
    n_queries = draw(st.integers(1, 5))
    queries, qrels, docs = [], {}, set()
    for qi in range(n_queries):
        n = draw(st.integers(1, 12))
        docnos = [f"q{qi}d{i}" for i in range(n)]
        grades = draw(st.lists(st.sampled_from([None, 0, 1, 2]), min_size=n, max_size=n))
        qrels[f"q{qi}"] = {d: g for d, g in zip(docnos, grades, strict=True) if g is not None}
        queries.append(
            RerankQuery(f"q{qi}", ["e"], ["x"], [1.0], [1.0], docnos, np.zeros(n), np.zeros((n, 0)))
        )
        docs.update(docnos)
    data = RerankData("xx", queries, {d: ["x"] for d in docs}, {d: ["e"] for d in docs})
    return data, qrels


@settings(max_examples=60, deadline=None)
@given(worlds(), st.integers(1, 6), st.sampled_from([None, 3, 8]), st.integers(0, 2**32 - 1))
def test_uniform_sampling_is_unchanged(world, k, depth, seed):
    data, qrels = world
    expected = reference_groups(data, qrels, np.random.default_rng(seed), k, depth)
    order = np.random.default_rng(seed)
    reference_groups(data, qrels, order, k, depth)  # the generator's state after the draws
    shuffled = [expected[i] for i in order.permutation(len(expected))]
    assert sample_groups(data, qrels, np.random.default_rng(seed), k, depth) == shuffled
    assert sample_groups(data, qrels, np.random.default_rng(seed), k, depth, hard=None) == shuffled
    triples = [(qi, pos, neg) for qi, pos, negs in expected for neg in negs]
    order = np.random.default_rng(seed)
    reference_groups(data, qrels, order, k, depth)
    assert sample_pairs(data, qrels, np.random.default_rng(seed), k, depth) == [
        triples[i] for i in order.permutation(len(triples))
    ]


@pytest.mark.parametrize("seed", [0, 1, 7])
def test_hard_negatives_hand_computed(seed):
    # d0 and d3 relevant; the first 4 candidates hold two non-relevant ones: d1, d2
    data, qrels = one_query_data(10, relevant=[0, 3])
    rest = {f"d{i}" for i in range(4, 10)}

    def groups(share: float, k: int, depth: int = 4):
        hard = HardNegativesConfig(share=share, depth=depth)
        found = sample_groups(data, qrels, np.random.default_rng(seed), k, hard=hard)
        assert sorted(pos for _, pos, _ in found) == ["d0", "d3"]
        return [negs for _, _, negs in found]

    for negs in groups(1.0, 2):  # all from the top: exactly d1 and d2
        assert sorted(negs) == ["d1", "d2"]
    for negs in groups(1.0, 3):  # the top holds only two: the third from the rest
        assert sorted(negs[:2]) == ["d1", "d2"] and negs[2] in rest
    for negs in groups(0.5, 4):  # half of 4 from the top, then two others, no repeats
        assert sorted(negs[:2]) == ["d1", "d2"] and set(negs[2:]) <= rest and len(set(negs)) == 4
    for negs in groups(0.25, 2):  # 0.5 rounds up: one of d1, d2, then any other negative
        assert negs[0] in {"d1", "d2"} and negs[1] in {"d1", "d2"} | rest - {negs[0]}
    for negs in groups(0.2, 2):  # 0.4 rounds down: no hard negative, two others
        assert len(set(negs)) == 2 and set(negs) <= {"d1", "d2"} | rest
    # no negative among the first candidate: uniform, the very same draws
    assert sample_groups(
        data, qrels, np.random.default_rng(seed), 3, hard=HardNegativesConfig(share=1.0, depth=1)
    ) == sample_groups(data, qrels, np.random.default_rng(seed), 3)


def test_hard_negatives_too_few_negatives_repeat():
    data, qrels = one_query_data(4, relevant=[0])  # negatives d1, d2, d3; the first 3 hold d1, d2
    hard = HardNegativesConfig(share=0.5, depth=3)
    ((_, _, negs),) = sample_groups(data, qrels, np.random.default_rng(0), 6, hard=hard)
    # 3 hard ones wanted, 2 there; one other left for 4 places: drawn from all, with replacement
    assert sorted(negs[:2]) == ["d1", "d2"] and len(negs) == 6 and set(negs) <= {"d1", "d2", "d3"}


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_hard_negatives_an_exact_half_rounds_up(seed):
    # 0.58 x 25 is 14.5: 15 hard negatives, halves up (the float product, 14.499999999999998,
    # had given 14); the first 16 candidates hold 15 negatives, d1..d15, all of them drawn first
    data, qrels = one_query_data(201, relevant=[0])
    hard = HardNegativesConfig(share=0.58, depth=16)
    assert (hard.count(25), HardNegativesConfig(share=0.7).count(45), hard.count(1)) == (15, 32, 1)
    ((_, _, negs),) = sample_groups(data, qrels, np.random.default_rng(seed), 25, hard=hard)
    assert sorted(negs[:15]) == sorted(f"d{i}" for i in range(1, 16)) and len(set(negs)) == 25


@settings(max_examples=60, deadline=None)
@given(
    worlds(),
    st.integers(1, 6),
    st.floats(0.05, 1.0),
    st.integers(1, 8),
    st.integers(0, 2**32 - 1),
)
def test_hard_negatives_properties(world, k, share, hard_depth, seed):
    data, qrels = world
    hard = HardNegativesConfig(share=share, depth=hard_depth)
    groups = sample_groups(data, qrels, np.random.default_rng(seed), k, hard=hard)
    assert groups == sample_groups(data, qrels, np.random.default_rng(seed), k, hard=hard)  # seeded
    # the same (query, positive) lists as uniform sampling; only the negatives differ
    uniform = sample_groups(data, qrels, np.random.default_rng(seed), k)
    assert sorted((qi, pos) for qi, pos, _ in groups) == sorted((qi, pos) for qi, pos, _ in uniform)
    for qi, _, negs in groups:
        query = data.queries[qi]
        judged = qrels[query.qid]
        negatives = [d for d in query.docnos if judged.get(d, 0) < 1]
        top = [d for d in query.docnos[:hard_depth] if judged.get(d, 0) < 1]
        assert len(negs) == k and set(negs) <= set(negatives)
        if len(negatives) >= k:
            assert len(set(negs)) == k  # without replacement when there are enough
        if top:
            n_hard = min(hard.count(k), len(top))
            assert len(set(negs[:n_hard])) == n_hard and set(negs[:n_hard]) <= set(top)


def test_hard_negatives_config():
    config = TrainConfig.from_dict({"optim": {"hard_negatives": {"share": 0.5}}}, "x.yaml")
    assert config.optim.hard_negatives == HardNegativesConfig(share=0.5, depth=20)
    assert config.to_dict()["optim"]["hard_negatives"] == {"share": 0.5, "depth": 20}
    assert "hard_negatives" not in TrainConfig().to_dict()["optim"]  # unset: the step keys stay
    with pytest.raises(ConfigError, match=r"x\.yaml: optim\.hard_negatives\.share=0\.0 is invalid"):
        TrainConfig.from_dict({"optim": {"hard_negatives": {"share": 0.0}}}, "x.yaml")
    with pytest.raises(ConfigError, match=r"optim\.hard_negatives\.depth=0 is invalid"):
        TrainConfig.from_dict({"optim": {"hard_negatives": {"depth": 0}}}, "x.yaml")
    with pytest.raises(ConfigError, match=r"unknown key.*optim\.hard_negatives\.rank"):
        TrainConfig.from_dict({"optim": {"hard_negatives": {"rank": 5}}}, "x.yaml")


@pytest.mark.parametrize("loss", ["hinge", "softmax"])
def test_trainer_draws_hard_negatives(tmp_path, monkeypatch, loss):
    space = make_space()
    train, qrels = make_data(n_queries=8, seed=1)
    dev, dev_qrels = make_data(n_queries=4, seed=2)
    qrels.update(dev_qrels)
    hard = HardNegativesConfig(share=1.0, depth=4)
    config = tiny_config(epochs=1, patience=0, loss=loss, hard_negatives=hard)
    config.data.negatives_per_positive = 1  # the first 4 candidates always hold a non-relevant one
    drawn = []
    name = "sample_groups" if loss == "softmax" else "sample_pairs"
    original = getattr(trainer_module, name)

    def spy(*args, **kwargs):
        drawn.append(original(*args, **kwargs))
        return drawn[-1]

    monkeypatch.setattr(trainer_module, name, spy)
    Trainer(config, metric=map_metric).fit(train, dev, qrels, tmp_path / "m", space=space)
    (items,) = drawn
    pairs = [(qi, neg) for qi, _, negs in items for neg in (negs if loss == "softmax" else [negs])]
    assert len(pairs) == len(items) > 0
    assert all(train.queries[qi].docnos.index(neg) < 4 for qi, neg in pairs)


def test_hard_negatives_config_is_the_default_but_for_the_negatives():
    configs = Path(__file__).resolve().parents[1] / "configs"
    default, hard = (load_experiment(configs / f"{n}.yaml") for n in ("default", "hard-negatives"))
    assert default.reranker == hard.reranker and list(default.systems) == list(hard.systems)
    for system in default.systems:
        mine, theirs = hard.reranker_config(system), default.reranker_config(system)
        drawn = mine["optim"].pop("hard_negatives", None)
        assert mine == theirs and (drawn is not None) == (system in ("weak-full", "full"))
