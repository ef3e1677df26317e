"""The benchmark summary broken down by the shape of each case: its arguments, their types,
whether their values are in the request, and by phase.

Stage: benchmark report (after the runner, or later over a run folder: :func:`load_run`).
Guarantees:

- **A case's shape is the reference call's**, never the strategy's own call, so every strategy
  is bucketed alike: the first accepted value of every argument of the answer's ground truth
  (every call of a several-call case; an optional argument whose first accepted value is
  ``""`` is absent; inside a dict value, whose keys BFCL also gives as lists of accepted
  values, the first of each, an optional ``""`` key left out); without an answer, the calls
  ``constrained`` wrote on that case; without those, the line's own calls (:func:`case_shape`).
- **Types come from the case's tool schema** (JSON Schema, as the decoders saw it): ``enum``
  when the parameter has an ``enum``, else its ``type`` with ``integer`` counted as
  ``number``; from the value itself when the schema does not say (a parameter without
  ``type``, or one the tool does not declare). An argument whose type is still unknown (a
  ``null`` value without a schema type) counts in no value-type bucket.
- **Verbatim** is a plain text test against the user's messages, lowercased: a string appears
  as it is (a substring: what a lookup draft could copy), a number as its JSON text (an
  integral float also as the integer: ``5.0`` as ``5``) not inside a longer number, a boolean
  or null only when its JSON word appears as a word; an array or object is verbatim when every
  leaf value is. A case is ``verbatim`` when all its arguments are, ``derived`` when none is,
  ``mixed`` otherwise; a case without arguments is in the ``"0"`` argument-count bucket
  (:data:`NO_ARGS_BUCKET`, present only then) and in no verbatim bucket.
- **Without the cases** (a report over a run whose cases file is gone:
  :func:`by_arg_count_from_calls`) only the argument counts can be told, by the same rule with
  no answer: the calls ``constrained`` wrote on the case, else the line's own.
- **Bucket numbers are the summary's own** (:func:`weavehost.bench.report.contract_numbers`):
  geometric means over the bucket's lines, and ``speedup_vs_constrained`` against
  ``constrained``'s lines of the same cases, so a bucket is compared with itself. A case counts
  in ``by_value_type`` once per type it has. Every bucket key is present (``n`` 0 and null
  numbers when no case falls in it); a line whose case is not among ``cases`` is left out.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from weavehost.bench.cases import AnswerSet, BenchCase, load_answers, load_cases
from weavehost.bench.compare import BASELINE
from weavehost.bench.report import contract_numbers, geomean, load_results, phase_means, ratio
from weavehost.errors import BenchError

__all__ = [
    "ARG_COUNT_BUCKETS",
    "NO_ARGS_BUCKET",
    "VALUE_TYPES",
    "VERBATIM_BUCKETS",
    "breakdowns",
    "by_arg_count_from_calls",
    "case_shape",
    "is_verbatim",
    "load_run",
    "read_json_object",
    "request_text",
]

ARG_COUNT_BUCKETS = ("1", "2", "3", "4+")
# The bucket of the cases without arguments, before ARG_COUNT_BUCKETS when there is one.
NO_ARGS_BUCKET = "0"
VALUE_TYPES = ("string", "number", "boolean", "enum", "array", "object")
VERBATIM_BUCKETS = ("verbatim", "derived", "mixed")
_SCHEMA_TYPES = {
    "string": "string",
    "number": "number",
    "integer": "number",
    "boolean": "boolean",
    "array": "array",
    "object": "object",
}


def request_text(case: BenchCase) -> str:
    """The user's messages of ``case``, joined by newlines."""
    return "\n".join(m["content"] for m in case.messages if m.get("role") == "user")


def _word_appears(word: str, text: str) -> bool:
    """``word`` in ``text`` (both lowercased by the caller), not inside a longer word."""
    return re.search(r"(?<!\w)" + re.escape(word) + r"(?!\w)", text) is not None


