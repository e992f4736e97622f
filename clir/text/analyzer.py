"""The configurable per-language analyzer: Unicode tokenization, stopwords, lemmas or stems.

Defaults per language (``LANGUAGE_DEFAULTS``): English is stemmed with Snowball; Swahili and
Tagalog are lemmatised with simplemma; any other language gets lowercased tokens, stopwords from
stopwordsiso when it has a list, and a Snowball stemmer when one exists. A language with none of
these still works (tokens only) and gets a warning.
"""

from __future__ import annotations

import functools
import re
import unicodedata
import warnings
from dataclasses import asdict, dataclass, field
from typing import Any

import snowballstemmer
import stopwordsiso

from clir.errors import ConfigError
from clir.text.base import Analyzer


def _char_classes(*categories: str) -> list[str]:
    """Regex character class bodies, one per category prefix, of every character whose Unicode
    category starts with it: ``"M"``, the combining marks (Mn, Mc, Me), which Python's ``\\w``
    leaves out, so Hindi vowel signs or a decomposed accent would split words; ``"Cf"``, the
    invisible format characters. Both lie in planes 0, 1 and 14 only (Unicode 15), which are
    scanned once at import."""
    codes: dict[str, list[int]] = {category: [] for category in categories}
    for plane in (0, 1, 14):
        for c in range(plane << 16, (plane + 1) << 16):
            found = unicodedata.category(chr(c))
            for category in categories:
                if found.startswith(category):
                    codes[category].append(c)
    bodies = []
    for found in codes.values():
        spans, start = [], found[0]
        for prev, code in zip(found, [*found[1:], -1], strict=True):
            if code != prev + 1:
                spans.append(re.escape(chr(start)) + (f"-{re.escape(chr(prev))}" if prev > start else ""))
                start = code
        bodies.append("".join(spans))
    return bodies


_MARKS, _FORMATS = _char_classes("M", "Cf")

# A word is a run of letters/digits, possibly joined by an apostrophe or hyphen inside it
# (Swahili ng'ombe, Tagalog mag-aral, English don't); outside ASCII, with the combining marks on
# its letters (a slower pattern, so ASCII text keeps the first), ’ as apostrophe and the
# typographic hyphens ‐ and ‑ (U+2010, U+2011) as hyphen (they had split "mag‑aral"). A word
# begins with a letter or digit (the lone U+FE0F of an emoji had been a word, one of all such).
_WORD = re.compile(r"[^\W_]+(?:['’\-][^\W_]+)*")
_LETTERS = rf"(?:[^\W_]|[{_MARKS}])+"
_MARKED_WORD = re.compile(rf"(?=[^\W_]){_LETTERS}(?:['’\-\u2010\u2011]{_LETTERS})*")
_FOLDED = str.maketrans({"’": "'", "\u2010": "-", "\u2011": "-"})

# Invisible format characters (soft hyphen, zero-width joiner and non-joiner, word joiner, BOM,
# direction marks) are dropped: they had split a word ("mag\u00adaral" was "mag" and "aral").
# ZERO WIDTH SPACE is not dropped: it separates words (in Thai or Khmer text).
_FORMAT = re.compile(rf"(?!\u200b)[{_FORMATS}]")


def _fold(word: str) -> str:
    """A word written as :meth:`TextAnalyzer.tokenize` writes its tokens (format characters
    dropped, NFC, lowercased, ’ as ', ‐ and ‑ as -): how stopwords are matched."""
    return unicodedata.normalize("NFC", _FORMAT.sub("", word)).lower().translate(_FOLDED)


# Scripts written without spaces between words: clir has no segmenter for them, so a run of
# such text is one token (warned about when an analyzer is made for these languages).
UNSEGMENTED = frozenset({"bo", "ja", "km", "lo", "my", "th", "zh"})

# ISO 639-1 code -> Snowball algorithm name.
SNOWBALL = {
    "ar": "arabic", "ca": "catalan", "cs": "czech", "da": "danish", "de": "german", "el": "greek",
    "en": "english", "es": "spanish", "et": "estonian", "eu": "basque", "fa": "persian",
    "fi": "finnish", "fr": "french", "ga": "irish", "hi": "hindi", "hu": "hungarian",
    "hy": "armenian", "id": "indonesian", "it": "italian", "lt": "lithuanian", "ne": "nepali",
    "nl": "dutch", "no": "norwegian", "pl": "polish", "pt": "portuguese", "ro": "romanian",
    "ru": "russian", "sr": "serbian", "st": "sesotho", "sv": "swedish", "ta": "tamil",
    "tr": "turkish", "yi": "yiddish",
}  # fmt: skip

