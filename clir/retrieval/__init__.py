"""Lexical retrieval: a sparse inverted index, BM25 and Dirichlet query likelihood scored in
batches with sparse products, PSQ query terms, and first-stage search over QT / PSQ / DT."""

from clir.retrieval.base import RETRIEVERS, Results, Retriever, get_retriever, retriever_class
from clir.retrieval.bm25 import BM25
from clir.retrieval.index import SparseIndex
from clir.retrieval.ql import QueryLikelihood
from clir.retrieval.search import MODES, FirstStage

__all__ = [
    "BM25",
    "MODES",
    "RETRIEVERS",
    "FirstStage",
    "QueryLikelihood",
    "Results",
    "Retriever",
    "SparseIndex",
    "get_retriever",
    "retriever_class",
]
