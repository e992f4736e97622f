"""Tests of clir.rerankers: a contract run against every interaction model, hand-computed cases
for each model's core computation, the bilingual model and the loss."""

from __future__ import annotations

import math

import pytest
import torch

from clir.errors import ConfigError, DataNotFoundError, FormatError
from clir.rerankers import (
    COMPONENTS,
    INTERACTION_MODELS,
    BilingualBatch,
    BilingualReranker,
    InteractionModel,
    PairBatch,
    TokenView,
    build_interaction_model,
    hinge_loss,
    kernel_mus,
    kernel_pooling,
    kernel_sums,
    kmax_pool,
    matching_histogram,
    posit_features,
    softmax_loss,
)
from clir.rerankers.batch import concat_views
from clir.rerankers.knrm import KNRM, grid_kernel_pooling, window_kernel_sums, window_sums
from clir.rerankers.pacrr_drmm import PACRRDRMM

DIM = 8
VOCAB = 40
MODELS = sorted(INTERACTION_MODELS)
CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA is not available")


def table(seed: int = 0) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    weight = torch.randn(VOCAB, DIM, generator=gen)
    weight[0] = 0.0
    return weight


def pairs() -> PairBatch:
    # Row 0 has an exact match (token 1) and a repeated term; row 1 a surface match across
    # two different rows (tokens 5 and 33 share surface id 105).
    return PairBatch.from_lists(
        q_tokens=[[1, 2, 3], [4, 5]],
        d_tokens=[[1, 6, 7, 8, 2, 2], [9, 10, 33, 12]],
        q_idf=[[2.0, 1.0, 0.5], [1.5, 3.0]],
        q_surface=[[101, 102, 103], [104, 105]],
        d_surface=[[101, 106, 107, 108, 102, 102], [109, 110, 105, 112]],
    )


def padded_with_longer(batch: PairBatch, extra_q: int = 3, extra_d: int = 7) -> PairBatch:
    """``batch``'s rows padded further, followed by a longer pair."""
    size, lq = batch.q_tokens.shape
    ld = batch.d_tokens.shape[1]
    long_q = torch.arange(11, 11 + lq + extra_q - 1)
    long_d = torch.arange(1, ld + extra_d + 1) % (VOCAB - 1) + 1

    def grow(t: torch.Tensor, width: int, last: torch.Tensor, fill: float = 0) -> torch.Tensor:
        out = torch.full((size + 1, width), fill, dtype=t.dtype)
        out[:size, : t.shape[1]] = t
        out[size, : last.numel()] = last.to(t.dtype)
        return out

    lq2, ld2 = lq + extra_q, ld + extra_d
    return PairBatch(
        q_tokens=grow(batch.q_tokens, lq2, long_q),
        d_tokens=grow(batch.d_tokens, ld2, long_d),
        q_idf=grow(batch.q_idf, lq2, torch.ones(long_q.numel())),
        q_surface=grow(batch.q_surface, lq2, long_q + 100),
        d_surface=grow(batch.d_surface, ld2, long_d + 100),
    )


# ------------------------------------------------------------------------------ the contract


@pytest.mark.parametrize("name", MODELS)
class TestInteractionModelContract:
    def build(self, name: str, seed: int = 0) -> InteractionModel:
        return build_interaction_model(name, DIM, table(), seed=seed).eval()

    def test_shape_and_finite(self, name: str) -> None:
        scores = self.build(name)(pairs())
        assert scores.shape == (2,)
        assert torch.isfinite(scores).all()

    def test_registry_name_and_no_trainable_embedding(self, name: str) -> None:
        model = self.build(name)
        assert type(model).name == name
        assert "embedding.weight" in model.state_dict()
        assert all("embedding" not in n for n, _ in model.named_parameters())

    def test_gradients_reach_trainable_parameters(self, name: str) -> None:
        model = self.build(name).train()
        model(pairs()).sum().backward()
        params = dict(model.named_parameters())
        assert params
        for pname, p in params.items():
            assert p.grad is not None, pname
            assert torch.isfinite(p.grad).all(), pname
        # every top-level trainable block receives a non-zero gradient
        for child_name, child in model.named_children():
            grads = [p.grad.abs().sum() for p in child.parameters() if p.grad is not None]
            if grads:
                assert sum(grads) > 0, child_name

    def test_padding_never_changes_a_score(self, name: str) -> None:
        model = self.build(name)
        batch = pairs()
        alone = model.predict(batch)
        grown = model.predict(padded_with_longer(batch))
        torch.testing.assert_close(grown[:2], alone, rtol=1e-5, atol=1e-6)
        one = model.predict(
            PairBatch(
                batch.q_tokens[1:, :2],
                batch.d_tokens[1:, :4],
                batch.q_idf[1:, :2],
                batch.q_surface[1:, :2],
                batch.d_surface[1:, :4],
            )
        )
        torch.testing.assert_close(one, alone[1:], rtol=1e-5, atol=1e-6)

    def test_idf_at_padding_is_ignored(self, name: str) -> None:
        model = self.build(name)
        batch = pairs()
        noisy = PairBatch(
            batch.q_tokens,
            batch.d_tokens,
            batch.q_idf + (batch.q_tokens == 0) * 7.0,
            batch.q_surface,
            batch.d_surface,
        )
        torch.testing.assert_close(model.predict(noisy), model.predict(batch))

    def test_save_load_identical_scores(self, name: str, tmp_path) -> None:
        model = self.build(name, seed=3)
        model.save(tmp_path / "m")
        model.save(tmp_path / "m")  # overwriting an existing save works
        loaded = InteractionModel.load(tmp_path / "m")
        assert type(loaded) is type(model)
        assert loaded.get_config() == model.get_config()
        torch.testing.assert_close(loaded.predict(pairs()), model.predict(pairs()), rtol=0, atol=0)

    def test_save_without_embeddings(self, name: str, tmp_path) -> None:
        model = self.build(name)
        model.save(tmp_path / "m", include_embeddings=False)
        bare = InteractionModel.load(tmp_path / "m")
        with pytest.raises(ConfigError, match="no embedding matrix"):
            bare(pairs())
        loaded = type(model).load(tmp_path / "m", embeddings=table())
        torch.testing.assert_close(loaded.predict(pairs()), model.predict(pairs()), rtol=0, atol=0)

    def test_deterministic_under_seed(self, name: str) -> None:
        a, b, c = self.build(name, 7), self.build(name, 7), self.build(name, 8)
        torch.testing.assert_close(a.predict(pairs()), b.predict(pairs()), rtol=0, atol=0)
        assert not torch.equal(a.predict(pairs()), c.predict(pairs()))

    def test_seed_does_not_touch_global_rng(self, name: str) -> None:
        torch.manual_seed(123)
        expected = torch.rand(3)
        torch.manual_seed(123)
        self.build(name, seed=5)
        assert torch.equal(torch.rand(3), expected)

    @CUDA
    def test_cuda_matches_cpu(self, name: str) -> None:
        model = self.build(name)
        cpu = model.predict(pairs())
        gpu = model.to("cuda").predict(pairs().to("cuda"))
        assert gpu.device.type == "cuda"
        torch.testing.assert_close(gpu.cpu(), cpu, rtol=1e-4, atol=1e-5)


