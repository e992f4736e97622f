"""Pooled kernel features kept between epochs (clir.training.pooled)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from test_training import make_data, make_space, map_metric, tiny_config, train_straight_and_resumed

import clir.training.pooled as pooled_module
from clir.training import Trainer
from clir.training.checkpoint import read_state
from clir.training.data import Tensorizer, Vocabulary
from clir.training.pooled import PooledCache
from clir.training.trainer import build_reranker


def _model_and_tensorizer(gating: str = "none", components=("en_en", "src_src", "en_src")):
    config = tiny_config()
    config.model.components = list(components)
    config.model.shared_weights = False
    config.model.interaction_kwargs = {**config.model.interaction_kwargs, "gating": gating}
    data, _ = make_data(n_queries=12, seed=3)
    vocab = Vocabulary.build([data])
    tensorizer = Tensorizer(vocab, data, config.data.max_query_len, config.data.max_doc_len)
    model = build_reranker(config, vocab.embedding_matrix(make_space()), 1, seed=0)
    return model, tensorizer


def _training_data():
    """A space, training and dev queries, and their judgements."""
    train, qrels = make_data(n_queries=30, seed=1)
    dev, dev_qrels = make_data(n_queries=15, seed=2)
    return make_space(), train, dev, {**qrels, **dev_qrels}


def test_cached_features_equal_the_models_and_each_pair_is_computed_once(monkeypatch):
    model, tensorizer = _model_and_tensorizer()
    assert model.pooled_groups == ["en_en+src_src+en_src"]
    cache = PooledCache(model, tensorizer)
    computed = []
    original = model.pooled_features

    def counting(batch):
        computed.append(batch.d_src.tokens.shape[0])
        return original(batch)

    monkeypatch.setattr(model, "pooled_features", counting)
    everything = tensorizer.candidates()
    rng = np.random.default_rng(0)
    seen: set[int] = set()
    for _ in range(6):  # random batches with repeated pairs, as the epochs draw them
        index = everything.take(rng.integers(0, len(everything), size=40))
        got = cache.lookup(index)
        batch = tensorizer.gather(index)
        want = original(batch)
        assert got.keys() == want.keys()
        for name in want:
            torch.testing.assert_close(got[name], want[name], rtol=1e-5, atol=1e-6)
        # the scores from cached features are the model's own
        torch.testing.assert_close(model(batch, got), model(batch), rtol=1e-5, atol=1e-6)
        new = set(index.row.tolist()) - seen
        assert computed[-1] == len(new) if new else True
        seen |= new
    assert sum(computed) == len(seen)  # every pair computed once, however often it came back


def test_a_gated_model_or_a_cache_over_its_limit_computes_as_before():
    gated, tensorizer = _model_and_tensorizer(gating="idf")
    assert gated.pooled_groups == []
    assert PooledCache(gated, tensorizer).lookup(tensorizer.candidates()) is None
    model, tensorizer = _model_and_tensorizer()
    cache = PooledCache(model, tensorizer, limit=100)
    assert cache.lookup(tensorizer.candidates()) is None and not cache.enabled


def test_training_with_the_cache_follows_the_course_without_it(tmp_path, monkeypatch):
    space, train, dev, qrels = _training_data()
    config = tiny_config(epochs=5, patience=0)
    config.model.components = ["en_en", "src_src", "en_src", "src_en"]
    config.model.shared_weights = False
    config.optim.loss = "softmax"
    config.data.negatives_per_positive = 4
    curves, weights = {}, {}
    for name, limit in (("cached", None), ("plain", 0)):
        if limit is not None:
            monkeypatch.setattr(pooled_module, "POOLED_CACHE_BYTES", limit)
        trainer = Trainer(config, metric=map_metric)
        path = trainer.fit(train, dev, qrels, tmp_path / name, space=space)
        curves[name] = read_state(path).curve
        weights[name] = {k: v.clone() for k, v in trainer.model_.state_dict().items()}
    for a, b in zip(curves["cached"], curves["plain"], strict=True):
        assert a["loss"] == pytest.approx(b["loss"], rel=1e-5)
        assert a["dev"] == pytest.approx(b["dev"], abs=1e-6)
    for key, value in weights["plain"].items():
        torch.testing.assert_close(weights["cached"][key], value, rtol=1e-4, atol=1e-5)


def _varied_lengths(data):
    """The data with documents of many lengths (each its own tokens, some repeated), so that
    batches pad to different widths."""
    for tokens in (data.doc_src, data.doc_en):
        for i, docno in enumerate(sorted(tokens)):
            tokens[docno] = tokens[docno] + tokens[docno][: i % 11] * (i % 3)
    return data


def test_a_resumed_training_ends_at_the_uninterrupted_weights_on_documents_of_many_lengths(tmp_path):
    """A resume pooled each pair in the first batch of the resumed epochs that drew it, not in
    the batch of the epoch that had: other last bits of the pooled features (the batch's padded
    width orders the additions), and other weights than the uninterrupted training (up to
    6e-8 apart)."""
    train, qrels = make_data(n_queries=12, seed=3)
    dev, dev_qrels = make_data(n_queries=6, seed=4)
    train, dev, space = _varied_lengths(train), _varied_lengths(dev), make_space()
    qrels.update(dev_qrels)
    config = tiny_config(epochs=4, patience=0)
    config.optim.batch_size = 8
    train_straight_and_resumed(config, train, dev, qrels, space, tmp_path)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA (CI has no GPU)")
def test_training_on_cuda_with_the_cache_follows_the_course_without_it(tmp_path, monkeypatch):
    """On CUDA the cache's features come from the fused kernel where it applies (no autograd)."""
    space, train, dev, qrels = _training_data()
    config = tiny_config(epochs=4, patience=0)
    config.model.interaction_kwargs = {**config.model.interaction_kwargs, "window": 10}
    config.device = "cuda"
    curves = {}
    for name, limit in (("cached", None), ("plain", 0)):
        if limit is not None:
            monkeypatch.setattr(pooled_module, "POOLED_CACHE_BYTES", limit)
        path = Trainer(config, metric=map_metric).fit(train, dev, qrels, tmp_path / name, space=space)
        curves[name] = read_state(path).curve
    for a, b in zip(curves["cached"], curves["plain"], strict=True):
        assert a["loss"] == pytest.approx(b["loss"], rel=1e-3)
        assert a["dev"] == pytest.approx(b["dev"], abs=0.02)


