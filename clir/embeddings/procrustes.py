"""Orthogonal Procrustes: the rotation that best maps one set of vectors onto another.

Schönemann 1966, "A generalized solution of the orthogonal Procrustes problem",
Psychometrika; used for bilingual embedding mapping by Xing et al. 2015 and Conneau et al. 2018
("Word Translation Without Parallel Data", ICLR; MUSE).
"""

from __future__ import annotations

import numpy as np
from scipy.linalg import orthogonal_procrustes

from clir.errors import ConfigError


def procrustes(source: np.ndarray, target: np.ndarray) -> np.ndarray:
    """The orthogonal map ``W`` minimising ``||source @ W - target||_F``.

    This is MUSE's solution written for row vectors: with ``SVD(targetᵀ source) = U Σ Vᵀ`` MUSE
    maps a column vector ``x`` to ``U Vᵀ x``; for rows that is ``x @ (U Vᵀ)ᵀ``, which is the
    matrix returned here (computed by :func:`scipy.linalg.orthogonal_procrustes`).

    Args:
        source: ``(n, d)`` seed vectors of the source language.
        target: ``(n, d)`` vectors of their translations, row for row.

    Returns:
        ``(d, d)`` orthogonal float32 matrix; map source rows with ``source @ W``.

    Raises:
        ConfigError: If the shapes differ or there are no pairs.
    """
    source = np.asarray(source, dtype=np.float64)
    target = np.asarray(target, dtype=np.float64)
    if source.ndim != 2 or source.shape != target.shape:
        raise ConfigError(
            f"source {source.shape} and target {target.shape}: expected two (n, d) arrays of one shape"
        )
    if source.shape[0] == 0:
        raise ConfigError("procrustes needs at least one seed pair, got none")
    rotation, _ = orthogonal_procrustes(source, target)
    return rotation.astype(np.float32)