def test_unknown_model_lists_the_registry() -> None:
    assert set(MODELS) == {"drmm", "knrm", "pacrr_drmm", "posit_drmm"}
    with pytest.raises(ConfigError, match=r"expected one of \['drmm', 'knrm', 'pacrr_drmm', 'posit_drmm'\]"):
        build_interaction_model("bert", DIM)


def test_bad_arguments_are_named() -> None:
    with pytest.raises(ConfigError, match="embedding_dim"):
        build_interaction_model("knrm", 0)
    with pytest.raises(ConfigError, match="dimension 8 but embedding_dim=4"):
        build_interaction_model("knrm", 4, table())
    with pytest.raises(ConfigError, match="output must be one of"):
        build_interaction_model("knrm", DIM, output="relu")
    with pytest.raises(ConfigError, match="q_idf must have the shape"):
        PairBatch(torch.ones(2, 3, dtype=torch.long), torch.ones(2, 4, dtype=torch.long), torch.ones(2, 2))


def test_load_missing_directory(tmp_path) -> None:
    with pytest.raises(DataNotFoundError, match=r"config\.json"):
        InteractionModel.load(tmp_path / "nothing")


def test_weights_that_do_not_fit_name_the_weights_file(tmp_path) -> None:
    """A saved model's weights are checked by the one function that checks a checkpoint's
    (:func:`weights_misfit`): a tensor added by hand had raised a ConfigError naming no file,
    while a tensor of another shape named it."""
    from safetensors.torch import load_file, save_file

    from clir.rerankers.base import weights_misfit
    from clir.training import checkpoint

    assert checkpoint.weights_misfit is weights_misfit
    build_interaction_model("knrm", DIM, table()).save(tmp_path / "m")
    weights = tmp_path / "m" / "model.safetensors"
    good = load_file(str(weights))
    name = next(k for k in sorted(good) if k != "embedding.weight")
    for tensors, expected in (
        ({**good, "extra": torch.zeros(1)}, r"missing \[\], unexpected \['extra'\]"),
        (
            {**good, name: torch.zeros(good[name].numel() + 1)},
            rf"{name} has shape \({good[name].numel() + 1},\), not",
        ),
    ):
        save_file(tensors, str(weights))
        with pytest.raises(
            FormatError, match=rf"model\.safetensors: weights do not fit the config: {expected}"
        ):
            InteractionModel.load(tmp_path / "m")


# ------------------------------------------------------------------------ hand-computed cases


def test_drmm_histogram_of_the_paper_example() -> None:
    # Guo et al. 2016, section 3: query term "car" against the document (car, rent, truck,
    # bump, injunction, runway) with cosines (1, 0.2, 0.7, 0.3, -0.1, 0.1) and bins
    # [-1,-0.5), [-0.5,0), [0,0.5), [0.5,1), [1,1]: counts [0, 1, 3, 1, 1]. A padded column
    # (value 0.3) and a padded query row must count nowhere.
    sim = torch.tensor([[[1.0, 0.2, 0.7, 0.3, -0.1, 0.1, 0.3], [0.2] * 7]])
    exact = torch.zeros(1, 2, 7, dtype=torch.bool)
    exact[0, 0, 0] = True
    q_mask = torch.tensor([[True, False]])
    d_mask = torch.tensor([[True] * 6 + [False]])
    counts = matching_histogram(sim, exact, q_mask, d_mask, n_bins=5, mode="ch")
    assert counts[0, 0].tolist() == [0.0, 1.0, 3.0, 1.0, 1.0]
    assert counts[0, 1].tolist() == [0.0] * 5
    lch = matching_histogram(sim, exact, q_mask, d_mask, n_bins=5, mode="lch")
    torch.testing.assert_close(lch[0, 0], torch.log1p(torch.tensor([0.0, 1, 3, 1, 1])))
    nh = matching_histogram(sim, exact, q_mask, d_mask, n_bins=5, mode="nh")
    torch.testing.assert_close(nh[0, 0], torch.tensor([0.0, 1, 3, 1, 1]) / 6)
    # a cosine of 1.0 without a surface match goes to the last interval, not the exact bin
    not_exact = matching_histogram(sim, torch.zeros_like(exact), q_mask, d_mask, n_bins=5, mode="ch")
    assert not_exact[0, 0].tolist() == [0.0, 1.0, 3.0, 2.0, 0.0]