def test_members_that_pool_alike_share_one_pooling(monkeypatch):
    """An ensemble's members (here two of different weights, one configuration) are pooled once
    per pair between them, and each scores as it does alone; a member of another configuration
    (no exact-match channel) pools for itself."""
    from clir.training.ensemble import TrainedReranker, member_scores

    config = tiny_config()
    data, _ = make_data(n_queries=12, seed=3)
    space = make_space()
    vocab = Vocabulary.build([data])
    other = tiny_config()
    other.model.interaction_kwargs = {**other.model.interaction_kwargs, "exact_match": False}
    members = [
        TrainedReranker(build_reranker(c, vocab.embedding_matrix(space), 1, seed=seed), c, data.feature_names)
        for c, seed in ((config, 0), (config, 1), (other, 0))
    ]
    alone = [member_scores([member], data, space=space)[0] for member in members]
    pooled: list[int] = []
    for member in members:
        original = member.model.pooled_features
        monkeypatch.setattr(
            member.model,
            "pooled_features",
            lambda batch, original=original: pooled.append(batch.d_src.tokens.shape[0]) or original(batch),
        )
    together = member_scores(members, data, space=space)
    for got, want in zip(together, alone, strict=True):
        for a, b in zip(got, want, strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    # each pair pooled once for the first two; the third, alone in its pooling, computes its
    # features in its forward pass as without a cache
    assert sum(pooled) == sum(len(scores) for scores in alone[0])


def test_a_windowed_member_scores_the_same_bits_alone_in_an_ensemble_and_without_a_cache():
    """The windowed pooling (the default reranker's ``window: 10``) gave a permuted view, the
    cache a contiguous copy, and the components' dense layers summed the two layouts in another
    order: the same model scored the same pair up to 1e-7 apart alone (its own pooling) and
    beside a member of its configuration (the shared cache), or on Ray workers (no cache)."""
    from clir.training.ensemble import TrainedReranker, member_scores

    config = tiny_config()
    config.model.components = ["en_src", "en_en", "src_src", "src_en"]
    config.model.shared_weights = False
    config.model.interaction_kwargs = {**config.model.interaction_kwargs, "window": 10}
    data, _ = make_data(n_queries=12, seed=3)
    space = make_space()
    vocab = Vocabulary.build([data])
    model = build_reranker(config, vocab.embedding_matrix(space), 1, seed=0).eval()
    tensorizer = Tensorizer(vocab, data, config.data.max_query_len, config.data.max_doc_len)
    index = tensorizer.candidates()
    batch = tensorizer.gather(index)
    with torch.no_grad():
        assert torch.equal(model(batch), model(batch, PooledCache(model, tensorizer).lookup(index)))
    member = TrainedReranker(model, config, data.feature_names)
    alone = np.concatenate(member_scores([member], data, space=space)[0])
    together = member_scores([member, member], data, space=space)
    np.testing.assert_array_equal(np.concatenate(together[0]), alone)
    np.testing.assert_array_equal(np.concatenate(together[1]), alone)
