"""Correctness of a decoded call, judged by BFCL's AST-checker rules (Python categories).

Stage: benchmark scoring. This is a port of ``bfcl_eval/eval_checker/ast_eval/ast_checker.py``
(bfcl-eval 2026.3.23: ``simple_function_checker``, ``multiple_function_checker``,
``parallel_function_checker_no_order`` and their helpers) for ``Language.PYTHON``, so that
bfcl-eval stays out of the runtime dependencies. The rules, as BFCL applies them:

- one ground-truth call (simple, multiple): exactly one call, named as expected; several
  (parallel): as many calls, matched to the answers in any order;
- every required parameter of the function is present; a parameter the function or the answer
  does not know fails;
- types are strict (``True`` is no integer) except that an int is accepted for a ``float``
  parameter; a value of the answer's own type where the function says otherwise is taken as a
  "variable" and compared as is;
- strings (also inside lists and dicts) are compared after BFCL's standardisation: every
  character of `` ,./-_*^`` removed, lowercased, ``'`` turned into ``"``;
- a parameter the answer lists but the call omits fails unless ``""`` is among its accepted
  values.

The function records are the raw BFCL ones (types ``dict``, ``float``, ``tuple``, ``any``); the
JSON Schema spellings (``object``, ``number``) are read as their BFCL twins, so normalised
schemas work too. Function names are compared exactly (BFCL's dot-to-underscore renaming applies
only to APIs that forbid dots, which ours do not). A type name BFCL's Python mapping lacks
(Java/JavaScript categories) is not type-checked, only value-checked.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from weavehost.bench.cases import AnswerSet
from weavehost.formats.base import ToolCall

__all__ = ["Verdict", "check_call", "check_calls", "standardize_string"]

_PYTHON_TYPES: dict[str, type] = {
    "string": str,
    "integer": int,
    "float": float,
    "boolean": bool,
    "array": list,
    "tuple": list,
    "dict": dict,
    "any": str,
    # JSON Schema spellings of the same types (normalised schemas).
    "number": float,
    "object": dict,
}
_NESTED_CHECKED = ("array", "tuple")
_STANDARDIZE_RE = re.compile(r"[ \,\.\/\-\_\*\^]")


@dataclass(frozen=True, slots=True)
class Verdict:
    """Whether the calls are accepted, and BFCL's reason when they are not."""

    valid: bool
    error: str = ""
    error_type: str = ""


_OK = Verdict(True)


def standardize_string(text: str) -> str:
    """BFCL's string standardisation: drop `` ,./-_*^``, lowercase, ``'`` → ``"``."""
    return _STANDARDIZE_RE.sub("", text).lower().replace("'", '"')


def _answer_type(accepted: Sequence[Any]) -> type | None:
    for answer in accepted:
        if answer != "":
            return type(answer)
    return None


def _type_check(
    param: str, value: Any, accepted: Sequence[Any], expected: type | None, nested: type | None
) -> tuple[Verdict, bool]:
    """BFCL's ``type_checker``: (verdict, is_variable)."""
    if expected is None:
        return _OK, False
    answer_type = _answer_type(accepted)
    is_variable = answer_type is not None and answer_type is not expected
    if type(value) is expected:
        if nested is None:
            return _OK, is_variable
        for accepted_item in accepted:
            flag = True
            if type(accepted_item) is list:
                for item in value:
                    verdict, _ = _type_check(param, item, accepted_item, nested, None)
                    if not verdict.valid:
                        flag = False
                        break
            if flag:
                return _OK, is_variable
        # (BFCL then runs its variable test, but returns this failure whatever it finds.)
        return (
            Verdict(
                False,
                f"Nested type checking failed for parameter {param!r}. Expected inner type "
                f"{nested.__name__}. Parameter value: {value!r}.",
                "type_error:nested",
            ),
            False,
        )
    if answer_type is not None and type(value) is answer_type:
        return _OK, True
    return (
        Verdict(
            False,
            f"Incorrect type for parameter {param!r}. Expected type {expected.__name__}, got "
            f"{type(value).__name__}. Parameter value: {value!r}.",
            "type_error:simple",
        ),
        False,
    )


def _standardized(value: Any) -> Any:
    return standardize_string(value) if type(value) is str else value


def _string_check(param: str, value: str, accepted: Sequence[Any]) -> Verdict:
    if standardize_string(value) not in [standardize_string(a) for a in accepted if type(a) is str]:
        return Verdict(
            False,
            f"Invalid value for parameter {param!r}: {value!r}. Expected one of {list(accepted)}. "
            "Case insensitive.",
            "value_error:string",
        )
    return _OK


def _list_check(param: str, value: list[Any], accepted: Sequence[Any]) -> Verdict:
    given = [_standardized(item) for item in value]
    options = []
    for option in accepted:
        # BFCL indexes every accepted value as a list; a string option is a list of characters.
        items = option if isinstance(option, list | str) else [option]
        options.append([standardize_string(i) if type(i) is str else i for i in items])
    if given not in options:
        return Verdict(
            False,
            f"Invalid value for parameter {param!r}: {value!r}. Expected one of {list(accepted)}.",
            "value_error:list/tuple",
        )
    return _OK


