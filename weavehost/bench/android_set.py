"""The Android-intents benchmark set: BFCL v4 cases over ``tools/android.py`` (issue 15).

Stage: benchmark input, made before the run. ``python -m weavehost.bench.assets`` writes it into
the cache as :data:`CASES_FILE` and :data:`ANSWERS_FILE`; ``python -m
weavehost.bench.android_set --stats`` prints its counts (``docs/android-set.md``).
:func:`build_android_set` turns the hand-written intents of
:mod:`weavehost.bench.android_intents` into case and answer records of the JSON-lines shape
:func:`~weavehost.bench.cases.load_cases` and :func:`~weavehost.bench.cases.load_answers` read.

Guarantees:

- **Real schemas.** A case's ``function`` entries are the android server's tools as the server
  itself lists them (built in-process): name, description, and its input schema unchanged as
  ``parameters`` (JSON Schema spellings, which the BFCL reader and checker both accept), so
  enums, integer bounds and ``required`` are the server's.
- **Deterministic.** Nothing is random: which cases get distractor tools follows their place in
  their template, which distractors and in what order follows SHA-256 of the request. Building
  twice gives the same bytes.
- **Checked.** Every accepted value validates against its parameter's schema (jsonschema), every
  required argument has an answer that cannot be left out, every parameter of the tool has
  accepted values (BFCL refuses a call naming one that has none), the canonical call (first
  accepted value of each argument, ``""`` = left out) validates as a whole, and ids are unique.
  A case that fails is a :class:`BenchError` naming it; nothing is dropped. The set must hold
  :data:`SET_SIZE` cases, so growing it renames the files rather than changing them in place.
- **Any prefix samples everything.** Cases are dealt round-robin over the templates, so
  ``--limit 20`` already covers most intents. Each case records how it was made in ``meta``
  (``kind``, ``template``, ``category``, ``tool``, ``offered``), which the case reader ignores.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import sys
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import anyio
from jsonschema import Draft202012Validator

from weavehost.bench.agent_tasks import TOOLS_DIR
from weavehost.bench.android_intents import Intent, all_templates
from weavehost.errors import BenchError

__all__ = [
    "ANDROID_SCRIPT",
    "ANSWERS_FILE",
    "CASES_FILE",
    "KINDS",
    "SET_NAME",
    "SET_SIZE",
    "android_set_bytes",
    "android_tools",
    "build_android_set",
    "canonical_call",
    "format_stats",
    "main",
    "set_stats",
]

ANDROID_SCRIPT = TOOLS_DIR / "android.py"
SET_SIZE = 192
SET_NAME = f"android-{SET_SIZE}"
CASES_FILE = f"{SET_NAME}.jsonl"
ANSWERS_FILE = f"{SET_NAME}-answers.jsonl"
KINDS = ("verbatim", "conversion", "optional", "enum", "multi_tool")
# The distractor a case with several tools always gets first: the tool most easily confused
# with the right one. The rest are drawn from all the other tools by hash.
NEAR_MISS = {
    "set_alarm": "set_timer", "set_timer": "set_alarm", "list_alarms": "set_alarm",
    "send_message": "make_phone_call", "make_phone_call": "send_message",
    "create_calendar_event": "set_alarm", "search_contacts": "web_search",
    "web_search": "search_contacts", "open_app": "toggle_setting",
    "toggle_setting": "set_volume", "set_volume": "toggle_setting",
    "get_battery_status": "get_current_location", "get_current_location": "get_battery_status",
}  # fmt: skip
_MODULE_NAME = "weavehost_bench_android_server"


def _android_module(script: Path) -> ModuleType:
    """``tools/android.py`` imported from its path (it is no part of the package)."""
    loaded = sys.modules.get(_MODULE_NAME)
    if loaded is not None and Path(loaded.__file__ or "") == script:
        return loaded
    if not script.is_file():
        raise BenchError(f"the android example server {script} is not there (the set is built "
                         "from a checkout of the repository)")  # fmt: skip
    spec = importlib.util.spec_from_file_location(_MODULE_NAME, script)
    if spec is None or spec.loader is None:
        raise BenchError(f"cannot import {script}")
    module = importlib.util.module_from_spec(spec)
    # dataclasses look their module up in sys.modules while the module runs.
    sys.modules[_MODULE_NAME] = module
    try:
        spec.loader.exec_module(module)
    except Exception:
        del sys.modules[_MODULE_NAME]
        raise
    return module


def android_tools(script: Path = ANDROID_SCRIPT) -> list[dict[str, Any]]:
    """The android server's tools as BFCL ``function`` entries, listed by the server in-process.

    Synchronous (it runs its own event loop): call it outside async code.
    """
    server = _android_module(script).build_server()
    listed = anyio.run(server.list_tools)
    return [
        {"name": t.name, "description": t.description or "", "parameters": t.input_schema}
        for t in listed
    ]


def _digest(*parts: str) -> str:
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()


def _offer(intent: Intent, turn: int, functions: Sequence[Mapping[str, Any]]) -> list[str]:
    """The tool names a case offers: its own alone at even turns (its place in its template
    plus the template's place), else with 2-4 distractors (the near miss first), in an order
    drawn by hash. So half of each template, and half of every round of the deal, has several."""
    if turn % 2 == 0:
        return [intent.tool]
    key = f"{intent.template}|{intent.text}"
    others = [f["name"] for f in functions if f["name"] != intent.tool]
    near = NEAR_MISS.get(intent.tool)
    drawn = sorted((n for n in others if n != near), key=lambda n: _digest(key, "pick", n))
    count = 2 + (turn // 2) % 3
    chosen = ([near] if near in others else []) + drawn
    offered = [intent.tool, *chosen[:count]]
    return sorted(offered, key=lambda n: _digest(key, "order", n))


def _where(intent: Intent) -> str:
    return f"template {intent.template!r}, request {intent.text!r}"


def _complete(intent: Intent, function: Mapping[str, Any]) -> dict[str, list[Any]]:
    """Accepted values for every parameter: the intent's, then ``["", default]`` for each
    optional one it leaves out."""
    parameters = function["parameters"]
    properties: Mapping[str, Any] = parameters.get("properties", {})
    required = set(parameters.get("required", []))
    unknown = sorted(set(intent.accepted) - set(properties))
    if unknown:
        raise BenchError(f"{_where(intent)}: {intent.tool} has no parameter {unknown[0]!r}")
    accepted: dict[str, list[Any]] = {}
    for name, schema in properties.items():
        if name in intent.accepted:
            values = list(intent.accepted[name])
            if not values:
                raise BenchError(f"{_where(intent)}: no accepted value for {name!r}")
            if name in required and "" in values:
                raise BenchError(f"{_where(intent)}: required {name!r} may not be left out")
            accepted[name] = values
        elif name in required:
            raise BenchError(f"{_where(intent)}: no answer for the required {name!r}")
        else:
            default = schema.get("default", "")
            accepted[name] = [""] if default == "" else ["", default]
    return accepted


def canonical_call(accepted: Mapping[str, list[Any]]) -> dict[str, Any]:
    """The first accepted value of each argument; ``""`` first means the argument is left out."""
    return {name: values[0] for name, values in accepted.items() if values[0] != ""}


def _validate(
    intent: Intent, function: Mapping[str, Any], accepted: Mapping[str, list[Any]]
) -> None:
    properties = function["parameters"].get("properties", {})
    for name, values in accepted.items():
        validator = Draft202012Validator(properties[name])
        for value in values:
            if value == "":
                continue  # BFCL's mark for "may be left out" (checked optional above)
            error = next(iter(validator.iter_errors(value)), None)
            if error is not None:
                raise BenchError(
                    f"{_where(intent)}: accepted {name}={value!r} breaks its schema: "
                    f"{error.message}"
                )
    call = canonical_call(accepted)
    error = next(iter(Draft202012Validator(function["parameters"]).iter_errors(call)), None)
    if error is not None:
        raise BenchError(f"{_where(intent)}: the call {call} breaks the schema: {error.message}")


def _dealt(templates: Mapping[str, list[Intent]]) -> list[tuple[Intent, int]]:
    """Round-robin over the templates: each intent with its turn (place in its template plus
    the template's place in the deal)."""
    dealt = []
    rounds = max((len(intents) for intents in templates.values()), default=0)
    for place in range(rounds):
        for number, intents in enumerate(templates.values()):
            if place < len(intents):
                dealt.append((intents[place], place + number))
    return dealt


def build_android_set(
    functions: Sequence[Mapping[str, Any]] | None = None,
    templates: Mapping[str, list[Intent]] | None = None,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The set's case records and answer records, in the same order (ids ``android_0``...).

    ``functions`` defaults to :func:`android_tools`, ``templates`` to every template of
    :mod:`weavehost.bench.android_intents`; both are parameters so a test can build a variant.
    Raises :class:`BenchError` for any case that fails the checks of the module docstring.
    """
    functions = list(functions if functions is not None else android_tools())
    by_name = {f["name"]: f for f in functions}
    cases: list[dict[str, Any]] = []
    answers: list[dict[str, Any]] = []
    seen: dict[str, str] = {}
    for index, (intent, turn) in enumerate(_dealt(templates or all_templates())):
        if intent.tool not in by_name:
            raise BenchError(f"{_where(intent)}: the android server has no tool {intent.tool!r}")
        if intent.text in seen:
            raise BenchError(f"{_where(intent)}: the same request is in {seen[intent.text]!r}")
        seen[intent.text] = intent.template
        unknown = sorted(set(intent.kinds) - set(KINDS))
        if unknown:
            raise BenchError(f"{_where(intent)}: unknown kind {unknown[0]!r}")
        accepted = _complete(intent, by_name[intent.tool])
        _validate(intent, by_name[intent.tool], accepted)
        offered = _offer(intent, turn, functions)
        kinds = [k for k in KINDS if k in intent.kinds or (k == "multi_tool" and len(offered) > 1)]
        messages = [{"role": "user", "content": intent.text}]
        if intent.system:
            messages.insert(0, {"role": "system", "content": intent.system})
        case_id = f"android_{index}"
        cases.append({
            "id": case_id,
            "question": [messages],
            "function": [by_name[name] for name in offered],
            "meta": {"kind": kinds, "template": intent.template, "category": intent.category,
                     "tool": intent.tool, "offered": len(offered)},
        })  # fmt: skip
        answers.append({"id": case_id, "ground_truth": [{intent.tool: accepted}]})
    missing = sorted(set(by_name) - {case["meta"]["tool"] for case in cases})
    if missing:
        raise BenchError(f"no case calls {', '.join(missing)}: every android tool needs one")
    return cases, answers


def _lines(records: Sequence[Mapping[str, Any]]) -> bytes:
    return "".join(json.dumps(record) + "\n" for record in records).encode()


def android_set_bytes() -> tuple[bytes, bytes]:
    """The two files' contents (cases, answers); a :class:`BenchError` unless the set holds
    exactly :data:`SET_SIZE` cases (grow it, then raise the constant: the file names follow)."""
    cases, answers = build_android_set()
    if len(cases) != SET_SIZE:
        raise BenchError(f"the android set has {len(cases)} cases but SET_SIZE says {SET_SIZE}; "
                         "update SET_SIZE in weavehost/bench/android_set.py")  # fmt: skip
    return _lines(cases), _lines(answers)


def set_stats(
    cases: Sequence[Mapping[str, Any]], answers: Sequence[Mapping[str, Any]]
) -> dict[str, Counter[str]]:
    """Counts of the set by category, tool, kind, template, tools offered, and optional
    arguments (set by the request, or left out: ``""`` first among the accepted values)."""
    stats: dict[str, Counter[str]] = {
        k: Counter() for k in ("category", "tool", "kind", "template", "offered", "optional")
    }
    for case, answer in zip(cases, answers, strict=True):
        meta = case["meta"]
        for key in ("category", "tool", "template"):
            stats[key][meta[key]] += 1
        stats["kind"].update(meta["kind"])
        stats["offered"][f"{meta['offered']} tool" + ("s" if meta["offered"] > 1 else "")] += 1
        ((tool, accepted),) = answer["ground_truth"][0].items()
        required = next(f for f in case["function"] if f["name"] == tool)["parameters"].get(
            "required", []
        )
        for name, values in accepted.items():
            if name not in required:
                stats["optional"]["left out" if values[0] == "" else "set"] += 1
    return stats


def format_stats(stats: Mapping[str, Counter[str]], total: int) -> str:
    """The counts as Markdown tables (the form ``docs/android-set.md`` quotes)."""
    out = [f"{total} cases ({SET_NAME}).", ""]
    titles = {"category": "Category", "tool": "Tool", "kind": "Kind (a case has several)",
              "template": "Template", "offered": "Tools offered",
              "optional": "Optional arguments"}  # fmt: skip
    for key, title in titles.items():
        counts = stats[key]
        order = KINDS if key == "kind" else sorted(counts)
        out += [f"| {title} | cases |" if key != "optional" else f"| {title} | arguments |"]
        out += ["|---|---:|"]
        out += [f"| {name} | {counts[name]} |" for name in order]
        out.append("")
    return "\n".join(out)


def _print_stats(stats: bool) -> None:
    import click

    cases, answers = build_android_set()
    if stats:
        click.echo(format_stats(set_stats(cases, answers), len(cases)), nl=False)
    else:
        click.echo(f"{len(cases)} cases, every answer valid ({SET_NAME}; SET_SIZE {SET_SIZE})")


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m weavehost.bench.android_set [--stats]``: build and check the set, print its
    size (or its counts as Markdown). Errors go through the CLI's one error path."""
    import click

    from weavehost.cli_options import WeavehostCommand

    prog = "python -m weavehost.bench.android_set"
    command = WeavehostCommand(
        prog,
        callback=_print_stats,
        help="Build and check the Android-intents set (python -m weavehost.bench.assets writes "
        "it to the cache).",
        context_settings={"help_option_names": ["-h", "--help"]},
        params=[click.Option(["--stats"], is_flag=True, help="Print the counts as Markdown.")],
    )
    return command.run(argv)


if __name__ == "__main__":
    raise SystemExit(main())