def test_drmm_gating_is_idf_softmax() -> None:
    model = build_interaction_model("drmm", DIM, table(), n_bins=5).eval()
    batch = pairs()
    enc = model.encode(batch)
    w = model.gate.weight.item()
    gates = torch.softmax(w * torch.tensor([2.0, 1.0, 0.5]), 0)
    term = model.term_scores(enc)[0]
    torch.testing.assert_close(model.predict(batch)[0], (gates * term).sum())


def test_knrm_kernel_features_by_hand() -> None:
    # Three kernels: mus = [1.0, 0.5, -0.5], sigmas = [0.001, 0.1, 0.1]. Similarity 2×3 (plus
    # one padded doc column of 0.5 and one padded query row, both ignored):
    #   term 1: [1.0, 0.5, 0.4]   term 2: [-0.5, 0.0, 0.6]
    # K(exact) = [1, 0]  (0 -> floored at eps = 1e-10)
    # K(0.5)   = [exp(-.25/.02) + 1 + exp(-.01/.02),  exp(-1/.02) + exp(-.25/.02) + exp(-.01/.02)]
    #          = [e^-12.5 + 1 + e^-0.5,  e^-50 + e^-12.5 + e^-0.5]
    # K(-0.5)  = [e^-112.5 (dropped: < e^-85) + e^-50 + e^-40.5,  1 + e^-12.5 + e^-60.5]
    # phi_k = 0.01 * sum_i log(max(K_k(i), 1e-10))
    e = math.exp
    expected_k = [
        [1.0, e(-12.5) + 1 + e(-0.5), e(-50) + e(-40.5)],
        [0.0, e(-50) + e(-12.5) + e(-0.5), 1 + e(-12.5) + e(-60.5)],
    ]
    phi = [0.01 * sum(math.log(max(row[k], 1e-10)) for row in expected_k) for k in range(3)]
    mus = kernel_mus(3)
    assert mus == [1.0, 0.5, -0.5]
    sigmas = [0.001, 0.1, 0.1]
    sim = torch.tensor([[[1.0, 0.5, 0.4, 0.5], [-0.5, 0.0, 0.6, 0.5], [0.9, 0.9, 0.9, 0.9]]])
    q_mask = torch.tensor([[True, True, False]])
    d_mask = torch.tensor([[True, True, True, False]])
    sums = kernel_sums(sim, d_mask, mus, sigmas)[0, :2]
    torch.testing.assert_close(sums, torch.tensor(expected_k), rtol=1e-5, atol=0)
    got = kernel_pooling(sim, q_mask, d_mask, mus, sigmas)
    torch.testing.assert_close(got, torch.tensor([phi]), rtol=1e-5, atol=1e-7)


def test_knrm_kernels_agree_with_the_direct_formula() -> None:
    gen = torch.Generator().manual_seed(0)
    sim = torch.rand(4, 5, 30, generator=gen) * 2 - 1
    d_mask = torch.rand(4, 30, generator=gen) > 0.2
    mus, sigmas = kernel_mus(11), [0.001] + [0.1] * 10
    mu, sigma = torch.tensor(mus), torch.tensor(sigmas)
    direct = (
        torch.exp(-((sim.double()[..., None] - mu) ** 2) / (2 * sigma**2)) * d_mask[:, None, :, None]
    ).sum(2)
    got = kernel_sums(sim, d_mask, mus, sigmas).double()
    # identical except for terms below e^-85 (which the direct formula keeps as denormals)
    torch.testing.assert_close(got, direct, rtol=1e-5, atol=1e-30)


def test_knrm_kernel_sums_in_place_equals_functional() -> None:
    # eager inference computes the kernels in place; autograd (and torch.compile) take the
    # functional path: both must give the same sums
    gen = torch.Generator().manual_seed(3)
    sim = torch.rand(3, 4, 2, 25, generator=gen) * 2 - 1
    d_mask = torch.rand(3, 2, 25, generator=gen) > 0.3
    mus, sigmas = kernel_mus(11), [0.001] + [0.1] * 10
    in_place = kernel_sums(sim, d_mask, mus, sigmas)
    functional = kernel_sums(sim.clone().requires_grad_(True), d_mask, mus, sigmas)
    assert in_place.shape == (3, 4, 2, 11)
    torch.testing.assert_close(functional.detach(), in_place, rtol=0, atol=0)


