"""Method specs: one string names any embedding method with its options and round-trips to text.

This module is the grammar only: which families exist, their options and the named models are passed in
by :mod:`embedlab.registry` (``registry.parse(text)`` is what callers use).

Grammar (whitespace is not allowed inside a spec)::

    spec      := part ('+' part)*                 # '+' between parts concatenates their normalised vectors
    part      := model [':' options]              # the pooled family (the default family)
               | family ':' model [',' options]   # any other family: st, random, avg, bert+avg, ...
    options   := key '=' value (',' key '=' value)*

Examples: ``minilm``, ``minilm:layers=1+last,weights=idf-ref,filter=biases,post=quantile-u``,
``minilm:template=T4,pool=mask``, ``random:minilm``, ``avg:minilm,layers=1``, ``bert+avg:minilm,w=0.5``,
``st:minilm``, ``neural:minilm+minilm``.

A '+' also joins list values (``layers=1+6``, ``post=zscore+normalize``). Inside a value it starts a new
part only when what follows it (up to the next ',' or '+') is a named model, a path (contains '/'),
or contains ':' (a family prefix). The canonical text lists only non-default options, in the family's
declared order, so equal methods have equal strings.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field

from embedlab.errors import InputError

POOLED = "pooled"


@dataclass(frozen=True)
class Option:
    """One option of a family: its default, allowed values (or a validator), and help text.

    ``validate`` returns the canonical form of a value or raises ValueError with the reason.
    """

    default: str
    choices: tuple[str, ...] | None = None
    help: str = ""
    validate: Callable[[str], str] | None = None

    def canonical(self, key: str, value: str) -> str:
        if self.validate is not None:
            try:
                return self.validate(value)
            except ValueError as error:
                raise SpecError(f"option {key}={shown(value)}: {error}") from None
        if self.choices is not None and value not in self.choices:
            raise SpecError(f"option {key}={shown(value)} is not valid{did_you_mean(value, self.choices)}; "
                            f"choose one of: {', '.join(self.choices)}")
        return value


@dataclass(frozen=True)
class FamilySchema:
    name: str
    options: dict[str, Option]
    help: str = ""


# Values longer than this are cut in messages: a 100,000-character value would make a one-line error unreadable.
SHOWN_CHARACTERS = 40
_LONG_RUN = re.compile(r"\S{%d,}" % (4 * SHOWN_CHARACTERS))


def shown(value: str) -> str:
    """``repr(value)``, cut to its first characters with an ellipsis and its length when it is long."""
    if len(value) <= 2 * SHOWN_CHARACTERS:
        return repr(value)
    return f"{value[:SHOWN_CHARACTERS]!r}"[:-1] + f"…{repr(value)[-1]} ({len(value):,} characters)"


def _cut_long_runs(message: str) -> str:
    return _LONG_RUN.sub(lambda run: run.group()[:SHOWN_CHARACTERS] + f"… ({len(run.group()):,} characters)", message)


class SpecError(InputError):
    """A method spec that cannot be parsed or names unknown families, keys or values.

    Long values are cut in the message (see :func:`shown`); a validator's message that quotes the value
    again is cut by the same rule."""

    def __init__(self, message: str) -> None:
        super().__init__(_cut_long_runs(message))


def did_you_mean(given: str, names: Collection[str]) -> str:
    """``"; did you mean 'x'?"`` for the name closest to a mistyped ``given`` (difflib), else ``""``."""
    close = difflib.get_close_matches(given, list(names), n=1)
    return f"; did you mean {close[0]!r}?" if close else ""


def whole_number(minimum: int = 0) -> Callable[[str], str]:
    """An option validator: a whole number ≥ ``minimum`` (seeds, epochs), so that a bad value fails when the
    spec is read rather than deep inside numpy or torch."""
    def validate(value: str) -> str:
        try:
            number = int(value)
        except ValueError:
            raise ValueError("must be a whole number") from None
        if number < minimum:
            raise ValueError(f"must be at least {minimum}")
        return str(number)

    return validate


def finite_number(*, positive: bool = False) -> Callable[[str], str]:
    """An option validator: a finite number (NaN or infinity would only give NaN vectors), > 0 when
    ``positive`` (standard deviations, learning rates)."""
    def validate(value: str) -> str:
        try:
            number = float(value)
        except ValueError:
            raise ValueError("must be a number") from None
        if not math.isfinite(number):
            raise ValueError("must be a finite number")
        if positive and not number > 0:
            raise ValueError("must be positive")
        return repr(number)

    return validate


@dataclass(frozen=True)
class MethodSpec:
    """A parsed single method: family, model and its non-default options in declared order."""

    family: str
    model: str
    options: tuple[tuple[str, str], ...] = field(default_factory=tuple)
    schema: FamilySchema | None = field(default=None, compare=False, repr=False, hash=False)

    def get(self, key: str) -> str:
        for name, value in self.options:
            if name == key:
                return value
        schema = self.schema
        if schema is None or key not in schema.options:
            raise KeyError(f"family {self.family!r} has no option {key!r}")
        return schema.options[key].default

    def replace(self, **changes: str) -> MethodSpec:
        """A copy with some options changed (keys use '_' for '-')."""
        values = dict(self.options)
        values.update({key.replace("_", "-"): value for key, value in changes.items()})
        assert self.schema is not None, "a MethodSpec made by parse_spec knows its family's options"
        return build_spec(self.schema, self.model, values)

    def __str__(self) -> str:
        options = ",".join(f"{key}={value}" for key, value in self.options)
        if self.family == POOLED:
            return f"{self.model}:{options}" if options else self.model
        return f"{self.family}:{self.model}" + (f",{options}" if options else "")


@dataclass(frozen=True)
class ConcatSpec:
    """Several methods whose unit-normalised vectors are concatenated (and normalised again)."""

    parts: tuple[MethodSpec, ...]

    def __str__(self) -> str:
        return "+".join(str(part) for part in self.parts)


def build_spec(schema: FamilySchema, model: str, values: Mapping[str, str]) -> MethodSpec:
    """The canonical spec of ``schema``'s family on ``model`` with option ``values`` (validated)."""
    family = schema.name
    unknown = [key for key in values if key not in schema.options]
    if unknown:
        raise SpecError(
            f"unknown option {shown(unknown[0])} for family {family!r}{did_you_mean(unknown[0], schema.options)}; "
            f"valid options: {', '.join(schema.options) or '(none)'}"
        )
    options = []
    for key, option in schema.options.items():
        if key in values:
            value = option.canonical(key, values[key])
            if value != option.canonical(key, option.default):
                options.append((key, value))
    return MethodSpec(family, model, tuple(options), schema)


