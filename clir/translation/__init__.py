"""Translation (layer 4): IBM Model 1 tables, lexicons, QT / PSQ / DT, local MT models.

Tables hold p(target | source) over analyzed vocabularies (``clir.text`` analyzers), the same
vocabularies as the retrieval index. Translators (registry :data:`TRANSLATORS`, built with
:func:`get_translator`) map texts to texts.
"""

from clir.translation.base import (
    TRANSLATORS,
    TableTranslator,
    Translator,
    analyzer_config,
    get_translator,
    register_translator,
)
from clir.translation.document import (
    parse_expected,
    translate_documents,
    translate_tokens_expected,
    translate_tokens_top1,
)
from clir.translation.freedict import (
    FreeDictTranslator,
    decode_base64_number,
    find_freedict,
    load_freedict,
    parse_entry,
    read_freedict,
)
from clir.translation.ibm1 import NULL, IBM1Translator, IBMModel1, train_ibm1_both
from clir.translation.lexicon import Lexicon, TSVTranslator, read_tsv_lexicon
from clir.translation.mt import MarianTranslator
from clir.translation.query import translate_queries, translate_query_psq, translate_query_qt
from clir.translation.spelling import SpellingMatcher
from clir.translation.table import TranslationTable

__all__ = [
    "NULL",
    "TRANSLATORS",
    "FreeDictTranslator",
    "IBM1Translator",
    "IBMModel1",
    "Lexicon",
    "MarianTranslator",
    "SpellingMatcher",
    "TSVTranslator",
    "TableTranslator",
    "TranslationTable",
    "Translator",
    "analyzer_config",
    "decode_base64_number",
    "find_freedict",
    "get_translator",
    "load_freedict",
    "parse_entry",
    "parse_expected",
    "read_freedict",
    "read_tsv_lexicon",
    "register_translator",
    "train_ibm1_both",
    "translate_documents",
    "translate_queries",
    "translate_query_psq",
    "translate_query_qt",
    "translate_tokens_expected",
    "translate_tokens_top1",
]