def test_knrm_grid_pooling_equals_pooling_of_each_block() -> None:
    gen = torch.Generator().manual_seed(4)
    size, lq, ld, n_q, n_d = 3, 4, 9, 2, 3
    sim_t = torch.rand(size, n_d, ld, n_q * lq, generator=gen) * 2 - 1
    q_mask = torch.rand(size, n_q * lq, generator=gen) > 0.3
    d_mask = torch.rand(size, n_d, ld, generator=gen) > 0.3
    mus, sigmas = kernel_mus(11), [0.001] + [0.1] * 10
    grid = grid_kernel_pooling(sim_t, q_mask, d_mask, n_q, mus, sigmas)
    assert grid.shape == (size, n_q, n_d, 11)
    for i in range(n_q):
        rows = slice(i * lq, (i + 1) * lq)
        for j in range(n_d):
            block = sim_t[:, j, :, rows].transpose(1, 2)
            alone = kernel_pooling(block, q_mask[:, rows], d_mask[:, j], mus, sigmas)
            torch.testing.assert_close(grid[:, i, j], alone, rtol=1e-5, atol=1e-7)


def test_window_sums_by_hand() -> None:
    values = torch.tensor([[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0]])
    # windows of 4 every 2 positions, padded with one 0 to cover position 6: [0,4) [2,6) [4,8)
    assert window_sums(values, 4).tolist() == [[10.0, 18.0, 18.0]]
    assert window_sums(values, 7).tolist() == [[28.0]] and window_sums(values, 9).tolist() == [[28.0]]
    assert window_sums(values, 1).tolist() == values.tolist()


@pytest.mark.parametrize("window", [1, 2, 3, 4, 6, 7, 10, 23, 40])
def test_window_kernel_sums_equal_kernel_sums_of_each_window(window: int) -> None:
    # the document-major windowed pass (grid pooling's) against kernel_sums over window_sums,
    # for even and odd windows and windows as long as the document or longer; in place
    # (eager inference) and functional (autograd, torch.compile) alike
    gen = torch.Generator().manual_seed(window)
    sim_t = torch.rand(3, 2, 23, 5, generator=gen) * 2 - 1
    sim_t[sim_t > 0.8] = 1.0
    d_mask = torch.rand(3, 2, 23, generator=gen) > 0.3
    mus, sigmas = kernel_mus(11), [0.001] + [0.1] * 10
    expected = kernel_sums(sim_t.permute(0, 3, 1, 2), d_mask, mus, sigmas, window)  # (B, R, n_d, n_w, K)
    got = window_kernel_sums(sim_t, d_mask, mus, sigmas, window)
    assert got.shape == expected.permute(0, 2, 3, 4, 1).shape
    torch.testing.assert_close(got, expected.permute(0, 2, 3, 4, 1), rtol=1e-6, atol=0)
    functional = window_kernel_sums(sim_t.clone().requires_grad_(True), d_mask, mus, sigmas, window)
    torch.testing.assert_close(functional.detach(), got, rtol=1e-6, atol=0)


def test_knrm_window_pooling_by_hand_and_padding() -> None:
    # one query term, similarity 1.0 (exact) at document positions 0 and 9 (of 10), 0.0 elsewhere
    mus, sigmas = kernel_mus(3), [0.001, 0.1, 0.1]
    sim = torch.zeros(1, 1, 10)
    sim[0, 0, [0, 9]] = 1.0
    q_mask, d_mask = torch.ones(1, 1, dtype=torch.bool), torch.ones(1, 10, dtype=torch.bool)
    whole = kernel_pooling(sim, q_mask, d_mask, mus, sigmas)
    windowed = kernel_pooling(sim, q_mask, d_mask, mus, sigmas, window=4)
    # exact kernel: 2 matches in the whole document, at most 1 in any window of 4
    assert whole[0, 0].item() == pytest.approx(0.01 * math.log(2), rel=1e-5)
    assert windowed[0, 0].item() == pytest.approx(0.0, abs=1e-7)
    # a window as long as the document is the whole document
    torch.testing.assert_close(kernel_pooling(sim, q_mask, d_mask, mus, sigmas, window=10), whole)
    # padding the document (any amount) never changes the windowed features
    gen = torch.Generator().manual_seed(8)
    sim = torch.rand(5, 3, 23, generator=gen) * 2 - 1
    q_mask = torch.rand(5, 3, generator=gen) > 0.2
    lengths = torch.tensor([23, 17, 5, 11, 1])
    d_mask = torch.arange(23) < lengths[:, None]
    base = kernel_pooling(sim, q_mask, d_mask, kernel_mus(11), [0.001] + [0.1] * 10, window=6)
    for extra in (1, 2, 5, 30):
        padded = torch.cat([sim, torch.rand(5, 3, extra, generator=gen)], dim=2)
        mask = torch.cat([d_mask, torch.zeros(5, extra, dtype=torch.bool)], dim=1)
        got = kernel_pooling(padded, q_mask, mask, kernel_mus(11), [0.001] + [0.1] * 10, window=6)
        torch.testing.assert_close(got, base, rtol=1e-6, atol=1e-7)
    with pytest.raises(ConfigError, match="window must be an integer >= 0"):
        KNRM(DIM, window=-1)


def test_knrm_score_is_tanh_of_linear_features() -> None:
    model = build_interaction_model("knrm", DIM, table()).eval()
    lin = build_interaction_model("knrm", DIM, table(), output="linear").eval()
    enc = model.encode(pairs())
    raw = model.dense(model.features(enc)).squeeze(-1)
    torch.testing.assert_close(model.predict(pairs()), torch.tanh(raw))
    torch.testing.assert_close(lin.predict(pairs()), raw)


