"""A checkpoint of a training that was killed before its last epoch is not taken for a trained
model: reading it for scoring (``clir rerank`` / ``bundle`` / ``search`` of a member directory)
says that it did not finish."""

import warnings

import pytest
from test_training import make_data, make_space, map_metric, tiny_config

from clir.training import Trainer, load_models


def test_a_checkpoint_of_a_killed_training_is_said_to_be_unfinished_when_it_is_scored(tmp_path):
    """``clir train`` killed after an epoch leaves ``OUT/seed0`` with the best model so far and
    ``"finished": false``; ``clir rerank --model OUT/seed0`` (and ``bundle``) had scored it as a
    trained model, silently."""
    space = make_space()
    train, qrels = make_data(n_queries=12, seed=3)
    dev, dev_qrels = make_data(n_queries=6, seed=4)
    qrels.update(dev_qrels)
    config = tiny_config(epochs=3, patience=0)

    def killed(info):
        if info.epoch == 1:
            raise KeyboardInterrupt

    out = tmp_path / "seed0"
    with pytest.raises(KeyboardInterrupt):
        Trainer(config, metric=map_metric, callbacks=[killed]).fit(train, dev, qrels, out, space=space)
    with pytest.warns(
        UserWarning,
        match=r"seed0: the checkpoint of a training that did not finish \(stopped after epoch 1\)",
    ):
        load_models(out)
    full = Trainer(config, metric=map_metric).fit(train, dev, qrels, tmp_path / "full", space=space)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        load_models(full)  # a finished one is read as before
