"""Constraints a sequence may be opened with, and their JSON layout options.

Each helper returns a :class:`Constraint`, which the client sends as a
serialized ``grammard.v1.Constraint`` (proto/grammard.proto): ::

    grammard.json_schema({"type": "object"}, whitespace="compact")
    grammard.regex(r"\\d{4}-\\d{2}-\\d{2}")
    grammard.ebnf('root ::= "yes" | "no"')
    grammard.choice(["red", "green", "blue"])
    grammard.structural_tag({"structures": [...], "triggers": [...]})
    grammard.json_object()

The wire message is small and fixed, so it is written here by hand (no
protobuf runtime needed): field numbers and types follow the proto.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Iterable, Optional, Union

from .errors import InvalidArgument

WHITESPACE = {"any": 0, "compact": 1, "indented": 2}
PROPERTY_ORDER = {
    "as_written": 0,
    "required_first": 1,
    "any": 2,
    "any_when_small": 3,
    "any_repeatable": 4,
}


@dataclass(frozen=True)
class JsonOptions:
    """How JSON output may be laid out (JsonOptions in the proto).

    whitespace: "any" (any JSON whitespace), "compact" (none but the
    separators) or "indented" (a newline and ``indent`` spaces a level).
    max_whitespace_run: with "any", the longest run (0: no limit).
    item_separator, key_separator: with "compact" and "indented" (None: ","
    and ":"). property_order: "as_written", "required_first", "any",
    "any_when_small" or "any_repeatable". lenient: drop keywords that cannot
    be enforced exactly instead of failing the compile.
    """

    whitespace: str = "any"
    max_whitespace_run: int = 0
    indent: int = 0
    item_separator: Optional[str] = None
    key_separator: Optional[str] = None
    property_order: str = "as_written"
    lenient: bool = False

    def __post_init__(self):
        if self.whitespace not in WHITESPACE:
            raise InvalidArgument(
                f"whitespace must be one of {sorted(WHITESPACE)}, "
                f"got {self.whitespace!r}")
        if self.property_order not in PROPERTY_ORDER:
            raise InvalidArgument(
                f"property_order must be one of {sorted(PROPERTY_ORDER)}, "
                f"got {self.property_order!r}")
        for name in ("max_whitespace_run", "indent"):
            value = getattr(self, name)
            if not isinstance(value, int) or not 0 <= value < 2**31:
                raise InvalidArgument(
                    f"{name} must be a non-negative int, got {value!r}")

    def encode(self) -> bytes:
        out = bytearray()
        _varint_field(out, 1, WHITESPACE[self.whitespace])
        _varint_field(out, 2, self.max_whitespace_run)
        _varint_field(out, 3, self.indent)
        if self.item_separator is not None:
            _bytes_field(out, 4, _utf8(self.item_separator, "item_separator"))
        if self.key_separator is not None:
            _bytes_field(out, 5, _utf8(self.key_separator, "key_separator"))
        _varint_field(out, 6, PROPERTY_ORDER[self.property_order])
        _varint_field(out, 7, int(self.lenient))
        return bytes(out)


@dataclass(frozen=True)
class Constraint:
    """One constraint: ``kind`` is one of json_schema, json_object, regex,
    ebnf, choice, structural_tag; ``text`` its spec (for choice, the list of
    choices); ``options`` the JSON layout (json_schema, json_object and the
    schemas of structural tags)."""

    kind: str
    text: Union[str, tuple] = ""
    root_rule: str = "root"
    options: JsonOptions = field(default_factory=JsonOptions)

    def encode(self) -> bytes:
        """The serialized grammard.v1.Constraint."""
        out = bytearray()
        if self.kind == "json_schema":
            _bytes_field(out, 1, _utf8(self.text, "json_schema"))
        elif self.kind == "json_object":
            _bytes_field(out, 2, b"")
        elif self.kind == "regex":
            _bytes_field(out, 3, _utf8(self.text, "regex"))
        elif self.kind == "ebnf":
            grammar = bytearray()
            _bytes_field(grammar, 1, _utf8(self.text, "ebnf"))
            if self.root_rule != "root":
                _bytes_field(grammar, 2, _utf8(self.root_rule, "root_rule"))
            _bytes_field(out, 4, bytes(grammar))
        elif self.kind == "choice":
            choices = bytearray()
            for i, c in enumerate(self.text):
                _bytes_field(choices, 1, _utf8(c, f"choice[{i}]"))
            _bytes_field(out, 5, bytes(choices))
        elif self.kind == "structural_tag":
            _bytes_field(out, 6, _utf8(self.text, "structural_tag"))
        else:
            raise InvalidArgument(f"unknown constraint kind {self.kind!r}")
        if self.kind in ("json_schema", "json_object", "structural_tag"):
            _bytes_field(out, 10, self.options.encode())
        return bytes(out)


def _options(options: Optional[JsonOptions], **fields: Any) -> JsonOptions:
    if options is not None:
        if fields:
            raise InvalidArgument("give JsonOptions or its fields, not both")
        return options
    return JsonOptions(**fields)


def _json_text(spec: Any, what: str) -> str:
    if isinstance(spec, (bytes, bytearray)):
        spec = bytes(spec).decode("utf-8")
    if isinstance(spec, str):
        return spec
    try:
        return json.dumps(spec)
    except (TypeError, ValueError) as e:
        raise InvalidArgument(f"{what} is neither text nor JSON: {e}") from None


def json_schema(schema: Any, *, options: Optional[JsonOptions] = None,
                **json_options: Any) -> Constraint:
    """A JSON Schema, as text or as the Python value of its JSON. Layout by
    ``options`` or by JsonOptions' fields as keywords (whitespace=...,
    property_order=..., lenient=..., ...)."""
    return Constraint("json_schema", _json_text(schema, "json_schema"),
                      options=_options(options, **json_options))


def json_object(*, options: Optional[JsonOptions] = None,
                **json_options: Any) -> Constraint:
    """Any JSON object."""
    return Constraint("json_object", options=_options(options, **json_options))


def regex(pattern: str) -> Constraint:
    """A regex whose full matches are the allowed outputs."""
    return Constraint("regex", pattern)


def ebnf(grammar: str, root_rule: str = "root") -> Constraint:
    """A GBNF / XGrammar EBNF grammar starting at ``root_rule``."""
    return Constraint("ebnf", grammar, root_rule=root_rule)


def choice(choices: Iterable[str]) -> Constraint:
    """Exactly one of these strings. A JSON list given as text (vLLM's
    CHOICE spec) is read as one."""
    if isinstance(choices, str):
        try:
            choices = json.loads(choices)
        except ValueError:
            raise InvalidArgument(
                "choice: a string must be a JSON list of strings") from None
    items = tuple(choices)
    if not items or not all(isinstance(c, str) for c in items):
        raise InvalidArgument("choice: a non-empty list of strings is needed")
    return Constraint("choice", items)


def structural_tag(spec: Any, *, options: Optional[JsonOptions] = None,
                   **json_options: Any) -> Constraint:
    """XGrammar's structural tag ({"structures": [{"begin", "schema",
    "end"}], "triggers": [...]}), as text or as the Python value."""
    return Constraint("structural_tag", _json_text(spec, "structural_tag"),
                      options=_options(options, **json_options))


def _utf8(text: Any, what: str) -> bytes:
    if isinstance(text, (bytes, bytearray)):
        return bytes(text)
    if not isinstance(text, str):
        raise InvalidArgument(f"{what} must be text, got {type(text).__name__}")
    return text.encode("utf-8")


def _varint(out: bytearray, value: int) -> None:
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def _varint_field(out: bytearray, number: int, value: int) -> None:
    if value:  # proto3: defaults are not written
        _varint(out, number << 3)
        _varint(out, value)


def _bytes_field(out: bytearray, number: int, value: bytes) -> None:
    _varint(out, (number << 3) | 2)
    _varint(out, len(value))
    out += value