def _number_appears(value: float | int, text: str) -> bool:
    spellings = {json.dumps(value)}
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        spellings.add(str(int(value)))
    # Not inside a longer number: no digit (or digit and point) right before or after.
    return any(
        re.search(r"(?<!\d)(?<!\d\.)" + re.escape(s) + r"(?!\.?\d)", text) for s in spellings
    )


def is_verbatim(value: Any, text: str) -> bool:
    """Whether ``value`` appears in ``text`` (see the module docstring); ``text`` is compared
    lowercased."""
    text = text.lower()
    return _verbatim(value, text)


def _verbatim(value: Any, text: str) -> bool:
    if isinstance(value, bool) or value is None:
        return _word_appears(json.dumps(value), text)
    if isinstance(value, int | float):
        return _number_appears(value, text)
    if isinstance(value, str):
        return value.lower() in text
    if isinstance(value, Mapping):
        return all(_verbatim(v, text) for v in value.values())
    if isinstance(value, list | tuple):
        return all(_verbatim(v, text) for v in value)
    return str(value).lower() in text


def _value_type(value: Any) -> str | None:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list | tuple):
        return "array"
    if isinstance(value, Mapping):
        return "object"
    return None


def _schema_type(schema: Any) -> str | None:
    if not isinstance(schema, Mapping):
        return None
    if "enum" in schema:
        return "enum"
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), None)
    return _SCHEMA_TYPES.get(kind) if isinstance(kind, str) else None


def _calls_arguments(
    calls: Sequence[Mapping[str, Any]] | None,
) -> list[tuple[str, dict[str, Any]]]:
    """``(name, arguments)`` of result-line calls."""
    return [(str(call.get("name")), dict(call.get("arguments") or {})) for call in calls or ()]


def _reference_calls(
    case: BenchCase,
    answer: AnswerSet | None,
    calls_fallback: Sequence[Mapping[str, Any]] | None,
) -> list[tuple[str, dict[str, Any]]]:
    if answer is None:
        return _calls_arguments(calls_fallback)
    required = {tool.name: set(tool.parameters.get("required") or ()) for tool in case.tools}
    calls = []
    for truth in answer.ground_truth:
        ((name, params),) = truth.items()
        arguments = {}
        for param, accepted in params.items():
            if not accepted:
                continue
            first = accepted[0]
            if first == "" and param not in required.get(name, set()):
                continue  # an optional argument left out
            arguments[param] = _first_accepted(first)
        calls.append((name, arguments))
    return calls


def _first_accepted(value: Any) -> Any:
    """A BFCL answer value with each dict key's accepted values (a list) replaced by the first,
    also in a list of dicts; a key whose first accepted value is ``""`` is left out."""
    if isinstance(value, list):
        return [_first_accepted(item) if isinstance(item, Mapping) else item for item in value]
    if not isinstance(value, Mapping):
        return value
    out = {}
    for key, accepted in value.items():
        first = (accepted[0] if accepted else "") if isinstance(accepted, list) else accepted
        if first != "":
            out[key] = _first_accepted(first)
    return out


def case_shape(
    case: BenchCase,
    answer: AnswerSet | None,
    calls_fallback: Sequence[Mapping[str, Any]] | None,
) -> dict[str, Any]:
    """``{"n_args", "args": [{"name", "type", "verbatim"}]}`` of the case's reference calls
    (see the module docstring): from ``answer`` when given, else from ``calls_fallback``
    (result-line calls, ``{"name", "arguments"}``). ``n_args`` counts every argument of every
    reference call; ``type`` is None when neither schema nor value tells it."""
    tools = {tool.name: tool for tool in case.tools}
    text = request_text(case).lower()
    args = []
    for name, arguments in _reference_calls(case, answer, calls_fallback):
        tool = tools.get(name)
        properties = (tool.parameters.get("properties") or {}) if tool is not None else {}
        for param, value in arguments.items():
            kind = _schema_type(properties.get(param)) or _value_type(value)
            args.append({"name": param, "type": kind, "verbatim": _verbatim(value, text)})
    return {"n_args": len(args), "args": args}


