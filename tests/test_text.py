"""Analyzers: tokenization, stopwords, lemmas and stems per language."""

from __future__ import annotations

import json
import warnings

import pytest

from clir.errors import ConfigError
from clir.text import analyzer_from_config, get_analyzer


def test_tokenize_is_unicode_aware_and_keeps_inner_apostrophes_and_hyphens():
    an = get_analyzer("sw")
    assert an.tokenize("Ng'ombe wa Yerusalemu, mag-aral!  Élan 12") == [
        "ng'ombe", "wa", "yerusalemu", "mag-aral", "élan", "12",
    ]  # fmt: skip


def test_tokenize_keeps_combining_marks_and_normalises_to_nfc():
    import unicodedata

    an = get_analyzer("sw")
    # Devanagari vowel signs and virama, Yoruba tone marks on dotted vowels: one word each
    assert an.tokenize("हिन्दी भाषा ọ̀rọ̀") == ["हिन्दी", "भाषा", "ọ̀rọ̀"]
    # a decomposed accent is the composed word
    decomposed = unicodedata.normalize("NFD", "Tiếng Việt naïf")
    assert an.tokenize(decomposed) == an.tokenize("Tiếng Việt naïf") == ["tiếng", "việt", "naïf"]
    assert an.tokenize("O’Brien O'Brien") == ["o'brien", "o'brien"]


def test_unsegmented_scripts_are_warned_about(monkeypatch):
    monkeypatch.setattr("clir.text.analyzer._WARNED", set())  # warned once a process
    with pytest.warns(UserWarning, match="no word segmenter for language 'zh'"):
        get_analyzer("zh")


def test_english_stems_and_drops_function_words_but_keeps_content_words():
    an = get_analyzer("en")
    assert an.analyze("The kings of the world gave their names") == ["king", "world", "gave", "name"]


def test_swahili_lemmatises_with_simplemma_and_drops_stopwords():
    an = get_analyzer("sw")
    # "watoto" (children) -> "mtoto" (child); "na", "wa" are stopwords.
    assert an.analyze("watoto na wafalme wa nchi") == ["mtoto", "mfalme", "nchi"]


def test_tagalog_lemmatises():
    assert get_analyzer("tl").analyze("nilikha ng Dios ang langit") == ["likha", "diyos", "langit"]


def test_options_override_language_defaults():
    an = get_analyzer("sw", lemmatize=False, stopwords=False, extra_stopwords=["nchi"])
    assert an.analyze("watoto na nchi") == ["watoto", "na"]
    assert get_analyzer("en", stem=False).analyze("kings") == ["kings"]


def test_unknown_language_gets_tokens_and_a_warning_not_a_crash(monkeypatch):
    monkeypatch.setattr("clir.text.analyzer._WARNED", set())
    with pytest.warns(UserWarning, match="'xx'"):
        an = get_analyzer("xx")
    assert an.analyze("Foo BAR") == ["foo", "bar"]
    # once a process, not once per analyzer made (a command makes several: 7 warnings)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        get_analyzer("xx", stopwords=False)
        get_analyzer("xx")


def test_snowball_languages_without_lemmas_are_stemmed():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert get_analyzer("id").analyze("pembangunan") == ["bangun"]


def test_bad_options_are_named():
    with pytest.raises(ConfigError, match=r"unknown analyzer option.*'stemmer'"):
        get_analyzer("en", stemmer=True)
    with pytest.raises(ConfigError, match="no Snowball stemmer for language 'sw'"):
        get_analyzer("sw", stem=True)


def test_extra_stopwords_match_whatever_their_case_or_composition():
    """Tokens are NFC and lowercased; an extra stopword given as "Bwana" had never matched."""
    an = get_analyzer("sw", lemmatize=False, stopwords=False, extra_stopwords=["Bwana", "NCHI", "nai\u0308f"])
    assert an.analyze("bwana wa Nchi naïf mwema") == ["wa", "mwema"]
    assert list(an.to_config()["extra_stopwords"]) == ["Bwana", "NCHI", "nai\u0308f"]  # kept as given