# Languages simplemma lemmatises well enough to prefer lemmas over Snowball stems.
LEMMATIZED = frozenset({"sw", "tl"})

# stopwordsiso's English list (1,298 words) removes content words such as "man", "world" and
# "home"; English uses its intersection with scikit-learn's list, minus the content words left in.
_ENGLISH_CONTENT = frozenset(
    "bill bottom call computer cry describe detail fill find fire found front full give interest "
    "made mill move name part show side sincere system thick thin top back".split()
)


@functools.cache
def _stopwords(lang: str) -> frozenset[str]:
    if not stopwordsiso.has_lang(lang):
        return frozenset()
    words = stopwordsiso.stopwords(lang)
    if lang == "en":
        from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

        words = (words & ENGLISH_STOP_WORDS) - _ENGLISH_CONTENT
    # as tokens are: Hindi "काफ़ी" (a composed nukta that NFC decomposes) had never matched
    return frozenset(_fold(word) for word in words)


def check_language_code(lang: object, what: str = "language code") -> str:
    """``lang`` if it is a language code an analyzer accepts (ASCII letters only, like ``sw``).

    Args:
        lang: The code to check.
        what: How the message names it (``doc_lang``, an option).

    Raises:
        ConfigError: If ``lang`` is not a non-empty string of ASCII letters (``../x`` would
            also become part of file and cache names; a full-width ``ＳＷ`` had become an unknown
            language with a warning).
    """
    if not isinstance(lang, str) or not (lang.isascii() and lang.isalpha()):
        raise ConfigError(f"{what} must be letters like 'sw', got {lang!r}")
    return lang


@dataclass(frozen=True)
class AnalyzerConfig:
    """Settings of a :class:`TextAnalyzer`.

    Attributes:
        lang: ISO 639-1 code of the text's language.
        stopwords: Remove stopwords (stopwordsiso's list for ``lang``).
        lemmatize: Lemmatise with simplemma; ``None`` = the language default (sw, tl).
        stem: Snowball-stem; ``None`` = the language default (when not lemmatising and Snowball
            has the language).
        extra_stopwords: Further words to remove.
    """

    lang: str
    stopwords: bool = True
    lemmatize: bool | None = None
    stem: bool | None = None
    extra_stopwords: tuple[str, ...] = field(default_factory=tuple)


_WARNED: set[str] = set()
"""The languages whose analyzer was warned about: once a process, not once per analyzer made
(a command makes several: Python's own once-only filter keys a warning by its caller's line)."""


