"""Readers and writers for the standard formats: TREC runs and qrels, topics TSV/XML,
documents JSONL and parallel-text TSV. Every reader names the file and line of a malformed
line; every writer is atomic. Every reader and writer holds qids, docnos and pair ids to one rule
(:mod:`clir.formats.identifiers`), and every reader drops a leading UTF-8 byte order mark."""

from clir.formats.atomic import atomic_directory, atomic_write
from clir.formats.documents import iter_documents, read_documents, write_documents
from clir.formats.identifiers import check_identifier, identifier_problem
from clir.formats.parallel import read_parallel, write_parallel
from clir.formats.qrels import GRADES, read_qrels, write_qrels
from clir.formats.runs import RunArrays, ranked, read_run, write_run
from clir.formats.topics import read_topics, write_topics, write_topics_xml

__all__ = [
    "GRADES",
    "RunArrays",
    "atomic_directory",
    "atomic_write",
    "check_identifier",
    "identifier_problem",
    "iter_documents",
    "ranked",
    "read_documents",
    "read_parallel",
    "read_qrels",
    "read_run",
    "read_topics",
    "write_documents",
    "write_parallel",
    "write_qrels",
    "write_run",
    "write_topics",
    "write_topics_xml",
]
