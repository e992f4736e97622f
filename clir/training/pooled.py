"""Pooled kernel features computed once per pair of a training run, not once per epoch.

K-NRM reads the frozen shared space, and its kernels have no parameter: what it learns (the
weights of each component's kernel features, the fusion) comes after the pooling (Xiong et al.
2017, "End-to-End Neural Ad-hoc Ranking with Kernel Pooling", SIGIR). A pair's pooled features
(:meth:`~clir.rerankers.bilingual.BilingualReranker.pooled_features`) are therefore the same in
every epoch, and they are most of an epoch's work: the training pairs drawn again each epoch
and the dev candidates scored after each. :class:`PooledCache` keeps them by the pair's row in
its :class:`~clir.training.data.Tensorizer`. A pair computed alone or among other pairs differs
only in the last bits of float32 (the batch's shape sets the order of the additions), so
training with the cache follows the same course as without it, to rounding.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from clir.rerankers.bilingual import BilingualReranker
from clir.training.data import PairIndex, Tensorizer

POOLED_CACHE_BYTES = 2**30
"""The most memory a :class:`PooledCache` may take (every pair of its tensorizer counted, at
float32); above it nothing is kept and every batch computes its features as before."""


class PooledCache:
    """The pooled kernel features of a tensorizer's pairs, each computed at its first use.

    Models whose pooling is the same (the same :attr:`~BilingualReranker.pooled_groups` of the
    same configuration, reading the same frozen matrix: the members of an ensemble, a model and
    the one fine-tuned from it) may share one cache: each pair is pooled once for all of them.

    Args:
        model: The reranker (its :attr:`~BilingualReranker.pooled_groups` are kept).
        tensorizer: The pairs' tensorizer; :attr:`PairIndex.row` is the key.
        device: Where the batches are scored (and the features kept).
        limit: The most bytes to keep (``None``: :data:`POOLED_CACHE_BYTES`); a larger cache is off.
    """

    def __init__(
        self,
        model: BilingualReranker,
        tensorizer: Tensorizer,
        device: torch.device | str = "cpu",
        limit: int | None = None,
    ) -> None:
        self.model, self.tensorizer, self.device = model, tensorizer, torch.device(device)
        self.limit = POOLED_CACHE_BYTES if limit is None else limit
        self._have = np.zeros(tensorizer.n_rows, dtype=bool)
        self._store: dict[str, Tensor] = {}
        self.enabled = bool(model.pooled_groups)

    def lookup(self, index: PairIndex, model: BilingualReranker | None = None) -> dict[str, Tensor] | None:
        """The pooled features of the pairs of ``index`` (in its order), those of pairs met for
        the first time computed now, in one batch, by ``model`` (default: the cache's; one of
        the same pooling, with its frozen matrix); ``None`` when the cache is off (the model
        then computes them)."""
        if not self.enabled:
            return None
        rows = np.asarray(index.row)
        new = np.flatnonzero(~self._have[rows])
        missing, first = np.unique(rows[new], return_index=True)
        if len(missing):
            positions = new[first]
            batch = self.tensorizer.gather(index.take(positions)).to(self.device)
            features = (model or self.model).pooled_features(batch)
            if not self._store and not self._allocate(features):
                return None
            on_device = torch.from_numpy(missing).to(self.device)
            for name, values in features.items():
                self._store[name][on_device] = values.float()
            self._have[missing] = True
        taken = torch.from_numpy(rows).to(self.device)
        return {name: store.index_select(0, taken) for name, store in self._store.items()}

    def _allocate(self, features: dict[str, Tensor]) -> bool:
        """Make the store for every pair, or turn the cache off when it would pass the limit."""
        shapes = {name: (self.tensorizer.n_rows, *values.shape[1:]) for name, values in features.items()}
        size = sum(4 * int(np.prod(shape)) for shape in shapes.values())
        if size > self.limit:
            self.enabled = False
            return False
        self._store = {name: torch.zeros(shape, device=self.device) for name, shape in shapes.items()}
        return True