class TextAnalyzer(Analyzer):
    """Unicode-aware analyzer configured per language.

    Args:
        config: The settings; see :class:`AnalyzerConfig`.
    """

    def __init__(self, config: AnalyzerConfig) -> None:
        check_language_code(config.lang)
        self.config = config
        self.lang = config.lang.lower()
        lemmatize = self.lang in LEMMATIZED if config.lemmatize is None else config.lemmatize
        stem = (not lemmatize and self.lang in SNOWBALL) if config.stem is None else config.stem
        if stem and self.lang not in SNOWBALL:
            raise ConfigError(f"no Snowball stemmer for language {self.lang!r}; have {sorted(SNOWBALL)}")
        if lemmatize and self.lang not in LEMMATIZED:  # had failed at the first word, a ValueError
            try:  # simplemma's own list, where its version keeps it
                from simplemma.strategies.dictionaries.dictionary_factory import SUPPORTED_LANGUAGES
            except ImportError:
                SUPPORTED_LANGUAGES = (self.lang,)  # unknown: the first word will tell
            if self.lang not in SUPPORTED_LANGUAGES:
                raise ConfigError(
                    f"no simplemma lemmas for language {self.lang!r}; have {sorted(SUPPORTED_LANGUAGES)}"
                )
        extra = (_fold(word) for word in config.extra_stopwords)
        # as tokens are (NFC, lowercased, ...): "Bwana" and "ng’ombe" had never matched
        self._stop = (_stopwords(self.lang) if config.stopwords else frozenset()) | frozenset(extra)
        self._stemmer = snowballstemmer.stemmer(SNOWBALL[self.lang]) if stem else None
        self._lemmatize = lemmatize
        self._cache: dict[str, str] = {}
        if self.lang in UNSEGMENTED and self.lang not in _WARNED:
            _WARNED.add(self.lang)
            warnings.warn(
                f"clir has no word segmenter for language {self.lang!r}: text written without "
                "spaces becomes one token per run of letters; segment it before indexing",
                stacklevel=3,
            )
        elif not (self._stop or self._stemmer or lemmatize) and self.lang not in _WARNED:
            _WARNED.add(self.lang)
            warnings.warn(
                f"no stopwords, lemmatiser or stemmer known for language {self.lang!r}: "
                "using lowercased tokens only",
                stacklevel=3,
            )

    def tokenize(self, text: str) -> list[str]:
        """Words of ``text`` after Unicode NFC normalisation (a decomposed ``naïf`` and a
        composed one are the same word), lowercased, with ’ inside a word read as ' and ‐ or ‑
        as -; invisible format characters (a soft hyphen, a zero-width joiner) are dropped."""
        if text.isascii():
            return [match.group().lower() for match in _WORD.finditer(text)]
        text = unicodedata.normalize("NFC", _FORMAT.sub("", text))
        return [match.group().lower().translate(_FOLDED) for match in _MARKED_WORD.finditer(text)]

    def normalize(self, token: str) -> str:
        term = self._cache.get(token)
        if term is None:
            term = token
            if self._lemmatize:
                import simplemma

                term = simplemma.lemmatize(token, lang=self.lang).lower()
            if self._stemmer is not None:
                term = self._stemmer.stemWord(term)
            self._cache[token] = term
        return term

    def is_stopword(self, token: str) -> bool:
        return token in self._stop

    def to_config(self) -> dict[str, Any]:
        return {"type": "text", **asdict(self.config)}


def get_analyzer(lang: str, **options: Any) -> Analyzer:
    """The analyzer for a language, with the language's defaults unless overridden.

    Args:
        lang: ISO 639-1 code (``"en"``, ``"sw"``, ``"tl"``, ``"ny"``, ...). A language clir knows
            nothing about still gets an analyzer (lowercased tokens) and a warning.
        **options: Fields of :class:`AnalyzerConfig` (``stopwords``, ``lemmatize``, ``stem``,
            ``extra_stopwords``).

    Raises:
        ConfigError: For an unknown option, an option of the wrong type (``stopwords: "no"`` had
            been read as true, ``extra_stopwords: "maji"`` as four letters) or an impossible
            setting.
    """
    options.pop("type", None)
    known = set(AnalyzerConfig.__dataclass_fields__) - {"lang"}
    unknown = sorted(set(options) - known)
    if unknown:
        raise ConfigError(f"unknown analyzer option(s) {unknown}; expected some of {sorted(known)}")
    for name in ("stopwords", "lemmatize", "stem"):
        value = options.get(name)
        if name in options and not (isinstance(value, bool) or (value is None and name != "stopwords")):
            expected = "true or false" + (" (or null: the language's default)" if name != "stopwords" else "")
            raise ConfigError(f"analyzer option {name} must be {expected}, got {value!r}")
    if "extra_stopwords" in options:
        words = options["extra_stopwords"]
        if isinstance(words, str) or not isinstance(words, (list, tuple, set, frozenset)):
            raise ConfigError(f"analyzer option extra_stopwords must be a list of words, got {words!r}")
        if bad := [word for word in words if not isinstance(word, str)]:
            raise ConfigError(f"analyzer option extra_stopwords must hold words (strings), got {bad[0]!r}")
        options["extra_stopwords"] = tuple(words)
    return TextAnalyzer(AnalyzerConfig(lang=lang, **options))


def analyzer_from_config(config: dict[str, Any]) -> Analyzer:
    """Rebuild an analyzer from :meth:`Analyzer.to_config` output (e.g. read from JSON).

    Raises:
        ConfigError: If ``config`` is not such an object (no ``lang``, an option that is not
            one or of the wrong type): a reader of a saved file names the file.
    """
    if not isinstance(config, dict) or "lang" not in config:
        raise ConfigError(f"an analyzer's settings must be an object with a 'lang', got {config!r}")
    options = dict(config)
    return get_analyzer(options.pop("lang"), **options)
