"""Text analysis per language: tokenization, stopwords, lemmatisation and stemming."""

from clir.text.analyzer import AnalyzerConfig, TextAnalyzer, analyzer_from_config, get_analyzer
from clir.text.base import Analyzer

__all__ = ["Analyzer", "AnalyzerConfig", "TextAnalyzer", "analyzer_from_config", "get_analyzer"]
