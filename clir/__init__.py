"""clir: cross-lingual information retrieval for low-resource languages.

The public names below are imported lazily, so ``import clir`` stays cheap (no torch, gensim or
faiss until a name that needs them is used).
"""

from __future__ import annotations

import importlib
from typing import Any

from clir._version import __version__

_PUBLIC = {
    "Collection": "clir.datasets",
    "build_bible_collection": "clir.datasets",
    "import_collection": "clir.datasets",
    "get_analyzer": "clir.text",
    "IBMModel1": "clir.translation",
    "TranslationTable": "clir.translation",
    "BM25": "clir.retrieval",
    "QueryLikelihood": "clir.retrieval",
    "FirstStage": "clir.retrieval",
    "SharedSpace": "clir.embeddings",
    "BilingualReranker": "clir.rerankers",
    "Trainer": "clir.training",
    "load_config": "clir.training",
    "evaluate": "clir.evaluation",
    "compare": "clir.evaluation",
    "load_experiment": "clir.pipeline.config",
    "run_experiment": "clir.pipeline.experiment",
    "Bundle": "clir.pipeline.bundle",
    "save_pretrained": "clir.pipeline.bundle",
}

__all__ = ["__version__", *sorted(_PUBLIC)]


def __getattr__(name: str) -> Any:
    if name in _PUBLIC:
        return getattr(importlib.import_module(_PUBLIC[name]), name)
    raise AttributeError(f"module 'clir' has no attribute {name!r}")