def test_pacrr_kmax_pooling_by_hand() -> None:
    values = torch.tensor(
        [
            [[3.0, 1.0, 2.0, 9.0]],  # padded 9 must not win: top-2 = [3, 2]
            [[-4.0, 8.0, 7.0, 6.0]],  # one real term: [-4, 0]
            [[5.0, 5.0, 5.0, 5.0]],  # empty document: [0, 0]
        ]
    )
    d_mask = torch.tensor([[True, True, True, False], [True, False, False, False], [False] * 4])
    assert kmax_pool(values, d_mask, 2).tolist() == [[[3.0, 2.0]], [[-4.0, 0.0]], [[0.0, 0.0]]]
    # a batch whose documents are all shorter than k
    short = kmax_pool(torch.tensor([[[0.5]]]), torch.tensor([[True]]), 3)
    assert short.tolist() == [[[0.5, 0.0, 0.0]]]


def test_pacrr_unigram_features_by_hand() -> None:
    # With one 1×1 filter of weight 1 and bias 0, the n=1 features are the top-2 cosines of the
    # real document terms (ReLU'd), and the last feature is softmax(idf) over the query terms.
    model = PACRRDRMM(DIM, table(), max_ngram=1, n_filters=1, k_max=2)
    with torch.no_grad():
        model.convs[0].weight.fill_(1.0)
        model.convs[0].bias.zero_()
    enc = model.encode(pairs())
    feats = model.term_features(enc)
    sim = enc.sim[0, 0, :6]
    top2 = sim.clamp(min=0).topk(2).values
    torch.testing.assert_close(feats[0, 0, :2], top2)
    torch.testing.assert_close(feats[0, :, 2], torch.softmax(torch.tensor([2.0, 1.0, 0.5]), 0))


def test_posit_features_by_hand() -> None:
    # One query term, document of 3 real terms + 1 padded (value 5, ignored), k = 2:
    #   contextual [0.1, 0.8, 0.3] -> max 0.8, mean of top 2 (0.8+0.3)/2 = 0.55
    #   raw        [0.5, -0.2, 0.9] -> max 0.9, mean (0.9+0.5)/2 = 0.7
    #   exact      [0, 0, 1]        -> max 1,   mean (1+0)/2 = 0.5
    ctx = torch.tensor([[[0.1, 0.8, 0.3, 5.0]]])
    raw = torch.tensor([[[0.5, -0.2, 0.9, 5.0]]])
    exact = torch.tensor([[[False, False, True, True]]])
    d_mask = torch.tensor([[True, True, True, False]])
    got = posit_features(ctx, raw, exact, d_mask, k=2)
    torch.testing.assert_close(got, torch.tensor([[[0.8, 0.55, 0.9, 0.7, 1.0, 0.5]]]))
    # a one-term document averages the one value it has
    one = posit_features(ctx, raw, exact, torch.tensor([[True, False, False, False]]), k=2)
    torch.testing.assert_close(one, torch.tensor([[[0.1, 0.1, 0.5, 0.5, 0.0, 0.0]]]))


def test_posit_contextual_encoding_is_residual() -> None:
    model = build_interaction_model("posit_drmm", DIM, table()).eval()
    with torch.no_grad():
        for p in model.lstm.parameters():
            p.zero_()
    # zero LSTM weights -> zero outputs -> the encoding is the word vector itself
    vectors = torch.randn(2, 4, DIM)
    mask = torch.tensor([[True, True, True, False], [True, False, False, False]])
    torch.testing.assert_close(model.contextual(vectors, mask), vectors * mask[..., None])


def test_hinge_loss_by_hand() -> None:
    pos = torch.tensor([2.0, 0.5, 0.0])
    neg = torch.tensor([0.0, 0.0, 0.5])
    # max(0, 1 - 2 + 0) = 0; max(0, 1 - 0.5) = 0.5; max(0, 1 - 0 + 0.5) = 1.5
    assert hinge_loss(pos, neg, reduction="none").tolist() == [0.0, 0.5, 1.5]
    assert hinge_loss(pos, neg).item() == pytest.approx(2.0 / 3)
    assert hinge_loss(pos, neg, margin=2.0, reduction="sum").item() == pytest.approx(0 + 1.5 + 2.5)
    with pytest.raises(ConfigError, match="same shape"):
        hinge_loss(pos, neg[:2])


def test_softmax_loss_by_hand() -> None:
    pos = torch.tensor([2.0, 0.0])
    neg = torch.tensor([[0.0, 1.0], [0.0, 0.0]])
    # -log(e^2 / (e^2 + e^0 + e^1)); -log(1 / 3)
    first = -math.log(math.exp(2) / (math.exp(2) + 1 + math.exp(1)))
    assert softmax_loss(pos, neg, reduction="none").tolist() == pytest.approx([first, math.log(3)])
    assert softmax_loss(pos, neg).item() == pytest.approx((first + math.log(3)) / 2)
    assert softmax_loss(pos, neg, reduction="sum").item() == pytest.approx(first + math.log(3))
    with pytest.raises(ConfigError, match=r"\(B, n\)"):
        softmax_loss(pos, neg[0])


