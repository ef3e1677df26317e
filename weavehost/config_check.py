"""Reading a decoded config document: the checks that name a bad key by its dotted path, and
``${NAME}`` expansion from the environment.

Stage: configuration (under :mod:`weavehost.config` and :mod:`weavehost.config_model`, which
read their sections with it). Every problem is a :class:`~weavehost.errors.ConfigError` naming
the source (a file, or a flag such as ``--model``), the key and the problem; a value read from
the environment never appears in one. Nothing here touches the network or spawns a process.
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from weavehost.errors import ConfigError

__all__ = [
    "Checker",
    "expand",
    "expand_map",
    "join_key",
    "kind_of",
    "mask_url",
    "parse_numbers",
]


class Checker:
    """Reads a decoded JSON document, raising ConfigError that names file, key and problem."""

    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, key: str, problem: str) -> ConfigError:
        where = f"{self.source}: {key}" if key else self.source
        return ConfigError(f"{where}: {problem}")

    def obj(self, value: Any, key: str) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.fail(key, f"expected an object, got {kind_of(value)}")
        return value

    def known_keys(self, value: Mapping[str, Any], key: str, allowed: Iterable[str]) -> None:
        allowed = list(allowed)
        for name in value:
            if name not in allowed:
                hint = difflib.get_close_matches(name, allowed, n=1)
                extra = (
                    f" (did you mean {hint[0]!r}?)" if hint else f"; known: {', '.join(allowed)}"
                )
                raise self.fail(join_key(key, name), f"unknown key{extra}")

    def string(self, value: Any, key: str) -> str:
        if not isinstance(value, str) or not value:
            raise self.fail(key, f"expected a non-empty string, got {kind_of(value)}")
        return value

    def number(self, value: Any, key: str, *, integer: bool = False, minimum: float = 0) -> Any:
        ok = isinstance(value, int) if integer else isinstance(value, int | float)
        if isinstance(value, bool) or not ok:
            want = "an integer" if integer else "a number"
            raise self.fail(key, f"expected {want}, got {kind_of(value)}")
        if value <= minimum:
            raise self.fail(key, f"must be greater than {minimum:g}, got {value!r}")
        return value

    def boolean(self, value: Any, key: str) -> bool:
        if not isinstance(value, bool):
            raise self.fail(key, f"expected true or false, got {kind_of(value)}")
        return value

    def strings(self, value: Any, key: str) -> tuple[str, ...]:
        if not isinstance(value, list):
            raise self.fail(key, f"expected a list of strings, got {kind_of(value)}")
        for i, item in enumerate(value):
            if not isinstance(item, str):
                raise self.fail(f"{key}[{i}]", f"expected a string, got {kind_of(item)}")
        return tuple(value)

    def string_map(self, value: Any, key: str) -> dict[str, str]:
        value = self.obj(value, key)
        for name, item in value.items():
            if not isinstance(item, str):
                raise self.fail(join_key(key, name), f"expected a string, got {kind_of(item)}")
        return dict(value)


def kind_of(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"boolean {str(value).lower()}"
    if isinstance(value, int | float):
        return f"number {value!r}"
    if isinstance(value, str):
        return f"string {value[:40]!r}"
    return {"list": "a list", "dict": "an object"}.get(type(value).__name__, type(value).__name__)


def join_key(key: str, name: str) -> str:
    return f"{key}.{name}" if key else name


def mask_url(url: str) -> str:
    """``url`` with its password and query values as ``***`` (they may come from the
    environment), for messages and ``describe()``."""
    parts = urlsplit(url)
    netloc = parts.netloc
    if parts.password is not None:
        netloc = f"{parts.username}:***@" + netloc.rsplit("@", 1)[1]
    query = "&".join(
        f"{pair.split('=', 1)[0]}=***" if "=" in pair else pair
        for pair in parts.query.split("&")
        if pair
    )
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


# ${NAME} or ${env:NAME}; $${ is a literal ${. Anything else inside ${...} is an error.
_VARIABLE = re.compile(r"\$\$\{|\$\{([^}]*)\}")
_ENV_NAME = re.compile(r"(?:env:)?([A-Za-z_][A-Za-z0-9_]*)")


def expand(check: Checker, value: str, key: str) -> str:
    """``value`` with ``${NAME}``/``${env:NAME}`` replaced from the environment."""

    def substitute(match: re.Match[str]) -> str:
        if match.group(0) == "$${":
            return "${"
        inner = match.group(1)
        name = _ENV_NAME.fullmatch(inner)
        if inner.startswith("input:"):
            raise check.fail(
                key,
                f"${{{inner}}}: VS Code input variables are not supported; "
                "put the value in an environment variable and write ${env:NAME}",
            )
        if name is None:
            raise check.fail(
                key, f"${{{inner}}}: expected ${{NAME}} or ${{env:NAME}} (an environment variable)"
            )
        found = os.environ.get(name.group(1))
        if found is None:
            raise check.fail(key, f"environment variable {name.group(1)!r} is not set")
        return found

    return _VARIABLE.sub(substitute, value)


def expand_map(check: Checker, value: Any, key: str) -> dict[str, str]:
    """A map of strings (headers, env) with each value expanded."""
    raw = check.string_map(value, key)
    return {name: expand(check, item, join_key(key, name)) for name, item in raw.items()}


def parse_numbers(check: Checker, raw: Any, key: str, names: Mapping[str, str], base: Any) -> Any:
    """``base`` (a frozen record) with the numbers of the object ``raw`` set: ``names`` maps
    each file key to its field; a field whose default is an int takes only integers."""
    raw = check.obj(raw, key)
    check.known_keys(raw, key, names)
    values = {}
    for wire, attr in names.items():
        if wire in raw:
            integer = isinstance(getattr(base, attr), int)
            values[attr] = check.number(raw[wire], f"{key}.{wire}", integer=integer)
    return replace(base, **values)
