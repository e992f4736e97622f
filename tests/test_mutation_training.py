"""Tests written from a mutation-testing hunt over clir.training and clir.rerankers.

Each test pins a behaviour that a small deliberate change of the source had left unnoticed by
the rest of the suite (the change each one catches is named in its docstring): the K-NRM
kernels of the paper, hand-computed features and scores, early stopping and the best epoch's
weights, the pairing of scores in the losses, the fresh negatives of each epoch, and the
z-scoring of an ensemble's members (where the hunt found a bug, fixed in ``_normalise_rows``).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from test_training import make_data, make_space, tiny_config

import clir.training.trainer as trainer_module
from clir.rerankers import COMPONENTS, KNRM, EncodedPair
from clir.training import Trainer
from clir.training.checkpoint import read_state

E = math.exp


# ------------------------------------------------------------------------------------ K-NRM


def test_knrm_default_kernels_are_the_papers() -> None:
    """11 kernels: the exact-match kernel (μ 1, σ 0.001) then μ 1.0 - 0.1 - 0.2 i, σ 0.1
    (Xiong et al. 2017). Catches: the soft-match σ given to the exact kernel, another default
    ``exact_sigma``, other centres."""
    model = KNRM(4)
    assert model.mus == [1.0, 0.9, 0.7, 0.5, 0.3, 0.1, -0.1, -0.3, -0.5, -0.7, -0.9]
    assert model.sigmas == [0.001] + [0.1] * 10
    assert (model.log_scale, model.eps, model.exact_match, model.output) == (0.01, 1e-10, True, "tanh")
    narrow = KNRM(4, n_kernels=3, sigma=0.2, exact_sigma=0.005)
    assert narrow.mus == [1.0, 0.5, -0.5] and narrow.sigmas == [0.005, 0.2, 0.2]


def knrm_pair(sim: list[list[float]], exact: list[list[bool]], q_mask=None, d_mask=None) -> EncodedPair:
    """One pair given by its similarity matrix (and exact matches); the vectors are unused."""
    s = torch.tensor([sim])
    lq, ld = s.shape[1:]
    q_mask = torch.ones(1, lq, dtype=torch.bool) if q_mask is None else torch.tensor([q_mask])
    d_mask = torch.ones(1, ld, dtype=torch.bool) if d_mask is None else torch.tensor([d_mask])
    return EncodedPair(
        q_mask=q_mask,
        d_mask=d_mask,
        q_idf=torch.ones(1, lq),
        q_unit=torch.zeros(1, lq, 4),
        d_unit=torch.zeros(1, ld, 4),
        sim=s,
        exact=torch.tensor([exact]),
    )


def test_knrm_model_features_and_score_by_hand() -> None:
    """The model's own kernels on a 2×3 matrix whose (0, 0) is an exact surface match of cosine
    0.8 (read as 1.0). Kernels μ = [1, 0.5, -0.5], σ = [0.001, 0.1, 0.1]:

        similarities  [[1.0, 0.5, 0.0], [-0.5, 0.3, 0.5]]
        K_exact  = [1,                       0 -> eps 1e-10]
        K_0.5    = [1 + 2 e^-12.5,           e^-50 + e^-2 + 1]
        K_-0.5   = [e^-50 + e^-12.5,         1 + e^-32 + e^-50]   (e^-112.5 dropped)
        φ_k = 0.01 Σ_i log K_k(i);  score = tanh(w · φ + b)

    Catches: the exact match not set to 1.0, the exact kernel's σ, log1p for log, mean for sum
    over the query terms, another log scale or eps, tanh left out."""
    k = [
        [1.0, 1e-10],
        [1 + 2 * E(-12.5), E(-50) + E(-2) + 1],
        [E(-50) + E(-12.5), 1 + E(-32) + E(-50)],
    ]
    phi = [0.01 * (math.log(a) + math.log(b)) for a, b in k]
    pair = knrm_pair([[0.8, 0.5, 0.0], [-0.5, 0.3, 0.5]], [[True, False, False], [False, False, False]])
    model = KNRM(4, n_kernels=3).eval()
    np.testing.assert_allclose(model.features(pair)[0].numpy(), phi, rtol=1e-6, atol=1e-9)
    with torch.no_grad():
        model.dense.weight.copy_(torch.tensor([[2.0, 3.0, -1.0]]))
        model.dense.bias.fill_(0.25)
    expected = math.tanh(2 * phi[0] + 3 * phi[1] - phi[2] + 0.25)
    assert model.score_pair(pair).item() == pytest.approx(expected, rel=1e-6)
    # without exact_match the cosine 0.8 stays: exp(-0.04 / 2e-6) is 0, so K_exact(0) = eps
    plain = KNRM(4, n_kernels=3, exact_match=False).eval()
    assert plain.features(pair)[0, 0].item() == pytest.approx(0.02 * math.log(1e-10), rel=1e-6)


# ------------------------------------------------------------------- early stopping, best epoch


class Scripted:
    """A dev metric that returns the given scores, one per call (one call per epoch)."""

    def __init__(self, scores: list[float], start: int = 0) -> None:
        self.scores, self.calls = scores, start

    def __call__(self, run, qrels) -> float:
        assert set(qrels) == set(run), "the metric is given the judgements of the dev queries only"
        self.calls += 1
        return self.scores[self.calls - 1]


@pytest.fixture(scope="module")
def world():
    train, qrels = make_data(n_queries=6, n_docs=60, depth=8, seed=1)
    dev, dev_qrels = make_data(n_queries=3, n_docs=40, depth=8, seed=2)
    return train, dev, {**qrels, **dev_qrels}, make_space()


def fit(world, tmp_path, name: str, scores: list[float] | None, **optim) -> Trainer:
    train, dev, qrels, space = world
    trainer = Trainer(tiny_config(**optim), metric=None if scores is None else Scripted(scores))
    trainer.fit(train, None if scores is None else dev, qrels, tmp_path / name, space=space)
    return trainer


def weights(trainer: Trainer) -> dict[str, torch.Tensor]:
    return {k: v for k, v in trainer.model_.state_dict().items() if "embedding" not in k}


def test_a_tied_dev_score_is_no_improvement_and_patience_stops_training(world, tmp_path) -> None:
    """Equal dev scores keep the first epoch and count as bad epochs: with patience 2 a plateau
    stops after epoch 3. Catches ``>=`` for ``>`` in the comparison (the last tied epoch kept,
    patience never reached) and ``bad_epochs > patience``."""
    trainer = fit(world, tmp_path, "tie", [0.2] * 5, epochs=5, patience=2)
    state = trainer.state_
    assert (state.epoch, state.best_epoch, state.best_score, state.bad_epochs) == (3, 1, 0.2, 2)
    assert state.finished and [row["dev"] for row in state.curve] == [0.2, 0.2, 0.2]
    assert read_state(tmp_path / "tie").best_epoch == 1


def test_an_improvement_resets_the_count_of_bad_epochs(world, tmp_path) -> None:
    """Dev 0.1, 0.2, 0.1, 0.3, 0.1, 0.1, 0.1 with patience 2: epoch 3 is bad, epoch 4 the best
    (the count back to 0), 5 and 6 bad: training stops after epoch 6 with epoch 4 kept. Catches
    a count not reset at an improvement (a stop after epoch 5)."""
    trainer = fit(world, tmp_path, "reset", [0.1, 0.2, 0.1, 0.3, 0.1, 0.1, 0.1], epochs=7, patience=2)
    state = trainer.state_
    assert (state.epoch, state.best_epoch, state.best_score, state.bad_epochs) == (6, 4, 0.3, 2)


def test_the_best_epochs_weights_are_kept_in_memory_on_disk_and_across_a_resume(world, tmp_path) -> None:
    """Dev peaks at epoch 2 of 4: the trained model, and the saved ``model/``, are exactly the
    model of a 2-epoch training (each epoch is seeded on its own), also when the training was
    interrupted after epoch 3 and resumed. Catches the best weights not loaded back at the end,
    a best state that aliases the live weights, and a resume that takes the last epoch's weights
    for the best."""
    from clir.training.ensemble import TrainedReranker

    two = weights(fit(world, tmp_path, "two", None, epochs=2, patience=0))
    best = fit(world, tmp_path, "best", [0.1, 0.9, 0.2, 0.3], epochs=4, patience=0)
    assert (best.state_.epoch, best.state_.best_epoch) == (4, 2)
    last = {k: v for k, v in TrainedReranker.load(tmp_path / "best").model.state_dict().items() if k in two}
    for key, value in two.items():
        assert torch.equal(weights(best)[key], value), key
        assert torch.equal(last[key], value), key

    def stop_after_three(info) -> None:
        if info.epoch == 3:
            raise KeyboardInterrupt

    train, dev, qrels, space = world
    config = tiny_config(epochs=4, patience=0)
    with pytest.raises(KeyboardInterrupt):
        Trainer(config, metric=Scripted([0.1, 0.9, 0.2, 0.3]), callbacks=[stop_after_three]).fit(
            train, dev, qrels, tmp_path / "resumed", space=space
        )
    resumed = Trainer(config, metric=Scripted([0.1, 0.9, 0.2, 0.3], start=3))
    resumed.fit(train, dev, qrels, tmp_path / "resumed", space=space, resume=True)
    assert (resumed.state_.epoch, resumed.state_.best_epoch) == (4, 2)
    for key, value in two.items():
        assert torch.equal(weights(resumed)[key], value), key


# --------------------------------------------------------------- what the losses are given


class Captured(Exception):
    """Raised by a wrapped loss once it has seen the first batch."""


@pytest.mark.parametrize("loss", ["hinge", "softmax"])
def test_each_score_handed_to_the_loss_is_the_score_of_its_own_document(
    world, tmp_path, monkeypatch, loss
) -> None:
    """A model of the one first-stage feature alone scores ``w · f + b``: the scores that the
    first batch hands the loss, as positives and as negatives (row i: the negatives drawn for
    positive i), must be that line of the features of the sampled documents, in their order.
    Catches positives and negatives swapped, listwise negatives grouped across rows (the
    transposed view), and the configured margin not reaching the hinge."""
    train, _, qrels, space = world
    config = tiny_config(
        epochs=1, patience=0, loss=loss, batch_size=8, margin=0.5 if loss == "hinge" else 1.0
    )
    config.model.components = []
    config.data.negatives_per_positive = 3 if loss == "softmax" else 1
    sampled: list = []
    seen: dict = {}
    sample_name = "sample_groups" if loss == "softmax" else "sample_pairs"
    sample = getattr(trainer_module, sample_name)
    monkeypatch.setattr(
        trainer_module, sample_name, lambda *a, **k: sampled.extend(sample(*a, **k)) or sampled
    )
    loss_name = "softmax_loss" if loss == "softmax" else "hinge_loss"

    def capture(positive, negative, **kwargs):
        seen.update(positive=positive.detach(), negative=negative.detach(), **kwargs)
        raise Captured

    monkeypatch.setattr(trainer_module, loss_name, capture)
    with pytest.raises(Captured):
        Trainer(config).fit(train, None, qrels, tmp_path / loss, space=space)
    if loss == "hinge":
        assert seen["margin"] == 0.5

    def feature(qi: int, docno: str) -> float:
        query = train.queries[qi]
        return float(query.features[query.docnos.index(docno), 0])

    chunk = sampled[: len(seen["positive"])]
    negatives = [neg if loss == "softmax" else [neg] for _, _, neg in chunk]
    f_pos = np.array([feature(qi, pos) for qi, pos, _ in chunk])
    f_neg = np.array(
        [[feature(qi, n) for n in negs] for (qi, _, _), negs in zip(chunk, negatives, strict=True)]
    )
    s_pos = seen["positive"].double().numpy()
    s_neg = seen["negative"].double().numpy().reshape(f_neg.shape)
    f, s = np.concatenate([f_pos, f_neg.ravel()]), np.concatenate([s_pos, s_neg.ravel()])
    (w, b), *_ = np.linalg.lstsq(np.stack([f, np.ones_like(f)], 1), s, rcond=None)
    assert abs(w) > 0.05 and len(set(f.round(6))) > 4
    np.testing.assert_allclose(s_pos, w * f_pos + b, atol=1e-5)
    np.testing.assert_allclose(s_neg, w * f_neg + b, atol=1e-5)


# ------------------------------------------------------------------------- negatives, seeds


def test_each_epoch_draws_fresh_negatives_from_its_seed(world, tmp_path, monkeypatch) -> None:
    """Epoch 2 draws other negatives than epoch 1 (fresh each epoch, as in POSIT-DRMM's
    training), the same ones in a second run of the same seed, other ones under another seed.
    Catches a generator seeded without the epoch (the same negatives every epoch) or without
    the seed."""
    train, _, qrels, space = world
    draws: list[list] = []
    sample = trainer_module.sample_pairs
    monkeypatch.setattr(
        trainer_module, "sample_pairs", lambda *a, **k: draws.append(sample(*a, **k)) or draws[-1]
    )
    config = tiny_config(epochs=2, patience=0)
    config.model.components = []
    for seed, out in ((0, "a"), (0, "b"), (5, "c")):
        Trainer(config, seed=seed).fit(train, None, qrels, tmp_path / out, space=space)
    assert len(draws) == 6
    assert draws[0] != draws[1]
    assert draws[:2] == draws[2:4]
    assert draws[4] != draws[0] and draws[5] != draws[1]
    positives = {(qi, pos) for qi, pos, _ in draws[0]}
    assert positives == {(qi, pos) for qi, pos, _ in draws[1]}  # every positive, every epoch


def test_each_component_and_the_fusion_start_from_their_own_seed() -> None:
    """Component k starts as a stand-alone model of seed ``seed + k`` (not all from one seed:
    four identical starts), a shared model from ``seed``, the fusion from ``seed + 100``; a
    model's initial weights, and so the numbers of every trained model, follow from its seed.
    Catches every component seeded alike and the fusion seeded as component 0."""
    from clir.rerankers import BilingualReranker, Fusion

    model = BilingualReranker(4, torch.randn(10, 4), n_features=2, seed=7)
    for k, comp in enumerate(model.components):
        alone = KNRM(4, seed=7 + k)
        assert torch.equal(model.scorer(comp).dense.weight, alone.dense.weight), comp
        assert torch.equal(model.scorer(comp).dense.bias, alone.dense.bias), comp
    assert not torch.equal(model.scorer("en_src").dense.weight, model.scorer("en_en").dense.weight)
    fusion = Fusion(len(model.components) + 2, seed=107)
    assert torch.equal(model.fusion.net.weight, fusion.net.weight)
    assert not torch.equal(model.fusion.net.weight, Fusion(len(model.components) + 2, seed=7).net.weight)
    shared = BilingualReranker(4, torch.randn(10, 4), share_weights=True, seed=3)
    assert torch.equal(shared.scorer("src_en").dense.weight, KNRM(4, seed=3).dense.weight)


# ---------------------------------------------------------------------------- padding, masks


def test_padding_matches_nothing_and_has_similarity_zero() -> None:
    """Row 0 of the table is padding: its unit vector is zeroed even when the matrix holds a
    vector there, so every similarity involving padding is exactly 0; padding on both sides is
    no exact match. Catches the zeroing of the unit row left out and padding given one surface
    id on both sides (padding matching padding)."""
    from clir.rerankers import FrozenEmbedding
    from clir.rerankers.encoding import EncodedView, exact_matches

    weight = torch.tensor([[3.0, 4.0], [1.0, 0.0], [0.0, 2.0]])
    table = FrozenEmbedding(weight)
    assert table.unit.tolist() == [[0.0, 0.0], [1.0, 0.0], [0.0, 1.0]]
    query = EncodedView.encode(table, torch.tensor([[1, 2, 0]]), torch.tensor([[5, 6, 0]]))
    doc = EncodedView.encode(table, torch.tensor([[2, 0, 0, 1]]), torch.tensor([[6, 0, 0, 5]]))
    pair = EncodedPair.build(query, doc, torch.tensor([[1.0, 2.0, 9.0]]))
    assert pair.sim[0].tolist() == [[0.0, 0.0, 0.0, 1.0], [1.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]]
    expected = [[False, False, False, True], [True, False, False, False], [False, False, False, False]]
    assert exact_matches(query, doc)[0].tolist() == expected
    assert pair.exact[0].tolist() == expected
    assert pair.q_idf.tolist() == [[1.0, 2.0, 0.0]]  # the idf at padding is 0


def test_masked_softmax_gives_masked_positions_and_empty_rows_zero() -> None:
    """``softmax`` over the real positions only: [1, 2, (3 masked)] -> [e/(e+e²), e²/(e+e²), 0],
    and a row with no real position is all 0 (not uniform). Catches the final ``* mask`` left
    out (an empty query's gates summing to 1 over its padding)."""
    from clir.rerankers import masked_softmax

    logits = torch.tensor([[1.0, 2.0, 3.0], [1.0, 2.0, 3.0]])
    mask = torch.tensor([[True, True, False], [False, False, False]])
    got = masked_softmax(logits, mask).tolist()
    e1, e2 = E(1), E(2)
    assert got[0] == pytest.approx([e1 / (e1 + e2), e2 / (e1 + e2), 0.0], abs=1e-7)
    assert got[1] == [0.0, 0.0, 0.0]


# ---------------------------------------------------------------------------------- fusion


def test_mlp_fusion_is_one_tanh_hidden_layer_by_hand() -> None:
    """``"mlp"`` fusion: ``w2 · tanh(W1 x + b1) + b2``. With W1 = [[1, -1], [0.5, 2]], b1 = [0, -1],
    w2 = [2, -3], b2 = 0.5 and x = [0.3, 0.1]: hidden tanh([0.2, -0.65]), score
    2 tanh(0.2) - 3 tanh(-0.65) + 0.5. Catches another activation (ReLU gives 0.9)."""
    from clir.rerankers import Fusion

    fusion = Fusion(2, "mlp", hidden=2)
    with torch.no_grad():
        fusion.net[0].weight.copy_(torch.tensor([[1.0, -1.0], [0.5, 2.0]]))
        fusion.net[0].bias.copy_(torch.tensor([0.0, -1.0]))
        fusion.net[2].weight.copy_(torch.tensor([[2.0, -3.0]]))
        fusion.net[2].bias.fill_(0.5)
    score = fusion(torch.tensor([[0.3, 0.1]])).item()
    assert score == pytest.approx(2 * math.tanh(0.2) - 3 * math.tanh(-0.65) + 0.5, rel=1e-6)


@pytest.mark.parametrize(
    "kwargs", [{"window": 4}, {"exact_match": False}, {"log_scale": 0.02}, {"eps": 1e-6}], ids=str
)
def test_a_component_with_other_kernel_settings_is_pooled_with_its_own(kwargs: dict) -> None:
    """K-NRM components are pooled together only when their kernels are alike: a component
    whose window, exact matching, log scale or eps differs scores as its stand-alone model, not
    with the settings of the others. Catches a kernel signature that leaves one of them out."""
    from clir.rerankers import BilingualReranker, TokenView
    from clir.rerankers.batch import BilingualBatch

    gen = torch.Generator().manual_seed(2)
    table = torch.randn(30, 4, generator=gen)
    q = torch.tensor([[1, 2, 3], [4, 5, 0]])
    d = torch.randint(1, 30, (2, 12), generator=gen)
    d[:, ::3] = q[0, 0]  # exact matches, in clusters a window sees
    d[1, 9:] = 0
    d_en = torch.randint(1, 30, (2, 12), generator=gen)
    d_en[:, ::5], d_en[1, 10:] = 1, 0
    surface = (d_en + 100) * (d_en != 0)
    surface[:, 1:9:4] = 102  # other words of the query's surface "102": exact matches, cosine < 1
    batch = BilingualBatch(
        q_en=TokenView(q, (q + 100) * (q != 0), torch.ones(2, 3)),
        q_src=TokenView(q + 10 * (q != 0), idf=torch.ones(2, 3)),
        d_src=TokenView(d),
        d_en=TokenView(d_en, surface),
    )
    model = BilingualReranker(
        4, table, model_kwargs={"output": "linear"},
        component_models={"en_en": {"model": "knrm", "kwargs": {"output": "linear", **kwargs}}},
    ).eval()  # fmt: skip
    with torch.no_grad():
        for comp in model.components:
            model.scorer(comp).dense.weight.normal_(generator=gen)
    scores = model.component_scores(batch)
    for comp, (qv, dv) in COMPONENTS.items():
        scorer = model.scorer(comp)
        alone = KNRM(embeddings=table, **scorer.get_config()).eval()
        alone.load_state_dict(scorer.state_dict(), strict=False)
        np.testing.assert_allclose(
            scores[comp].detach().numpy(), alone.predict(batch.pair(qv, dv)).numpy(), rtol=1e-5, atol=1e-6
        )


# ------------------------------------------------------------------------- feature columns


def test_feature_columns_keep_their_names_order_into_the_batch() -> None:
    """Two feature columns of distinct values: ``select_features`` returns them in the order
    named (not the data's), and a batch of ``(query, docno)`` pairs carries each pair's own row,
    columns in order. Catches the columns sorted back into the data's order, reversed, or a
    pair given another candidate's row."""
    from clir.training import Tensorizer, Vocabulary

    data, _ = make_data(n_queries=3, n_docs=30, depth=5, seed=4)
    for qi, q in enumerate(data.queries):
        q.features = np.stack([np.arange(5) + 10.0 * qi, -np.arange(5) - 100.0 * qi], 1).astype(np.float32)
    data.feature_names = ["a", "b"]
    swapped = data.select_features(["b", "a"])
    assert swapped.feature_names == ["b", "a"]
    assert swapped.queries[1].features[:, 0].tolist() == [-100.0, -101.0, -102.0, -103.0, -104.0]
    tensorizer = Tensorizer(Vocabulary.build([swapped]), swapped, 10, 20)
    q2, q0 = swapped.queries[2], swapped.queries[0]
    batch = tensorizer.batch([(2, q2.docnos[3]), (0, q0.docnos[1]), (2, q2.docnos[0])])
    assert batch.features.tolist() == [[-203.0, 23.0], [-1.0, 1.0], [-200.0, 20.0]]


# ------------------------------------------------------------------------- ensemble scores


@pytest.mark.parametrize("value", [123456.789, 98765.4321, -2e6 / 3])
def test_combining_a_constant_query_after_another_gives_zeros_as_alone(value: float) -> None:
    """Queries with as many candidates are z-scored together as the rows of one table, which
    must give the numbers of one query at a time: a member's constant scores are all 0. Their
    row's std is a rounding error (about 1e-11 at 1e5) and the table had z-scored them to all
    1 or all -1 when they were not the first row (the only one checked against one query at a
    time). A bug this hunt found; fixed in ``_normalise_rows``."""
    from clir.training.data import normalise_scores
    from clir.training.ensemble import combine

    for n in (3, 7, 10, 160):
        first = np.arange(n, dtype=np.float64)
        constant = np.full(n, value)
        combined = combine([[first, constant], [first**2, constant]])
        assert combined[1].tolist() == [0.0] * n, (n, combined[1][:3])
        assert np.array_equal(combined[0], (normalise_scores(first) + normalise_scores(first**2)) / 2)


def test_an_epochs_loss_is_the_mean_over_its_pairs(world, tmp_path, monkeypatch) -> None:
    """The loss an epoch records is the mean of the pairs' losses: each batch's mean weighted by
    its size (the last batch is smaller). Catches batch means summed unweighted (a loss about
    ``batch_size`` times too small)."""
    train, _, qrels, space = world
    batches: list[tuple[float, int]] = []
    hinge = trainer_module.hinge_loss

    def recorded(positive, negative, **kwargs):
        loss = hinge(positive, negative, **kwargs)
        batches.append((float(loss.detach()), len(positive)))
        return loss

    monkeypatch.setattr(trainer_module, "hinge_loss", recorded)
    config = tiny_config(epochs=1, patience=0, batch_size=5)
    config.model.components = []
    trainer = Trainer(config)
    trainer.fit(train, None, qrels, tmp_path / "loss", space=space)
    sizes = [n for _, n in batches]
    assert len(sizes) > 2 and sizes[-1] < 5 == sizes[0], sizes
    expected = sum(value * n for value, n in batches) / sum(sizes)
    assert trainer.state_.curve[0]["loss"] == pytest.approx(expected, rel=1e-9)
    assert trainer.state_.curve[0]["pairs"] == sum(sizes)


def test_training_pairs_come_from_the_candidates_the_config_reranks(world, tmp_path, monkeypatch) -> None:
    """Data with 8 candidates a query, a config that reranks 4 (``data.depth``): every sampled
    positive and negative is among a query's first 4, the candidates scored at inference.
    Catches the sampling given no depth (positives and negatives from below the reranked
    depth)."""
    train, _, qrels, space = world
    draws: list = []
    sample = trainer_module.sample_pairs
    monkeypatch.setattr(
        trainer_module, "sample_pairs", lambda *a, **k: draws.extend(sample(*a, **k)) or draws
    )
    config = tiny_config(epochs=1, patience=0)
    config.model.components = []
    config.data.depth = 4
    Trainer(config).fit(train, None, qrels, tmp_path / "depth", space=space)
    assert draws
    for qi, pos, neg in draws:
        assert {pos, neg} <= set(train.queries[qi].docnos[:4])


# -------------------------------------------------------------------------- cross-validation


def test_folds_are_a_seeded_shuffle_of_the_queries() -> None:
    """``kfold_qids``: a partition into near-equal folds, the same for the same seed, other folds
    for another seed, not runs of neighbouring qids. Catches the shuffle left out (folds of
    consecutive queries, one split whatever the seed)."""
    from clir.training.cv import kfold_qids

    qids = [f"q{i:02d}" for i in range(20)]
    folds = kfold_qids(qids, 3, seed=0)
    assert sorted(q for fold in folds for q in fold) == qids
    assert sorted(len(fold) for fold in folds) == [6, 7, 7]
    assert all(fold == sorted(fold) for fold in folds)
    assert kfold_qids(qids, 3, seed=0) == folds
    assert kfold_qids(qids, 3, seed=1) != folds
    assert folds != [qids[:7], qids[7:14], qids[14:]]