def test_config_round_trip():
    an = get_analyzer("en", extra_stopwords=["lord"])
    again = analyzer_from_config(json.loads(json.dumps(an.to_config())))
    assert again.analyze("the Lord is king") == an.analyze("the Lord is king") == ["king"]


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"type": "text", "stopwords": True}, "an analyzer's settings must be an object with a 'lang', got "),
        ("en", "an analyzer's settings must be an object with a 'lang', got 'en'"),
        ({"lang": "en", "stopwords": "no"}, "analyzer option stopwords must be true or false, got 'no'"),
        ({"lang": "en", "stopwords": None}, "analyzer option stopwords must be true or false, got None"),
        ({"lang": "en", "stem": 1}, r"analyzer option stem must be true or false \(or null: the language's "
         r"default\), got 1"),
        ({"lang": "sw", "extra_stopwords": "maji"}, "analyzer option extra_stopwords must be a list of "
         "words, got 'maji'"),
        ({"lang": "sw", "extra_stopwords": ["maji", 2]}, r"analyzer option extra_stopwords must hold words "
         r"\(strings\), got 2"),
    ],
)  # fmt: skip
def test_analyzer_settings_of_the_wrong_kind_are_errors(config, message):
    """A saved index's first_stage.json with an edited analyzer: no 'lang' was an "unexpected
    KeyError", and `stopwords: "no"` was read as true, `extra_stopwords: "maji"` as four
    one-letter stopwords, silently."""
    with pytest.raises(ConfigError, match=f"^{message}"):
        analyzer_from_config(config)
    assert analyzer_from_config({"lang": "en", "stem": None, "lemmatize": False}).analyze("kings") == ["king"]


def test_invisible_format_characters_do_not_split_words():
    """A soft hyphen, a zero-width (non-)joiner, a word joiner, a BOM or a direction mark inside
    a word had split it ("mag\u00adaral" was "mag" and "aral"); a zero-width space separates."""
    an = get_analyzer("tl", lemmatize=False)
    for mark in ("\u00ad", "\u200c", "\u200d", "\u2060", "\ufeff", "\u200e", "\u200f"):
        assert an.tokenize(f"mag{mark}aral {mark}bata{mark}") == ["magaral", "bata"]
    assert an.tokenize("mag\u200baral") == ["mag", "aral"]


def test_typographic_hyphens_join_words_as_the_hyphen_does():
    """U+2010 and U+2011 (a word processor's non-breaking hyphen) had split "mag-aral" in two."""
    an = get_analyzer("tl", lemmatize=False)
    assert an.tokenize("mag\u2010aral mag\u2011aral mag-aral") == ["mag-aral"] * 3


def test_a_word_begins_with_a_letter_or_digit_not_a_mark():
    """The variation selector of an emoji (U+FE0F) had been a word, the same one for ❤️ and ☺️."""
    an = get_analyzer("sw", lemmatize=False)
    assert an.tokenize("nakupenda ❤️ sana ☺️ \u0301") == ["nakupenda", "sana"]
    assert an.tokenize("\u0301ọ̀rọ̀") == ["ọ̀rọ̀"]


def test_stopwords_are_matched_as_tokens_are_written():
    """stopwordsiso's words were matched as written: Hindi "काफ़ी" with a composed nukta (which NFC
    decomposes), Arabic "إِنَّ" with its marks out of canonical order, Persian "می‌شود" (a
    zero-width non-joiner, dropped from tokens) never matched; nor did an extra stopword with ’."""
    assert get_analyzer("hi").analyze("\u0915\u093e\u095e\u0940") == []
    assert get_analyzer("ar").analyze("\u0625\u0650\u0646\u0651\u064e") == []
    persian = "\u0645\u06cc\u200c\u0634\u0648\u062f"
    assert get_analyzer("fa").analyze(f"{persian} {persian.replace(chr(0x200C), '')}") == []
    an = get_analyzer("sw", lemmatize=False, extra_stopwords=["Ng’ombe"])
    assert an.analyze("ng'ombe ng’ombe maji") == ["maji"]


def test_lemmatising_a_language_simplemma_has_no_lemmas_for_is_refused_when_made():
    """It had failed at the first word analyzed, a ValueError ("Unsupported language: ny")."""
    with pytest.raises(ConfigError, match="no simplemma lemmas for language 'ny'; have "):
        get_analyzer("ny", lemmatize=True)
    with pytest.raises(ConfigError, match="no simplemma lemmas for language 'xx'"):
        analyzer_from_config({"lang": "xx", "lemmatize": True})
    assert get_analyzer("en", lemmatize=True).analyze("children") == ["child"]