def _parse_options(text: str, where: str) -> dict[str, str]:
    values: dict[str, str] = {}
    if not text:
        return values
    for item in text.split(","):
        if "=" not in item or item.startswith("="):
            raise SpecError(f"{where}: expected key=value, got {shown(item)}")
        key, value = item.split("=", 1)
        if key in values:
            raise SpecError(f"{where}: option {shown(key)} given twice")
        if not value:
            raise SpecError(f"{where}: option {shown(key)} has an empty value")
        values[key] = value
    return values


def _parse_part(text: str, families: Mapping[str, FamilySchema], model_names: Collection[str]) -> MethodSpec:
    if not text:
        raise SpecError("empty method spec")
    head, colon, rest = text.partition(":")
    if colon and head not in families and head not in model_names and "/" not in head and "=" not in rest.split(",", 1)[0]:
        # FAMILY:MODEL with a family that does not exist (MODEL:options would start with key=value)
        raise SpecError(f"unknown family {shown(head)} in spec {shown(text)}{did_you_mean(head, families)}; "
                        f"known families: {', '.join(sorted(families))}")
    if colon and head in families and head != POOLED:
        model, _, options = rest.partition(",")
        family = head
    elif colon and head == POOLED:
        model, _, options = rest.partition(",")
        family = POOLED
    elif colon:
        family, model, options = POOLED, head, rest
    else:
        family = POOLED
        model, _, options = text.partition(",")
    if not model:
        raise SpecError(f"spec {shown(text)} names no model")
    if family not in families:
        raise SpecError(f"unknown family {family!r}; known: {', '.join(sorted(families))}")
    return build_spec(families[family], model, _parse_options(options, f"spec {shown(text)}"))


def _starts_new_part(following: str, families: Collection[str], model_names: Collection[str]) -> bool:
    piece = following.split(",", 1)[0].split("+", 1)[0]
    return ":" in piece or "/" in piece or piece in model_names or piece in families


def _split_parts(text: str, families: Collection[str], model_names: Collection[str]) -> list[str]:
    """Split a spec at the '+' signs that concatenate methods (see the module docstring)."""
    parts, start = [], 0
    plus_families = [name for name in families if "+" in name]
    for index, char in enumerate(text):
        if char != "+" or index < start:
            continue
        current = text[start:index]
        following = text[index + 1 :]
        if any(text.startswith(name + ":", start) and start + len(name) > index for name in plus_families):
            continue  # the '+' inside a family name such as bert+avg
        last_field = current.replace(":", ",").rsplit(",", 1)[-1]
        in_value = "=" in last_field
        if (not in_value and ":" in current) or (in_value and _starts_new_part(following, families, model_names)):
            parts.append(current)
            start = index + 1
        elif not in_value and ":" not in current and _starts_new_part(following, families, model_names):
            parts.append(current)  # e.g. "minilm+minilm": a bare model then another part
            start = index + 1
    parts.append(text[start:])
    return parts


def parse_spec(text: str, families: Mapping[str, FamilySchema], model_names: Collection[str] = ()) -> MethodSpec | ConcatSpec:
    """Parse a spec string against ``families``; unknown families, keys or values raise SpecError.

    ``model_names`` are the named models (``minilm``, ...), recognised as the start of a concatenated part.
    """
    if not isinstance(text, str):
        raise SpecError(f"a method spec must be a string, got {type(text).__name__}")
    text = text.strip()
    if not text or any(char.isspace() for char in text):
        raise SpecError(f"method spec {shown(text)} is empty or contains whitespace")
    parts = [_parse_part(part, families, model_names) for part in _split_parts(text, families, model_names)]
    return parts[0] if len(parts) == 1 else ConcatSpec(tuple(parts))
