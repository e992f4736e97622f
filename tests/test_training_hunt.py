"""Training options that a config's model or data would ignore, silently, refused at load."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from clir.errors import ConfigError
from clir.training import TrainConfig, load_config


@pytest.mark.parametrize(
    ("values", "message"),
    [
        (  # the softmax loss has no margin: training was bit for bit that of margin 1.0
            {"optim": {"loss": "softmax", "margin": 0.3}},
            "optim.margin=0.3 is invalid; expected 1.0 (the default): the softmax loss has no margin",
        ),
        (  # a linear fusion has no hidden layer
            {"model": {"fusion": "linear", "fusion_hidden": 64}},
            "model.fusion_hidden=64 is invalid; expected 8 (the default): only the 'mlp' fusion",
        ),
        (  # no feature reaches the fusion, so none is dropped
            {"model": {"features": False}, "optim": {"feature_dropout": 0.3}},
            "optim.feature_dropout=0.3 is invalid; expected null or 0: model.features is false",
        ),
        (  # the fusion alone: no component to give a learning rate
            {"model": {"components": []}, "optim": {"component_lr": 0.01}},
            "optim.component_lr=0.01 is invalid; expected null: model.components is empty",
        ),
        (  # every candidate is among the first 50 of 10: every negative is 'hard', drawn uniformly
            {"data": {"depth": 10}, "optim": {"hard_negatives": {"share": 0.5, "depth": 50}}},
            "optim.hard_negatives.depth=50 is invalid; expected a value < 10",
        ),
        (  # the stages' union: 2 x 10 candidates at most
            {
                "data": {"depth": 10, "first_stage": ["qt-bm25", "psq-bm25"]},
                "optim": {"hard_negatives": {"depth": 20}},
            },
            "optim.hard_negatives.depth=20 is invalid; expected a value < 20",
        ),
        (  # 0.4 x 1 negative rounds to no hard negative: every negative drawn uniformly
            {"optim": {"hard_negatives": {"share": 0.4, "depth": 5}}},
            "optim.hard_negatives.share=0.4 is invalid; expected a value >= 0.5",
        ),
        (  # one window holds every (truncated) document whole: window 0's model, to rounding
            {"model": {"interaction_kwargs": {"window": 50}}, "data": {"max_doc_len": 50}},
            "model.interaction_kwargs.window=50 is invalid; expected 0 or a value < data.max_doc_len (50)",
        ),
        (  # no query has a training pair: refused by the trainer after the features were built
            {"data": {"depth": 1}},
            "data.depth=1 is invalid; expected a value >= 2 with one first stage",
        ),
        (  # every kernel feature 0: components of constant score
            {"model": {"interaction_kwargs": {"log_scale": 0.0}}},
            "model.interaction_kwargs: log_scale must be a positive number, got 0.0",
        ),
        (
            {"data": {"negatives_per_positive": 4}, "optim": {"hard_negatives": {"share": 0.1}}},
            "optim.hard_negatives.share=0.1 is invalid; expected a value >= 0.125",
        ),
    ],
)
def test_an_option_the_config_would_ignore_is_refused_at_load_naming_file_and_key(tmp_path, values, message):
    path = tmp_path / "x.yaml"
    path.write_text(yaml.safe_dump(values), encoding="utf-8")
    with pytest.raises(ConfigError, match=re.escape(f"{path}: {message}")):
        load_config(path)


@pytest.mark.parametrize(
    "values",
    [
        {"optim": {"loss": "softmax", "margin": 1.0}},  # the default, written out
        {"optim": {"loss": "hinge", "margin": 0.3}},
        {"model": {"fusion": "linear", "fusion_hidden": 8}},  # as configs/reranker-knrm.yaml
        {"model": {"fusion": "mlp", "fusion_hidden": 64}},
        {"model": {"features": False}, "optim": {"feature_dropout": 0.0}},
        {"model": {"components": [], "features": True}, "optim": {"lr": 0.05}},
        {"data": {"depth": 10}, "optim": {"hard_negatives": {"share": 0.5, "depth": 9}}},
        {"optim": {"hard_negatives": {"share": 0.5, "depth": 5}}},  # 0.5 x 1 rounds (halves up) to 1
        {"data": {"negatives_per_positive": 4}, "optim": {"hard_negatives": {"share": 0.125}}},
        {"model": {"interaction_kwargs": {"window": 49}}, "data": {"max_doc_len": 50}},
        {"model": {"interaction_kwargs": {"log_scale": 0.5}}},
        {"data": {"depth": 1, "first_stage": ["qt-bm25", "psq-bm25"]}},  # two candidates at most
        {"data": {"depth": 2}},
    ],
)
def test_the_neighbours_of_a_refused_option_load(values):
    TrainConfig.from_dict(values, "x.yaml")


def test_an_experiment_names_the_system_whose_option_would_be_ignored(tmp_path):
    from clir.pipeline.config import load_experiment

    configs = Path(__file__).resolve().parents[1] / "configs"
    text = (configs / "default.yaml").read_text(encoding="utf-8")
    text = text.replace(
        "full: {pretrain: weak-full, optim: {loss: softmax}}",
        "full: {pretrain: weak-full, optim: {loss: softmax, margin: 0.5}}",
    )
    path = tmp_path / "default.yaml"
    path.write_text(text, encoding="utf-8")
    (tmp_path / "reranker-knrm-union.yaml").write_text(
        (configs / "reranker-knrm-union.yaml").read_text(encoding="utf-8"), encoding="utf-8"
    )
    with pytest.raises(ConfigError, match=re.escape("systems.full.optim.margin=0.5 is invalid")):
        load_experiment(path)


def test_the_model_settings_are_checked_on_a_model_that_holds_no_weights(monkeypatch):
    # a check model of `pacrr_drmm max_ngram: 1000000` (or `drmm n_bins: 1e9`) had reserved its
    # weights in memory, about 20 GB, while the config was read
    import torch

    from clir.rerankers import INTERACTION_MODELS
    from clir.training import TrainConfig

    devices = []
    knrm = INTERACTION_MODELS["knrm"]

    class Spy(knrm):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            devices.extend(parameter.device.type for parameter in self.parameters())
            devices.append(torch.empty(1).device.type)

    monkeypatch.setitem(INTERACTION_MODELS, "knrm", Spy)
    TrainConfig.from_dict({"model": {"interaction": "knrm"}}, "x.yaml")
    assert devices and set(devices) == {"meta"}


@pytest.mark.parametrize(
    ("values", "message"),
    [
        (  # torch: "Storage size calculation overflowed" (a RuntimeError)
            {"model": {"interaction": "posit_drmm", "interaction_kwargs": {"lstm_hidden": 10**9}}},
            "model.interaction_kwargs={'lstm_hidden': 1000000000} is invalid; expected sizes whose "
            "weights torch can lay out (torch: Storage size calculation overflowed",
        ),
        (  # torch: "Overflow when unpacking long long" (a TypeError)
            {"model": {"interaction": "drmm", "interaction_kwargs": {"hidden": 2**64}}},
            f"model.interaction_kwargs={{'hidden': {2**64}}} is invalid; expected sizes whose weights "
            "torch can lay out (torch: ",
        ),
        (  # the fusion layer is built at training only: its size had failed there
            {"model": {"fusion": "mlp", "fusion_hidden": 2**64}},
            f"model.fusion_hidden={2**64} is invalid; expected a size torch can lay out (torch: ",
        ),
    ],
)
def test_sizes_torch_cannot_lay_out_are_refused_at_load_naming_file_and_key(tmp_path, values, message):
    """They had been 'clir: error: unexpected RuntimeError (a bug in clir...)' at load, or a
    TypeError after the features were built, naming neither the key nor the file."""
    path = tmp_path / "x.yaml"
    path.write_text(yaml.safe_dump(values), encoding="utf-8")
    with pytest.raises(ConfigError, match=re.escape(f"{path}: {message}")):
        load_config(path)