# ---------------------------------------------------------------------------- bilingual model


def bilingual_batch(features: int = 2) -> BilingualBatch:
    gen = torch.Generator().manual_seed(1)
    return BilingualBatch(
        q_en=TokenView.from_lists(
            [[1, 2, 3], [4, 5]], [[101, 102, 103], [104, 105]], [[2.0, 1.0, 0.5], [1.5, 3]]
        ),
        q_src=TokenView.from_lists([[20, 21], [22, 23, 24, 25]], idf=[[1.0, 2.0], [1, 1, 2, 2]]),
        d_src=TokenView.from_lists([[20, 26, 27, 21, 30], [31, 32, 22]]),
        d_en=TokenView.from_lists(
            [[1, 6, 7], [9, 10, 5, 12, 13, 14]], [[101, 106, 107], [109, 110, 105, 112, 113, 114]]
        ),
        features=torch.randn(2, features, generator=gen) if features else None,
    )


@pytest.mark.parametrize("name", MODELS)
def test_bilingual_components_match_stand_alone_models(name: str) -> None:
    model = BilingualReranker(DIM, table(), model=name, n_features=2).eval()
    batch = bilingual_batch()
    scores = model.component_scores(batch)
    assert list(scores) == list(COMPONENTS)
    for comp, (qv, dv) in COMPONENTS.items():
        alone = build_interaction_model(name, DIM, table()).eval()
        alone.load_state_dict(model.scorer(comp).state_dict(), strict=False)
        torch.testing.assert_close(scores[comp], alone.predict(batch.pair(qv, dv)))
    out = model.predict(batch)
    assert out.shape == (2,) and torch.isfinite(out).all()


@pytest.mark.parametrize("gating", ["idf", "vector"])
def test_knrm_term_gating_weighs_each_terms_log_kernels(gating: str) -> None:
    """φ_k = log_scale · Σ_i n · softmax_i(w · g_i) · log K_k(i): by hand from ungated single-term
    features; w = 0 (the start) is K-NRM exactly."""
    batch = pairs()
    plain = build_interaction_model("knrm", DIM, table(), window=4).eval()
    gated = build_interaction_model("knrm", DIM, table(), window=0, gating=gating).eval()
    gated.load_state_dict(plain.state_dict(), strict=False)
    gated.window = 4
    pair = gated.encode(batch)
    torch.testing.assert_close(gated.features(pair), plain.features(pair))
    with torch.no_grad():
        gated.gate.weight.normal_(generator=torch.Generator().manual_seed(3))
    gate_in = pair.q_idf.unsqueeze(-1) if gating == "idf" else pair.q_unit
    logits = (gate_in @ gated.gate.weight[0]).masked_fill(~pair.q_mask, -math.inf)
    weights = torch.softmax(logits, -1) * pair.q_mask.sum(-1, keepdim=True)
    expected = torch.zeros(2, gated.n_kernels)
    for b in range(2):
        for i in range(int(pair.q_mask[b].sum())):
            one = pair.q_mask.clone()
            one[b] = False
            one[b, i] = True
            alone = kernel_pooling(
                gated.similarity(pair), one, pair.d_mask, gated.mus, gated.sigmas, window=0
            )
            expected[b] += weights[b, i] * alone[b]
    gated.window = 0
    torch.testing.assert_close(gated.features(pair), expected)
    assert not torch.allclose(expected, plain.features(pair))


@pytest.mark.parametrize("gating", ["idf", "vector"])
def test_bilingual_gated_components_match_stand_alone_models(gating: str) -> None:
    kwargs = {"window": 4, "gating": gating}
    model = BilingualReranker(DIM, table(), model_kwargs=kwargs, n_features=2).eval()
    with torch.no_grad():
        for k, comp in enumerate(COMPONENTS):
            model.scorer(comp).gate.weight.normal_(generator=torch.Generator().manual_seed(k))
    batch = bilingual_batch()
    scores = model.component_scores(batch)
    for comp, (qv, dv) in COMPONENTS.items():
        alone = build_interaction_model("knrm", DIM, table(), **kwargs).eval()
        alone.load_state_dict(model.scorer(comp).state_dict(), strict=False)
        torch.testing.assert_close(scores[comp], alone.predict(batch.pair(qv, dv)))
    loss = model.train()(batch).sum()
    loss.backward()
    assert all(model.scorer(c).gate.weight.grad.abs().sum() > 0 for c in COMPONENTS)


def test_bilingual_linear_fusion_and_explain() -> None:
    model = BilingualReranker(DIM, table(), n_features=2, feature_names=["ql", "overlap"]).eval()
    batch = bilingual_batch()
    ex = model.explain(batch)
    assert ex.input_names == [*COMPONENTS, "ql", "overlap"]
    comp = torch.stack([ex.component_scores[c] for c in COMPONENTS], 1)
    torch.testing.assert_close(ex.inputs, torch.cat([comp, batch.features], 1))
    w, b = model.fusion.net.weight[0], model.fusion.net.bias
    torch.testing.assert_close(ex.score, ex.inputs @ w + b)
    torch.testing.assert_close(ex.contributions.sum(1) + b, model.predict(batch))
    torch.testing.assert_close(ex.shares.sum(1), torch.ones(2))
    assert ex.similarity["en_en"].shape == (2, 3, 6)
    mlp = BilingualReranker(DIM, table(), n_features=2, fusion="mlp").eval()
    assert mlp.explain(batch).contributions.shape == (2, 6)