def _arg_bucket(n_args: int) -> str:
    return "4+" if n_args >= 4 else str(n_args)


def _verbatim_bucket(args: Sequence[Mapping[str, Any]]) -> str | None:
    if not args:
        return None
    flags = [a["verbatim"] for a in args]
    return "verbatim" if all(flags) else "derived" if not any(flags) else "mixed"


def _stats(
    rows: Sequence[Mapping[str, Any]], baseline_by_id: Mapping[str, Mapping[str, Any]]
) -> dict[str, Any]:
    numbers = contract_numbers(rows)
    ids = {r.get("id") for r in rows}
    base = geomean(baseline_by_id[i].get("tool_latency_s") for i in ids if i in baseline_by_id)
    numbers["speedup_vs_constrained"] = ratio(base, numbers["geo_tool_latency_s"])
    return numbers


def _baseline_lines(records: Sequence[Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
    """Case id → ``constrained``'s line on it."""
    return {str(r["id"]): r for r in records if r.get("strategy") == BASELINE and "id" in r}


def _by_arg_count(
    counted: Sequence[tuple[Mapping[str, Any], int]],
    baseline_by_id: Mapping[str, Mapping[str, Any]],
) -> dict[str, dict[str, Any]]:
    """The ``by_arg_count`` section over ``(line, its case's argument count)`` pairs."""
    zero = any(n_args == 0 for _, n_args in counted)
    buckets: dict[str, list[Mapping[str, Any]]] = {
        key: [] for key in ((NO_ARGS_BUCKET,) if zero else ()) + ARG_COUNT_BUCKETS
    }
    for record, n_args in counted:
        buckets[_arg_bucket(n_args)].append(record)
    return {key: _stats(rows, baseline_by_id) for key, rows in buckets.items()}


def breakdowns(
    records: Sequence[Mapping[str, Any]],
    cases: Sequence[BenchCase],
    answers: Mapping[str, AnswerSet] | None,
) -> dict[str, dict[str, Any]]:
    """Per strategy (first appearance order) ``{"by_arg_count", "by_value_type",
    "by_verbatim", "by_phase"}``: the first three map each bucket to the summary's contract
    numbers over its lines, ``by_phase`` is ``{phase: {"mean_s", "n"}}``."""
    by_id = {case.id: case for case in cases}
    baseline_by_id = _baseline_lines(records)
    shapes: dict[str, dict[str, Any]] = {}

    def shape_of(record: Mapping[str, Any]) -> dict[str, Any] | None:
        case = by_id.get(str(record.get("id")))
        if case is None:
            return None
        answer = answers.get(case.id) if answers is not None else None
        reference = (baseline_by_id.get(case.id) or {}).get("calls")
        if answer is None and not reference:
            # Only the line's own calls to go by: its shape is its own.
            return case_shape(case, None, record.get("calls") or [])
        if case.id not in shapes:
            shapes[case.id] = case_shape(case, answer, reference)
        return shapes[case.id]

    # Every strategy gets an entry, also one none of whose lines is among the cases.
    grouped: dict[str, list[tuple[Mapping[str, Any], dict[str, Any]]]] = {}
    for record in records:
        pairs = grouped.setdefault(str(record.get("strategy")), [])
        shape = shape_of(record)
        if shape is not None:
            pairs.append((record, shape))

    out: dict[str, dict[str, Any]] = {}
    for strategy, pairs in grouped.items():
        by_type: dict[str, list[Mapping[str, Any]]] = {key: [] for key in VALUE_TYPES}
        by_verbatim: dict[str, list[Mapping[str, Any]]] = {key: [] for key in VERBATIM_BUCKETS}
        for record, shape in pairs:
            for kind in dict.fromkeys(a["type"] for a in shape["args"]):
                if kind in by_type:
                    by_type[kind].append(record)
            bucket = _verbatim_bucket(shape["args"])
            if bucket is not None:
                by_verbatim[bucket].append(record)
        out[strategy] = {
            "by_arg_count": _by_arg_count(
                [(record, shape["n_args"]) for record, shape in pairs], baseline_by_id
            ),
            "by_value_type": {k: _stats(v, baseline_by_id) for k, v in by_type.items()},
            "by_verbatim": {k: _stats(v, baseline_by_id) for k, v in by_verbatim.items()},
            "by_phase": phase_means([record for record, _ in pairs]),
        }
    return out


def by_arg_count_from_calls(
    records: Sequence[Mapping[str, Any]],
) -> dict[str, dict[str, dict[str, Any]]]:
    """Per strategy (first appearance order) the ``by_arg_count`` section of
    :func:`breakdowns` for a run whose cases are not at hand: a case's argument count is that
    of the calls ``constrained`` wrote on it, else of the line's own calls (the module
    docstring's rule without an answer)."""
    baseline_by_id = _baseline_lines(records)
    counted: dict[str, list[tuple[Mapping[str, Any], int]]] = {}
    for record in records:
        reference = (baseline_by_id.get(str(record.get("id"))) or {}).get("calls")
        calls = _calls_arguments(reference or record.get("calls"))
        n_args = sum(len(arguments) for _, arguments in calls)
        counted.setdefault(str(record.get("strategy")), []).append((record, n_args))
    return {strategy: _by_arg_count(pairs, baseline_by_id) for strategy, pairs in counted.items()}


def read_json_object(path: Path) -> dict[str, Any]:
    """The JSON object in ``path`` (a run's run.json or summary.json); a clear
    :class:`BenchError` for a missing, unreadable, non-UTF-8 or non-object file."""
    try:
        info = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise BenchError(f"{path} does not exist: is {path.parent} a bench run folder?") from None
    except OSError as exc:
        raise BenchError(f"cannot read {path}: {exc.strerror}") from exc
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise BenchError(f"{path} is not JSON ({exc})") from exc
    if not isinstance(info, dict):
        raise BenchError(f"{path} does not hold a JSON object")
    return info


def _input_path(recorded: Any, run_dir: Path, what: str) -> Path:
    if not isinstance(recorded, str) or not recorded:
        raise BenchError(f"{run_dir / 'run.json'} does not record the {what} file")
    path = Path(recorded).expanduser()
    if not path.is_absolute() and not path.exists() and (run_dir / path).exists():
        path = run_dir / path
    if not path.exists():
        raise BenchError(
            f"the {what} file {recorded} that {run_dir / 'run.json'} names does not exist "
            "(moved, or relative to another folder?)"
        )
    return path


def load_run(
    run_dir: str | Path,
) -> tuple[list[dict[str, Any]], dict[str, Any], list[BenchCase], dict[str, AnswerSet] | None]:
    """``(records, run_info, cases, answers)`` of a bench run folder: its ``results.jsonl``,
    its ``run.json``, and the cases and answers that ``run.json`` names (the first ``n_cases``
    of the case file, as the run read them; ``answers`` None when the run had none), ready for
    :func:`breakdowns`. Anything missing or unreadable is a :class:`BenchError` naming it."""
    folder = Path(run_dir)
    if not folder.is_dir():
        raise BenchError(f"{folder} is not a folder (expected a bench run's --out folder)")
    run_info = read_json_object(folder / "run.json")
    records = load_results(folder / "results.jsonl")
    limit = run_info.get("n_cases")
    cases = load_cases(
        _input_path(run_info.get("cases"), folder, "case"),
        limit=limit if isinstance(limit, int) and limit > 0 else None,
    )
    answers_recorded = run_info.get("answers")
    answers = (
        load_answers(_input_path(answers_recorded, folder, "answer")) if answers_recorded else None
    )
    return records, run_info, cases, answers