def _dict_check(param: str, value: Mapping[str, Any], accepted: Sequence[Any]) -> Verdict:
    verdict = Verdict(False, "", "dict_checker:unclear")
    for option in accepted:
        if option == "":
            continue
        if not isinstance(option, Mapping):
            verdict = Verdict(
                False,
                f"Invalid value for parameter {param!r}: {value!r}.",
                "value_error:dict_value",
            )
            continue
        verdict = Verdict(False, "", "dict_checker:unclear")
        flag = True
        for key, item in value.items():
            if key not in option:
                verdict = Verdict(
                    False, f"Unexpected dict key parameter: {key!r}.", "value_error:dict_key"
                )
                flag = False
                break
            choices = [_standardized(c) for c in option[key]]
            if _standardized(item) not in choices:
                verdict = Verdict(
                    False,
                    f"Invalid value for parameter {key!r}: {item!r}. Expected one of {choices}.",
                    "value_error:dict_value",
                )
                flag = False
                break
        for key, choices in option.items():
            if key not in value and "" not in choices:
                verdict = Verdict(
                    False, f"Missing dict key parameter: {key!r}.", "value_error:dict_key"
                )
                flag = False
                break
        if flag:
            return _OK
    return verdict


def _list_dict_check(param: str, value: list[Any], accepted: Sequence[Any]) -> Verdict:
    verdict = Verdict(False, "", "list_dict_checker:unclear")
    for option in accepted:
        if not isinstance(option, list) or len(value) != len(option):
            verdict = Verdict(
                False, "Wrong number of dictionaries in the list.", "value_error:list_dict_count"
            )
            continue
        flag = True
        for item, expected in zip(value, option, strict=True):
            if not isinstance(item, Mapping):
                verdict = Verdict(
                    False,
                    f"Invalid value for parameter {param!r}: {item!r}.",
                    "value_error:list_dict",
                )
                flag = False
                break
            verdict = _dict_check(param, item, [expected])
            if not verdict.valid:
                flag = False
                break
        if flag:
            return _OK
    return verdict


def _property_type(details: Mapping[str, Any]) -> str | None:
    kind = details.get("type")
    if kind is None and "type" not in details:
        return "any"  # a normalised "any" has no type
    return kind if isinstance(kind, str) else None


def check_call(
    function: Mapping[str, Any], call: ToolCall, answer: Mapping[str, Mapping[str, list[Any]]]
) -> Verdict:
    """BFCL's ``simple_function_checker``: one call against one ground-truth call."""
    ((expected_name, accepted_params),) = answer.items()
    if call.name != function.get("name") or call.name != expected_name:
        return Verdict(
            False,
            f"Function name {expected_name!r} not found in model output.",
            "simple_function_checker:wrong_func_name",
        )
    parameters = function.get("parameters") or {}
    details_by_param = parameters.get("properties") or {}
    arguments = call.arguments
    for param in parameters.get("required") or []:
        if param not in arguments:
            return Verdict(
                False,
                f"Missing required parameter: {param!r}.",
                "simple_function_checker:missing_required",
            )
    for param, given in arguments.items():
        if param not in details_by_param or param not in accepted_params:
            return Verdict(
                False,
                f"Unexpected parameter: {param!r}.",
                "simple_function_checker:unexpected_param",
            )
        details = details_by_param[param] or {}
        accepted = accepted_params[param]
        type_name = _property_type(details)
        expected = _PYTHON_TYPES.get(type_name) if type_name else None
        nested = None
        if type_name in _NESTED_CHECKED:
            items = details.get("items") or {}
            nested_name = items.get("type") if isinstance(items, Mapping) else None
            nested = _PYTHON_TYPES.get(nested_name) if isinstance(nested_name, str) else None
        value = given
        if type_name in ("float", "number") and type(value) is int:
            value = float(value)  # Python's int-to-float promotion, as BFCL allows
        verdict, is_variable = _type_check(param, value, accepted, expected, nested)
        if not verdict.valid:
            return verdict
        if not is_variable:
            if expected is dict:
                verdict = _dict_check(param, value, accepted)
                if not verdict.valid:
                    return verdict
                continue
            if expected is list and nested is dict:
                verdict = _list_dict_check(param, value, accepted)
                if not verdict.valid:
                    return verdict
                continue
            if expected is str:
                verdict = _string_check(param, value, accepted)
                if not verdict.valid:
                    return verdict
                continue
            if expected is list:
                verdict = _list_check(param, value, accepted)
                if not verdict.valid:
                    return verdict
                continue
        if value not in accepted:
            return Verdict(
                False,
                f"Invalid value for parameter {param!r}: {value!r}. Expected one of {accepted}.",
                "value_error:others",
            )
    for param, accepted in accepted_params.items():
        if param not in arguments and "" not in accepted:
            return Verdict(
                False,
                f"Optional parameter {param!r} not provided and not marked as optional.",
                "simple_function_checker:missing_optional",
            )
    return _OK


def _find_function(functions: Sequence[Mapping[str, Any]], name: str) -> Mapping[str, Any]:
    for function in functions:
        if function.get("name") == name:
            return function
    return {"name": name, "parameters": {"properties": {}, "required": []}}


def check_calls(
    functions: Sequence[Mapping[str, Any]], calls: Sequence[ToolCall], answers: AnswerSet
) -> Verdict:
    """Whether ``calls`` answer the case: BFCL's simple/multiple checker for one ground-truth
    call, its order-free parallel checker for several."""
    truth = answers.ground_truth
    if len(calls) != len(truth):
        return Verdict(False, "Wrong number of functions.", "wrong_count")
    if len(truth) == 1:
        ((name, _),) = truth[0].items()
        return check_call(_find_function(functions, name), calls[0], truth[0])
    matched: set[int] = set()
    for index, answer in enumerate(truth):
        ((name, _),) = answer.items()
        function = _find_function(functions, name)
        for position, call in enumerate(calls):
            if position not in matched and check_call(function, call, answer).valid:
                matched.add(position)
                break
        else:
            return Verdict(
                False,
                f"Could not find a matching function for index {index} of possible answers.",
                "parallel_function_checker_no_order:cannot_find_match",
            )
    return _OK