def test_bilingual_ablations() -> None:
    batch = bilingual_batch()
    one = BilingualReranker(DIM, table(), components=["en_en"], n_features=2)
    assert one.fusion.n_inputs == 3 and list(one.scorers) == ["en_en"]
    assert one.predict(batch).shape == (2,)
    lexical = BilingualReranker(DIM, table(), components=[], n_features=2)
    assert not list(lexical.scorers)
    w, b = lexical.fusion.net.weight[0], lexical.fusion.net.bias
    torch.testing.assert_close(lexical.predict(batch), batch.features @ w + b)
    neural_only = BilingualReranker(DIM, table())
    assert neural_only.predict(bilingual_batch(features=0)).shape == (2,)
    with pytest.raises(ConfigError, match="no active component"):
        BilingualReranker(DIM, table(), components=[])
    with pytest.raises(ConfigError, match="components must be distinct names"):
        BilingualReranker(DIM, table(), components=["en_fr"])
    with pytest.raises(ConfigError, match=r"features of shape \(B, 3\)"):
        BilingualReranker(DIM, table(), n_features=3)(batch)


def test_bilingual_feature_dropout_in_training_only(tmp_path) -> None:
    batch = bilingual_batch(features=50)
    model = BilingualReranker(DIM, table(), n_features=50, feature_dropout=0.5)
    plain = BilingualReranker(DIM, table(), n_features=50)  # the same weights (same seed)
    torch.testing.assert_close(model.eval()(batch), plain.eval()(batch), rtol=0, atol=0)
    model.train()
    torch.manual_seed(3)
    inputs = model._inputs(batch)[0]
    torch.manual_seed(3)
    torch.testing.assert_close(model._inputs(batch)[0], inputs, rtol=0, atol=0)  # seeded: the same
    torch.manual_seed(4)
    assert not torch.equal(model._inputs(batch)[0], inputs)
    n = len(COMPONENTS)
    torch.testing.assert_close(inputs[:, :n], plain.train()._inputs(batch)[0][:, :n])  # scores kept
    kept = inputs[:, n:] != 0
    assert 0.3 < kept.float().mean() < 0.7
    torch.testing.assert_close(inputs[:, n:][kept], batch.features[kept] * 2)  # kept / (1 - p)
    model.save(tmp_path / "m")
    assert BilingualReranker.load(tmp_path / "m").feature_dropout == 0.5
    with pytest.raises(ConfigError, match=r"feature_dropout must be in \[0, 1\), got 1"):
        BilingualReranker(DIM, table(), n_features=2, feature_dropout=1)


def test_bilingual_shared_and_mixed_weights() -> None:
    separate = BilingualReranker(DIM, table(), model="drmm")
    shared = BilingualReranker(DIM, table(), model="drmm", share_weights=True)
    per = sum(p.numel() for p in shared.scorers["shared"].parameters())
    fusion = sum(p.numel() for p in shared.fusion.parameters())
    assert sum(p.numel() for p in shared.parameters()) == per + fusion
    assert sum(p.numel() for p in separate.parameters()) == 4 * per + fusion
    mixed = BilingualReranker(
        DIM, table(), component_models={"src_src": {"model": "pacrr_drmm", "kwargs": {"n_filters": 4}}}
    )
    assert type(mixed.scorer("src_src")).name == "pacrr_drmm"
    assert type(mixed.scorer("en_en")).name == "knrm"
    assert mixed.predict(bilingual_batch(0)).shape == (2,)


def random_view(gen: torch.Generator, size: int, length: int, surface: bool, idf: bool) -> TokenView:
    """A view with rows of random real lengths (padding at the end) and colliding surface ids."""
    lengths = torch.randint(1, length + 1, (size,), generator=gen)
    real = torch.arange(length) < lengths[:, None]
    tokens = torch.randint(1, VOCAB, (size, length), generator=gen) * real
    return TokenView(
        tokens,
        (tokens % 7 + 100) * (tokens != 0) if surface else None,
        torch.rand(size, length, generator=gen) * 3 if idf else None,
    )


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"share_weights": True},
        {"components": ["en_src", "src_en"]},
        {"components": ["src_en", "en_en"]},
        {"model_kwargs": {"exact_match": False, "output": "linear"}},
        {"component_models": {"en_en": {"model": "knrm", "kwargs": {"sigma": 0.2}}}},
        {"model_kwargs": {"window": 4}},
    ],
)
def test_bilingual_knrm_grid_equals_per_component_pairs(options: dict) -> None:
    # The bilingual model scores its K-NRM components together (queries side by side, one
    # product per document view, one kernel pass); each component must score exactly as the
    # stand-alone model on its own pair, whatever the view lengths, surfaces and subsets.
    gen = torch.Generator().manual_seed(5)
    size = 6
    batch = BilingualBatch(
        q_en=random_view(gen, size, 5, surface=True, idf=True),
        q_src=random_view(gen, size, 3, surface=False, idf=True),
        d_src=random_view(gen, size, 17, surface=False, idf=False),
        d_en=random_view(gen, size, 11, surface=True, idf=False),
    )
    model = BilingualReranker(DIM, table(), model="knrm", **options).eval()
    scores = model.component_scores(batch)
    assert list(scores) == model.components
    for comp in model.components:
        scorer = model.scorer(comp)
        alone = type(scorer)(embeddings=table(), **scorer.get_config()).eval()
        alone.load_state_dict(scorer.state_dict(), strict=False)
        expected = alone.predict(batch.pair(*COMPONENTS[comp]))
        torch.testing.assert_close(scores[comp], expected, rtol=1e-5, atol=1e-6)


