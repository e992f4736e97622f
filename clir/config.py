"""One typed configuration tree: config dataclasses built from mappings (YAML) and checked whole.

Every config of clir is a dataclass deriving from :class:`Section`. Its fields carry type hints
and, where a value must satisfy more than its type, a constraint inside ``Annotated[...]``;
rules that relate several fields go in :meth:`Section.check`::

    @dataclass(frozen=True)
    class TablesConfig(Section):
        iterations: Annotated[int, Range(ge=1)] = 10
        seed: int = 0

    build(TablesConfig, {"iterations": 0}, "exp.yaml", "tables.")
    # ConfigError: exp.yaml: tables.iterations=0 is invalid; expected a value >= 1

Types understood: sections (nested dataclasses, from a mapping or an instance), ``bool`` (never
an int), ``int``, ``float`` (an int is accepted; nan and inf are rejected unless the field says
:class:`AllowNonFinite`), ``str``, ``list[X]``, ``tuple[X, ...]``, ``tuple[X, Y]``,
``dict[K, V]``, ``X | None``, unions of kinds told apart by the value (``str | list[str]``: a
string, or a list) and ``Any``. Constraints: :class:`Range`, :class:`OneOf`,
:class:`Match`, :class:`NonEmpty`, :class:`Unique`. Every error is a
:class:`~clir.errors.ConfigError` naming the source (the file), the dotted key
(``systems.full.optim.lr``), the value received and what was expected.

A section is checked when it is built from a mapping (:func:`build`, :meth:`Section.from_dict`),
when it is constructed in Python (errors then name the class) and by :meth:`Section.validate`
(for a mutable section changed after construction). :meth:`Section.to_dict` gives plain JSON data
and :meth:`Section.canonical` its canonical JSON text (sorted keys), for hashing: a default left
out and the same default written explicitly give the same text. A field marked
:class:`OmitWhenNone` is left out of both while it is ``None``, so an option added to a section
keeps the canonical text (and so every cached step's key) of the configs that do not set it.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import json
import math
import operator
import re
import reprlib
import sys
import types
import typing
from collections.abc import Callable, Collection, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Annotated, Any, NamedTuple, TypeVar

import yaml

from clir.errors import ConfigError, DataNotFoundError

S = TypeVar("S", bound="Section")

NAME_PATTERN = r"(?!.*\.\.)[A-Za-z0-9][A-Za-z0-9._+-]*"
"""A name that may become a file or directory name: letters, digits, ``.``, ``_``, ``+``, ``-``,
starting with a letter or digit, no ``..`` and so no way out of its directory (``full+e5``)."""


# ----------------------------------------------------------------------------- constraints


@dataclasses.dataclass(frozen=True)
class Range:
    """Bounds of a number: ``ge`` (>=), ``gt`` (>), ``le`` (<=), ``lt`` (<), each optional."""

    ge: float | None = None
    gt: float | None = None
    le: float | None = None
    lt: float | None = None

    def _bounds(self) -> list[tuple[str, float, Callable[[Any, Any], bool]]]:
        checks = ((">=", self.ge, operator.ge), (">", self.gt, operator.gt))
        checks += (("<=", self.le, operator.le), ("<", self.lt, operator.lt))
        return [(op, bound, test) for op, bound, test in checks if bound is not None]

    def ok(self, value: Any) -> bool:
        return all(test(value, bound) for _op, bound, test in self._bounds())

    def expected(self) -> str:
        # whole bounds as integers: typing caches Annotated[float, Range(ge=0)] and the equal
        # Annotated[float, Range(ge=0.0)] as one object, whichever was made first
        bounds = [(op, int(b) if float(b).is_integer() else b) for op, b, _test in self._bounds()]
        return "a value " + " and ".join(f"{op} {bound}" for op, bound in bounds)


@dataclasses.dataclass(frozen=True)
class OneOf:
    """One of ``choices`` (a live registry is welcome: it is read at each check)."""

    choices: Collection[Any]

    def ok(self, value: Any) -> bool:
        return value in self.choices

    def expected(self) -> str:
        return f"one of {sorted(self.choices)}"


@dataclasses.dataclass(frozen=True)
class Match:
    """A string matching ``pattern`` whole; ``description`` says what that means."""

    pattern: str
    description: str

    def ok(self, value: Any) -> bool:
        return re.fullmatch(self.pattern, value) is not None

    def expected(self) -> str:
        return self.description


@dataclasses.dataclass(frozen=True)
class NonEmpty:
    """A list, tuple or mapping with at least one item."""

    def ok(self, value: Any) -> bool:
        return len(value) > 0

    def expected(self) -> str:
        return "at least one item"


@dataclasses.dataclass(frozen=True)
class Unique:
    """A list or tuple without repeated items."""

    def ok(self, value: Any) -> bool:
        return len(set(value)) == len(value)

    def expected(self) -> str:
        return "distinct items"


@dataclasses.dataclass(frozen=True)
class AllowNonFinite:
    """Accept nan and infinities in this float field (rejected by default)."""


@dataclasses.dataclass(frozen=True)
class OmitWhenNone:
    """Leave this ``X | None`` field out of :meth:`Section.to_dict` while it is ``None``
    (``Annotated[X | None, OmitWhenNone()]``): adding the option keeps existing step keys."""


_MARKS = (AllowNonFinite, OmitWhenNone)
"""Markers that say how to treat a field rather than constrain its value."""


Name = Annotated[
    str,
    Match(
        NAME_PATTERN,
        "a name of letters, digits, '.', '_', '+' and '-' that starts with a letter or digit and "
        "holds no '..' (it becomes a file name)",
    ),
]
PositiveInt = Annotated[int, Range(ge=1)]
NonNegativeInt = Annotated[int, Range(ge=0)]
Seed = Annotated[int, Range(ge=0, le=2**32 - 1)]
"""A random seed: what numpy's and torch's generators all take."""


# ----------------------------------------------------------------------------- sections

_SHOWN = reprlib.Repr()
_SHOWN.maxlevel = 2
_SHOWN.maxlist = _SHOWN.maxtuple = _SHOWN.maxdict = _SHOWN.maxset = _SHOWN.maxfrozenset = 10
_SHOWN.maxstring = _SHOWN.maxlong = _SHOWN.maxother = 10_000


def shown(value: Any) -> str:
    """``repr(value)`` for an error message, its containers cut to 10 items and 2 levels: YAML
    aliases nest 10**9 items in a file of 300 bytes (the "billion laughs"), whose repr had run
    for minutes, taking gigabytes, before the error was raised."""
    return _SHOWN.repr(value)


class InvalidValueError(ConfigError):
    """A bad value under a config section (``source: key=value is invalid; expected ...``), its
    parts kept so that a caller can name the value its own way (the CLI: ``--holdout 1.0``)."""

    def __init__(self, source: str, key: str, value: Any, expected: str) -> None:
        self.key, self.value, self.expected = key, value, expected
        super().__init__(f"{source}: {key}={shown(value)} is invalid; expected {expected}")


class Where(NamedTuple):
    """Where a section sits: its source (a file, or a class name) and its dotted key prefix."""

    source: str
    prefix: str = ""

    def error(self, key: str, value: Any, expected: str) -> InvalidValueError:
        """The error of a bad value under this section (for :meth:`Section.check`)."""
        return InvalidValueError(self.source, self.prefix + key, value, expected)

    @contextmanager
    def context(self, lead: str = "") -> Iterator[None]:
        """Re-raise a :class:`ConfigError` of the body (e.g. of a constructor's own checks, whose
        messages start with the argument's name) as ``"<source>: <prefix><lead><message>"``."""
        try:
            yield
        except ConfigError as error:
            raise ConfigError(f"{self.source}: {self.prefix}{lead}{error}") from None


_BUILDING: ContextVar[type | None] = ContextVar("clir_config_building", default=None)
"""The section class :func:`build` is constructing: it checks the instance itself, naming the
source and keys, so that class's ``__post_init__`` skips the check."""


class Section:
    """Base class of config dataclasses (``@dataclass`` or ``@dataclass(frozen=True)``).

    Field values are checked against their type hints and constraints on construction;
    sequences are stored as the hinted ``list`` or ``tuple`` and ints of float fields as floats.
    """

    def __post_init__(self) -> None:
        if _BUILDING.get() is not type(self):
            _check_section(self, type(self).__name__, "")

    def check(self, where: Where) -> None:
        """Rules relating several fields, run after every field is checked (override).

        Args:
            where: Names the source and key prefix; raise ``where.error(key, value, expected)``.

        Raises:
            ConfigError: On a bad combination of values.
        """

    def validate(self, source: str | None = None) -> None:
        """Check every field again (after a mutable section was changed).

        Args:
            source: Named in error messages (default: the class name).

        Raises:
            ConfigError: Naming the key, the value and what was expected.
        """
        _check_section(self, source or type(self).__name__, "")

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON / YAML data: nested sections as mappings, tuples as lists; an
        :class:`OmitWhenNone` field that is ``None`` is left out."""
        return _plain(self)

    def canonical(self) -> str:
        """Canonical JSON text of :meth:`to_dict` (sorted keys, no spaces), for hashing."""
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_dict(cls: type[S], values: Any, source: str | None = None) -> S:
        """Build from a mapping (as read from YAML or JSON), rejecting unknown keys.

        Args:
            values: The mapping (``None``: every default).
            source: Named in error messages, e.g. the file (default: the class name).

        Raises:
            ConfigError: On an unknown key, a value of the wrong type or an invalid value.
        """
        return build(cls, values, source or cls.__name__)


def build(cls: type[S], values: Any, source: str, prefix: str = "") -> S:
    """Build section ``cls`` from a mapping, checking keys, types and constraints, recursively.

    Args:
        cls: The section class.
        values: The mapping (``None``: every default).
        source: Named in error messages (e.g. the file).
        prefix: Dotted key of the section in the whole tree, ending in ``.`` (``"systems.full."``).

    Returns:
        The section; keys left out take their defaults.

    Raises:
        ConfigError: Naming ``source``, the key, the value and what was expected.
    """
    where = prefix.rstrip(".") or "top level"
    if values is None:
        values = {}
    if not isinstance(values, Mapping):
        raise ConfigError(f"{source}: {where} must be a mapping, got {type(values).__name__} {shown(values)}")
    names = [f.name for f in dataclasses.fields(cls) if f.init]  # type: ignore[arg-type]
    unknown = sorted(str(k) for k in values if k not in names)
    if unknown:
        raise ConfigError(
            f"{source}: unknown key(s) {[prefix + k for k in unknown]} in {where}; "
            f"known keys: {sorted(names)}"
        )
    token = _BUILDING.set(cls)
    try:
        section = cls(**values)
    finally:
        _BUILDING.reset(token)
    _check_section(section, source, prefix)
    return section


_YAML_STRING_NUMBER = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)[eE][-+]?\d+")
"""Numbers such as ``1e-3`` or ``1.0e3`` that YAML 1.1 (PyYAML) reads as strings."""


def _yaml_number(text: str) -> str:
    """``text`` as YAML 1.1 reads a float: a dot in the mantissa and a sign in the exponent."""
    mantissa, exponent = re.split("[eE]", text)
    mantissa = mantissa if "." in mantissa else mantissa + ".0"
    return f"{mantissa}e{exponent if exponent[0] in '+-' else '+' + exponent}"


def check_arguments(
    func: Callable[..., Any],
    values: Mapping[str, Any],
    where: Where,
    key: str,
    allowed: Collection[str] | None = None,
) -> dict[str, Any]:
    """Check keyword arguments of a callable (of a class: its constructor) against its signature.

    Args:
        func: The callable.
        values: The keyword arguments (e.g. ``model.interaction_kwargs`` of a config).
        where: The section holding them.
        key: Their key in that section.
        allowed: The names that may be given (default: every keyword parameter with a default).

    Returns:
        The arguments, each checked against the parameter's type hint.

    Raises:
        ConfigError: On an unknown argument or a value of the wrong type.
    """
    target = func.__init__ if isinstance(func, type) else func  # type: ignore[misc]
    hints = typing.get_type_hints(target)
    if allowed is None:
        allowed = [p.name for p in inspect.signature(target).parameters.values() if p.default is not p.empty]
    unknown = sorted(str(k) for k in values if k not in allowed)
    if unknown:
        raise ConfigError(
            f"{where.source}: unknown key(s) {[f'{where.prefix}{key}.{k}' for k in unknown]} in "
            f"{where.prefix}{key}; known keys: {sorted(allowed)}"
        )
    return {
        name: _convert(hints.get(name, Any), value, where.source, f"{where.prefix}{key}.{name}")
        for name, value in values.items()
    }


class _UniqueKeyLoader(yaml.SafeLoader):
    """PyYAML's safe loader, except that a mapping may not repeat a key (PyYAML keeps the last
    one silently, so ``optim:`` written twice would drop the first section), a number such as
    ``1e-3`` is a float (as in YAML 1.2 and JSON) and an integer too long to write is an error."""


def _unique_mapping(loader: _UniqueKeyLoader, node: yaml.MappingNode, deep: bool = False) -> dict:
    seen: dict[Any, int] = {}
    for key_node, _value in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":  # '<<': construct_mapping merges it
            continue
        key = loader.construct_object(key_node, deep=deep)
        try:
            duplicate = key in seen
        except TypeError:  # an unhashable key: construct_mapping raises PyYAML's own error
            break
        if duplicate:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r} (first on line {seen[key] + 1})", key_node.start_mark
            )
        seen[key] = key_node.start_mark.line
    return loader.construct_mapping(node, deep=deep)


def _bounded_int(loader: _UniqueKeyLoader, node: yaml.ScalarNode) -> int:
    """PyYAML's int, but one of more digits than Python writes (4,300) is a YAML error naming its
    place: it had been an unexpected ValueError (decimal), or been read (hexadecimal, binary)
    and failed when an error message named it."""
    try:
        value = loader.construct_yaml_int(node)
        str(value)
    except ValueError:
        problem = f"an integer of more than {sys.get_int_max_str_digits()} digits"
        raise yaml.constructor.ConstructorError(None, None, problem, node.start_mark) from None
    return value


_UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _unique_mapping)
_UniqueKeyLoader.add_constructor("tag:yaml.org,2002:int", _bounded_int)
# YAML 1.1 reads 1e-3 and 1.0e3 as strings: JSON's numbers too, so a config that save_config had
# written as JSON (json.dump writes 1e-05) failed to load
_UniqueKeyLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float", re.compile(rf"^(?:{_YAML_STRING_NUMBER.pattern})$"), list("-+0123456789.")
)


def _yaml_error(path: Path, error: yaml.YAMLError) -> str:
    """One line for a YAML error: ``FILE:LINE:COLUMN: not valid YAML: PROBLEM``."""
    mark = getattr(error, "problem_mark", None)
    where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark is not None else str(path)
    problem = getattr(error, "problem", None) or " ".join(str(error).split())
    return f"{where}: not valid YAML: {problem}"


def load_yaml(path: str | Path, what: str = "config file") -> dict[str, Any]:
    """Read a YAML (or JSON) file holding a mapping.

    Args:
        path: The file.
        what: Named when the file is missing.

    Returns:
        The mapping.

    Raises:
        DataNotFoundError: If the file does not exist.
        ConfigError: If it is a directory, is not valid YAML (one line naming the file, line
            and column), repeats a key in a mapping, is empty (comments or ``null`` only: a file
            saved empty would run with every default, silently) or is not a mapping.
    """
    path = Path(path)
    if path.is_dir():
        raise ConfigError(f"{path}: is a directory, not a YAML file (the {what} expected)")
    if not path.is_file():
        raise DataNotFoundError(f"{path}: no such {what}")
    try:
        values = yaml.load(path.read_text(encoding="utf-8"), Loader=_UniqueKeyLoader)  # a SafeLoader
    except yaml.YAMLError as error:
        raise ConfigError(_yaml_error(path, error)) from None
    except UnicodeDecodeError as error:
        raise ConfigError(f"{path}: not valid YAML (not UTF-8 at byte {error.start})") from None
    if values is None:
        raise ConfigError(f"{path}: empty {what} (no key set); write {{}} to take every default")
    if not isinstance(values, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level, got {type(values).__name__}")
    return values


# ----------------------------------------------------------------------------- checking


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls, include_extras=True)


def _check_section(section: Section, source: str, prefix: str) -> None:
    hints = _hints(type(section))
    for f in dataclasses.fields(section):  # type: ignore[arg-type]
        value = _convert(hints[f.name], getattr(section, f.name), source, prefix + f.name)
        object.__setattr__(section, f.name, value)
    section.check(Where(source, prefix))


def _convert(hint: Any, value: Any, source: str, key: str, finite: bool = True) -> Any:
    """``value`` checked against ``hint`` (see the module docstring), as the hinted type."""

    def wrong(expected: str) -> ConfigError:
        return ConfigError(f"{source}: {key} must be {expected}, got {type(value).__name__} {shown(value)}")

    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin is Annotated:
        marks = hint.__metadata__
        finite = finite and not any(isinstance(mark, AllowNonFinite) for mark in marks)
        value = _convert(args[0], value, source, key, finite)
        for mark in marks:
            if not isinstance(mark, _MARKS) and not mark.ok(value):
                raise InvalidValueError(source, key, value, mark.expected())
        return value
    if isinstance(hint, type) and issubclass(hint, Section):
        if isinstance(value, hint):
            _check_section(value, source, key + ".")
            return value
        return build(hint, value, source, key + ".")
    if hint is Any:
        return value
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        arms = [arg for arg in args if arg is not type(None)]
        if len(arms) == 1:
            return _convert(arms[0], value, source, key, finite)
        for arm in arms:  # the first arm of the value's kind converts it (and names its errors)
            if isinstance(value, _kind(arm)[0]):
                return _convert(arm, value, source, key, finite)
        raise wrong(" or ".join(_kind(arm)[1] for arm in arms))
    if origin in (list, tuple):
        if not isinstance(value, (list, tuple)):
            raise wrong("a list")
        if origin is list or args[-1] is Ellipsis:
            hints = [args[0]] * len(value)
        elif len(value) == len(args):
            hints = list(args)
        else:
            raise wrong(f"a list of {len(args)} items")
        items = [
            _convert(item, v, source, f"{key}[{i}]", finite)
            for i, (item, v) in enumerate(zip(hints, value, strict=True))
        ]
        return items if origin is list else tuple(items)
    if origin is dict:
        if not isinstance(value, Mapping):
            raise wrong("a mapping")
        mapping = {}
        for k, v in value.items():
            mapping[_convert(args[0], k, source, f"{key}.{k}", finite)] = _convert(
                args[1], v, source, f"{key}.{k}", finite
            )
        return mapping
    if hint is bool:
        if not isinstance(value, bool):
            raise wrong("true or false")
        return value
    if hint is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise wrong("an integer")
        return value
    if hint is float:
        if isinstance(value, str) and _YAML_STRING_NUMBER.fullmatch(value):
            raise wrong(f"a number (YAML reads {value} as a string: write {_yaml_number(value)})")
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise wrong("a number")
        try:
            number = float(value)
        except OverflowError:
            raise wrong("a finite number") from None
        if finite and not math.isfinite(number):
            raise wrong("a finite number")
        return number
    if hint is str:
        if not isinstance(value, str):
            raise wrong("a string")
        return value
    raise TypeError(f"{key}: unsupported config type {hint!r}")


_KINDS: dict[Any, tuple[type | tuple[type, ...], str]] = {
    bool: (bool, "true or false"),
    int: (int, "an integer"),
    float: ((int, float), "a number"),
    str: (str, "a string"),
    list: ((list, tuple), "a list"),
    tuple: ((list, tuple), "a list"),
    dict: (Mapping, "a mapping"),
}


def _kind(hint: Any) -> tuple[type | tuple[type, ...], str]:
    """The Python types of the values an arm of a union takes, and their description."""
    if typing.get_origin(hint) is Annotated:
        hint = typing.get_args(hint)[0]
    if isinstance(hint, type) and issubclass(hint, Section):
        return Mapping, "a mapping"
    kind = _KINDS.get(typing.get_origin(hint) or hint)
    if kind is None:
        raise TypeError(f"unsupported arm {hint!r} of a union in a config")
    return kind


def _omitted(hint: Any, value: Any) -> bool:
    """Whether a field of this hint is left out of :meth:`Section.to_dict` at this value."""
    return (
        value is None
        and typing.get_origin(hint) is Annotated
        and any(isinstance(mark, OmitWhenNone) for mark in hint.__metadata__)
    )


def _plain(value: Any) -> Any:
    if isinstance(value, Section):
        hints = _hints(type(value))
        items = [(f.name, getattr(value, f.name)) for f in dataclasses.fields(value)]  # type: ignore[arg-type]
        return {name: _plain(v) for name, v in items if not _omitted(hints[name], v)}
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


__all__ = [
    "NAME_PATTERN",
    "AllowNonFinite",
    "Match",
    "Name",
    "NonEmpty",
    "NonNegativeInt",
    "OmitWhenNone",
    "OneOf",
    "PositiveInt",
    "Range",
    "Section",
    "Unique",
    "Where",
    "build",
    "check_arguments",
    "load_yaml",
    "shown",
]
