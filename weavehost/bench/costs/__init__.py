"""The cost tables weavehost ships, and how ``--cost-model`` finds one by name or by path.

Stage: benchmark (inputs). A cost table prices a pass by its number of rows on some machine
(the format :func:`weavehost.engine.calibrate.load_cost_table` reads); ``weavehost bench
--cost-model`` re-costs a run's passes with one, a projection, never a measurement. This
package holds, as package data, the tables a user can name without a file of their own:

- ``phone-oneplus12r``, ``phone-pixel7``: the SchemaWeaver paper's phones (Table 10; only
  widths 1 and 4 are published, the rest is filled by ``CostTable.pass_cost``'s rule);
- ``gpu-flat``: a *synthetic* flat curve (4.0 ms a pass at any width from 1 to 64 rows), the
  shape of a small model on a desktop GPU, where extra rows are free. It is not a measured
  machine, and its ``machine`` field says so, so every projection made with it says so too.

Each file names where it came from in its ``machine`` and ``source`` fields. Guarantees of
:func:`resolve_cost_model`: an existing file is always taken as given (a file of the user's
shadows a shipped name); otherwise a shipped name gives that table's file; anything else is a
:class:`ConfigError` that lists the shipped names.
"""

from __future__ import annotations

import os
from pathlib import Path

from weavehost.errors import ConfigError

__all__ = ["COSTS_DIR", "resolve_cost_model", "shipped_cost_models"]

COSTS_DIR = Path(__file__).parent


def shipped_cost_models() -> dict[str, Path]:
    """The shipped tables by name (a file's name without ``.json``), sorted by name."""
    return {path.stem: path for path in sorted(COSTS_DIR.glob("*.json"))}


def resolve_cost_model(name_or_path: str | os.PathLike[str]) -> Path:
    """The cost file ``name_or_path`` means: an existing file as given, else the shipped table
    of that name (``gpu-flat``, ``phone-oneplus12r``, ...), else a :class:`ConfigError`."""
    path = Path(name_or_path).expanduser()
    if path.is_file():
        return path
    shipped = shipped_cost_models()
    if str(name_or_path) in shipped:
        return shipped[str(name_or_path)]
    raise ConfigError(
        f"{name_or_path}: no such cost table (neither a file nor a shipped table: "
        f"{', '.join(shipped)})"
    )