def test_concat_views_pads_each_view() -> None:
    a = TokenView.from_lists([[1, 2], [3]], surface=[[11, 12], [13]], idf=[[0.5, 1.0], [2.0]])
    b = TokenView.from_lists([[4, 5, 6], [7]], idf=[[1.0, 1.0, 1.0], [3.0]])
    joint = concat_views([a, b])
    assert joint.tokens.tolist() == [[1, 2, 0, 4, 5, 6], [3, 0, 0, 7, 0, 0]]
    assert joint.surface.tolist() == [[11, 12, 0, 4, 5, 6], [13, 0, 0, 7, 0, 0]]
    assert joint.idf.tolist() == [[0.5, 1.0, 0.0, 1.0, 1.0, 1.0], [2.0, 0.0, 0.0, 3.0, 0.0, 0.0]]
    assert concat_views([b, TokenView(b.tokens)]).idf is None
    assert b.pad_to(3) is b
    assert b.pad_to(5).tokens.tolist() == [[4, 5, 6, 0, 0], [7, 0, 0, 0, 0]]


def test_bilingual_padding_invariance() -> None:
    model = BilingualReranker(DIM, table(), model="posit_drmm", n_features=2).eval()
    batch = bilingual_batch()

    def pad(view: TokenView, extra: int) -> TokenView:
        grow = lambda t: None if t is None else torch.nn.functional.pad(t, (0, extra))  # noqa: E731
        return TokenView(grow(view.tokens), grow(view.surface), grow(view.idf))

    padded = BilingualBatch(
        pad(batch.q_en, 2), pad(batch.q_src, 1), pad(batch.d_src, 5), pad(batch.d_en, 3), batch.features
    )
    torch.testing.assert_close(model.predict(padded), model.predict(batch), rtol=1e-5, atol=1e-6)


def test_bilingual_save_load(tmp_path) -> None:
    model = BilingualReranker(DIM, table(), model="knrm", n_features=2, fusion="mlp", seed=4)
    model.save(tmp_path / "b")
    keys = [k for k in model.state_dict() if "embedding" in k]
    assert keys == ["embedding.weight"]  # the matrix is stored once, not once per component
    loaded = BilingualReranker.load(tmp_path / "b")
    assert loaded.get_config() == model.get_config()
    torch.testing.assert_close(
        loaded.predict(bilingual_batch()), model.predict(bilingual_batch()), rtol=0, atol=0
    )
    model.save(tmp_path / "c", include_embeddings=False)
    again = BilingualReranker.load(tmp_path / "c", embeddings=table())
    torch.testing.assert_close(
        again.predict(bilingual_batch()), model.predict(bilingual_batch()), rtol=0, atol=0
    )
    with pytest.raises(ConfigError, match="unknown interaction model 'bilingual'"):
        InteractionModel.load(tmp_path / "b")


def test_bilingual_trains_with_hinge_loss() -> None:
    # positives share terms with the query, negatives do not; a few Adam steps separate them
    gen = torch.Generator().manual_seed(0)
    queries = torch.randint(1, 20, (16, 3), generator=gen)
    pos = torch.cat([queries, torch.randint(20, VOCAB, (16, 5), generator=gen)], 1)
    neg = torch.randint(20, VOCAB, (16, 8), generator=gen)
    idf = torch.ones(16, 3)

    def batch(docs: torch.Tensor) -> BilingualBatch:
        q, d = TokenView(queries, idf=idf), TokenView(docs)
        return BilingualBatch(q, q, d, d)

    model = BilingualReranker(DIM, table(), model="knrm", model_kwargs={"output": "linear"}, seed=0)
    opt = torch.optim.Adam(model.parameters(), lr=0.05)
    losses = []
    for _ in range(30):
        opt.zero_grad()
        loss = hinge_loss(model(batch(pos)), model(batch(neg)))
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.5 * losses[0]
    assert (model.predict(batch(pos)) > model.predict(batch(neg))).all()


@CUDA
@pytest.mark.parametrize(("name", "kwargs"), [("posit_drmm", {}), ("knrm", {}), ("knrm", {"window": 4})])
def test_bilingual_cuda_matches_cpu(name: str, kwargs: dict) -> None:
    model = BilingualReranker(DIM, table(), model=name, n_features=2, model_kwargs=kwargs).eval()
    cpu = model.predict(bilingual_batch())
    gpu = model.to("cuda").predict(bilingual_batch().to("cuda"))
    torch.testing.assert_close(gpu.cpu(), cpu, rtol=1e-4, atol=1e-5)


@CUDA
def test_bilingual_windowed_knrm_compiled_matches_eager_on_cuda() -> None:
    model = BilingualReranker(DIM, table(), model="knrm", n_features=2, model_kwargs={"window": 4})
    model = model.to("cuda").eval()
    batch = bilingual_batch().to("cuda")
    with torch.inference_mode():
        eager = model(batch)
        compiled = torch.compile(model)(batch)
    torch.testing.assert_close(compiled, eager, rtol=1e-4, atol=1e-5)
