"""``python -m weavehost.bench.sensitivity``: one slice of cases at several thread counts and
quantizations, and projected onto other machines' cost tables.

Stage: benchmark (a driver over :func:`weavehost.bench.runner.run_bench`). It asks how much of
a measured speedup belongs to this machine: the same cases and strategies run at every
(model × threads) configuration into ``DIR/<quant>-t<threads>/``, and once per cost table
(``--cost-models``, default the paper's OnePlus 12R and the synthetic GPU-like flat curve) as a
projection run into ``DIR/proj-<table>/``. Guarantees:

- **One at a time.** Configurations run one after another in this process, each a whole
  ``run_bench`` with its own engine, freed before the next starts: never two at once, so no
  configuration's threads compete with another's.
- **Arguments first.** Strategies, thread counts, quantization names, model files (each must
  be a GGUF file), cost tables (found and parsed), the case file and the answer file are all
  checked before any model loads; a bad one is one :class:`BenchError` or
  :class:`ConfigError`, and nothing is written.
- **A failed configuration is data.** One that cannot run (the Q8_0 file not made yet, a model
  llama.cpp cannot load) is an ``error`` in ``sensitivity.json`` and an error line in
  ``sensitivity.md``; the others still run, and the command then ends with a
  :class:`BenchError` naming the failed ones. An interrupt stops the sweep.
- **Written as it goes.** ``sensitivity.json`` and ``sensitivity.md`` are rewritten after every
  configuration (those not run yet are ``pending``), so an interrupted sweep keeps what it did.
- **Labelled.** The sweep records its exact command and the machine (CPU flags included); every
  configuration its CPU flags, model file and quantization, threads, weave's decode plan and the
  equivalent ``weavehost bench`` command. A projection is labelled ``projection on <machine>,
  not a measurement`` wherever its numbers appear.
"""

from __future__ import annotations

import json
import re
import shlex
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from weavehost.bench.assets import file_type_name, parse_quants, quantized_path
from weavehost.bench.cases import load_answers, load_cases
from weavehost.bench.costs import resolve_cost_model
from weavehost.bench.machine import machine_info
from weavehost.bench.report import BASELINE, PROJECTION_BASELINES, ratio
from weavehost.bench.runner import (
    DEFAULT_MAX_TOKENS,
    BenchConfig,
    bench_command,
    parse_strategies,
    run_bench,
)
from weavehost.bench.sensitivity_report import render_markdown
from weavehost.decode.calibration import plan_path
from weavehost.engine import DEFAULT_N_CTX
from weavehost.engine.calibrate import load_cost_table
from weavehost.errors import AbortedError, BenchError, WeavehostError
from weavehost.gguf import read_metadata

__all__ = [
    "DEFAULT_COST_MODELS",
    "DEFAULT_QUANTS",
    "DEFAULT_SENSITIVITY_STRATEGIES",
    "DEFAULT_THREADS",
    "Configuration",
    "ModelVariant",
    "SensitivityConfig",
    "SensitivityRun",
    "main",
    "parse_threads",
    "plan_configurations",
    "run_sensitivity",
]

PROG = "python -m weavehost.bench.sensitivity"
DEFAULT_SENSITIVITY_STRATEGIES = ("constrained", "jump_forward", "weave")
DEFAULT_THREADS = (1, 2)
DEFAULT_QUANTS = ("q4_0", "q8_0")
# The paper's phone curve and the GPU-like flat curve (weavehost/bench/costs/).
DEFAULT_COST_MODELS = ("phone-oneplus12r", "gpu-flat")
# The comparison baselines of every row (each where it ran): the summary's projection's, whose
# speedup_vs_<baseline> keys the rows take over.
BASELINES = PROJECTION_BASELINES
# Says a --cost-models list is empty on purpose.
NO_COST_MODELS = "none"
_ASSETS_HINT = "make it with `python -m weavehost.bench.assets --quants q4_0,q8_0`"


@dataclass(frozen=True, slots=True)
class ModelVariant:
    """One model file of the sweep: ``label`` names its folders (``q4_0``), ``quant`` is its
    GGUF file type as llama.cpp names it; ``missing`` says how to make a file not made yet."""

    label: str
    path: Path
    quant: str
    missing: str | None = None


@dataclass(frozen=True, slots=True)
class Configuration:
    """One run of the sweep: a model at a thread count, projected when ``cost_file`` is set
    (``machine`` is then the table's machine)."""

    name: str
    model: ModelVariant
    threads: int
    cost_file: Path | None = None
    machine: str | None = None

    @property
    def kind(self) -> str:
        return "measured" if self.cost_file is None else "projection"

    @property
    def label(self) -> str:
        if self.cost_file is None:
            return "measured on this machine"
        return f"projection on {self.machine}, not a measurement"


@dataclass(frozen=True, slots=True)
class SensitivityConfig:
    """What the sweep was asked to do. Without ``quants`` and ``models`` the models are the
    :data:`DEFAULT_QUANTS` of the benchmark assets in ``cache``; ``models`` come first, then
    ``quants``; the projections run on the first model at the most threads asked for."""

    cases: Path
    out: Path
    answers: Path | None = None
    strategies: tuple[str, ...] = DEFAULT_SENSITIVITY_STRATEGIES
    threads: tuple[int, ...] = DEFAULT_THREADS
    quants: tuple[str, ...] = ()
    models: tuple[Path, ...] = ()
    cost_models: tuple[str, ...] = DEFAULT_COST_MODELS
    limit: int | None = None
    format: str | None = None
    n_ctx: int = DEFAULT_N_CTX
    max_tokens: int = DEFAULT_MAX_TOKENS
    cache: Path | None = None
    command: str = ""


@dataclass(frozen=True, slots=True)
class SensitivityRun:
    """Where the sweep wrote its report, what it holds, and the configurations that failed."""

    json_path: Path
    md_path: Path
    record: dict[str, Any] = field(default_factory=dict)
    failed: tuple[str, ...] = ()


def parse_threads(text: str) -> tuple[int, ...]:
    """``"1,2"`` as thread counts, each a whole number >= 1, each once; else a
    :class:`BenchError`."""
    counts: list[int] = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        if not part.isdigit() or int(part) < 1:
            raise BenchError(
                f"--threads takes whole numbers >= 1 separated by commas, not {text!r}"
            )
        counts.append(int(part))
    if not counts:
        raise BenchError("--threads needs at least one thread count")
    return tuple(dict.fromkeys(counts))


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9._-]+", "-", text.lower()).strip("-") or "model"


def _unique(name: str, taken: set[str]) -> str:
    candidate, number = name, 2
    while candidate in taken:
        candidate, number = f"{name}-{number}", number + 1
    taken.add(candidate)
    return candidate


def _file_type(path: Path) -> str:
    return file_type_name(read_metadata(path).get("general.file_type"))


def _variants(config: SensitivityConfig) -> list[ModelVariant]:
    quants = parse_quants(",".join(config.quants)) if config.quants else ()
    if not quants and not config.models:
        quants = DEFAULT_QUANTS
    variants: list[ModelVariant] = []
    taken: set[str] = set()
    for path in config.models:
        path = path.expanduser()
        if not path.is_file():
            raise BenchError(f"--models: {path} is not a file")
        quant = _file_type(path)  # a file that is not GGUF fails here, before any load
        label = _slug(quant) if _slug(quant) not in taken else _slug(f"{quant}-{path.stem}")
        variants.append(ModelVariant(_unique(label, taken), path.resolve(), quant))
    for quant in quants:
        path = quantized_path(quant, config.cache)
        exists = path.is_file()
        variants.append(
            ModelVariant(
                _unique(quant, taken),
                path,
                _file_type(path) if exists else quant.upper(),
                None if exists else f"{path} does not exist: {_ASSETS_HINT}",
            )
        )
    return variants


def plan_configurations(config: SensitivityConfig) -> list[Configuration]:
    """Every configuration the sweep will run, in order: each model at each thread count, then
    one projection per cost table. Checks every argument (see the module docstring) and loads
    no model; a bad argument is a :class:`BenchError` or :class:`ConfigError`."""
    parse_strategies(config.strategies)
    if not config.threads or any(t < 1 for t in config.threads):
        raise BenchError(f"thread counts are whole numbers >= 1, not {config.threads!r}")
    cases = load_cases(config.cases, limit=config.limit)
    if config.answers is not None:
        answers = load_answers(config.answers)
        if not any(case.id in answers for case in cases):
            raise BenchError(
                f"the answer file {config.answers} has no answer for any of the cases "
                f"(first case id: {cases[0].id!r}); is it the possible_answer file of CASES?"
            )
    tables = []
    for name in config.cost_models:
        path = resolve_cost_model(name)
        table = load_cost_table(path)
        tables.append((name, path, table.machine or table.source))
    variants = _variants(config)
    configurations = [
        Configuration(f"{variant.label}-t{threads}", variant, threads)
        for variant in variants
        for threads in config.threads
    ]
    taken = {c.name for c in configurations}
    for name, path, machine in tables:
        slug = _slug(Path(name).stem if Path(name).suffix == ".json" else Path(name).name)
        configurations.append(
            Configuration(
                _unique(f"proj-{slug}", taken), variants[0], max(config.threads), path, machine
            )
        )
    return configurations


def _bench_config(config: SensitivityConfig, configuration: Configuration) -> BenchConfig:
    return BenchConfig(
        cases=config.cases,
        out=config.out / configuration.name,
        answers=config.answers,
        model=str(configuration.model.path),
        strategies=tuple(config.strategies),
        limit=config.limit,
        threads=configuration.threads,
        format=config.format,
        n_ctx=config.n_ctx,
        max_tokens=config.max_tokens,
        cost_model=configuration.cost_file,
    )


def _weave_plan(configuration: Configuration) -> str:
    """Which decode plan ``weave`` runs by in this configuration."""
    if configuration.cost_file is not None:
        return f"made from the cost table ({configuration.cost_file})"
    if not configuration.model.path.is_file():
        return "unknown (no model file)"
    stored = plan_path(configuration.model.path, configuration.threads)
    if stored.is_file():
        return f"calibrated ({stored})"
    return (
        f"none: not calibrated at {configuration.threads} thread(s) (no padding, values on "
        f"sequence 0); `weavehost calibrate --model {configuration.model.path} --threads "
        f"{configuration.threads}` makes one"
    )


def _entry(config: SensitivityConfig, configuration: Configuration) -> dict[str, Any]:
    bench = _bench_config(config, configuration)
    return {
        "name": configuration.name,
        "kind": configuration.kind,
        "label": configuration.label,
        "status": "pending",
        "model": str(configuration.model.path),
        "model_name": None,
        "quant": configuration.model.quant,
        "threads": configuration.threads,
        "cost_model": str(configuration.cost_file) if configuration.cost_file else None,
        "machine": configuration.machine,
        "weave_plan": _weave_plan(configuration),
        "out": str(bench.out),
        "command": bench_command(bench),
        "cpu_flags": None,
        "load_average_at_start": None,
        "elapsed_s": None,
        "error": None,
        "strategies": None,
        "projection": None,
    }


def _speedup(summary: Mapping[str, Mapping[str, Any]], name: str, baseline: str) -> float | None:
    """``name``'s tool-latency speedup vs ``baseline``: the summary's own vs ``constrained``,
    else the same ratio of the two geomeans."""
    if baseline == BASELINE:
        return summary[name]["speedup_vs_constrained"]
    base = (summary.get(baseline) or {}).get("geo_tool_latency_s")
    return ratio(base, summary[name]["geo_tool_latency_s"])


def _strategy_rows(summary: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Each strategy's measured numbers, with its speedups vs each baseline that ran."""
    rows = {}
    for name, numbers in summary.items():
        rows[name] = {
            "n": numbers["n"],
            "geo_tool_latency_s": numbers["geo_tool_latency_s"],
            "geo_final_latency_s": numbers["geo_final_latency_s"],
            **{f"speedup_vs_{b}": _speedup(summary, name, b) for b in BASELINES},
            "mean_forward_passes": numbers["mean_forward_passes"],
            "correct_rate": numbers["correct_rate"],
            "same_as_constrained_rate": numbers.get("same_as_constrained_rate"),
            "errors": numbers.get("errors"),
        }
    return rows


def _projection(configuration: Configuration, summary: Mapping[str, Mapping[str, Any]]) -> Any:
    return {
        "label": configuration.label,
        "machine": configuration.machine,
        "cost_model": str(configuration.cost_file),
        "strategies": {
            name: {
                key: (numbers.get("projection") or {}).get(key)
                for key in ("geo_latency_s", *(f"speedup_vs_{b}" for b in BASELINES))
            }
            for name, numbers in summary.items()
        },
    }


def run_sensitivity(
    config: SensitivityConfig, *, progress: Callable[[str], None] | None = None
) -> SensitivityRun:
    """Check every argument, then run each configuration in turn (see the module docstring)
    and write ``sensitivity.json`` and ``sensitivity.md`` under ``config.out``."""
    say = progress or (lambda line: print(line, file=sys.stderr, flush=True))
    configurations = plan_configurations(config)
    try:
        config.out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise BenchError(f"cannot create the output folder {config.out}: {exc.strerror}") from exc
    machine = machine_info()
    record: dict[str, Any] = {
        "what": "the same cases at each thread count and quantization, and projected onto "
        "other machines' cost tables (projections are not measurements)",
        "command": config.command,
        "cases": str(config.cases),
        "answers": str(config.answers) if config.answers else None,
        "limit": config.limit,
        "strategies": list(config.strategies),
        "threads": list(config.threads),
        "cpu_flags": machine["cpu_flags"],
        "machine": machine,
        "finished": None,
        "configurations": [_entry(config, c) for c in configurations],
    }
    json_path, md_path = config.out / "sensitivity.json", config.out / "sensitivity.md"

    def write() -> None:
        json_path.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
        md_path.write_text(render_markdown(record), encoding="utf-8")

    write()
    failed: list[str] = []
    for index, (configuration, entry) in enumerate(
        zip(configurations, record["configurations"], strict=True), start=1
    ):
        say(f"sensitivity: [{index}/{len(configurations)}] {configuration.name}: {entry['label']}")
        started = time.perf_counter()
        try:
            if configuration.model.missing:
                raise BenchError(configuration.model.missing)
            run = run_bench(
                _bench_config(config, configuration),
                progress=lambda line, name=configuration.name: say(f"[{name}] {line}"),
            )
        except AbortedError:
            raise
        except WeavehostError as exc:
            entry.update(status="error", error=f"{type(exc).__name__}: {exc}")
            failed.append(configuration.name)
            say(f"sensitivity: {configuration.name} failed: {entry['error']}")
        else:
            run_info = json.loads(run.run_json.read_text(encoding="utf-8"))
            entry.update(
                status="done",
                model_name=run_info.get("model_name"),
                cpu_flags=run_info.get("cpu_flags"),
                load_average_at_start=run_info.get("load_average_at_start"),
                strategies=_strategy_rows(run.summary),
            )
            if configuration.cost_file is not None:
                entry["projection"] = _projection(configuration, run.summary)
        entry["elapsed_s"] = round(time.perf_counter() - started, 1)
        write()
    record["finished"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    write()
    return SensitivityRun(json_path, md_path, record, tuple(failed))


# ----------------------------------------------------------------------------- the command


def _names(text: str | None) -> tuple[str, ...]:
    return tuple(part.strip() for part in (text or "").split(",") if part.strip())


def _sweep(
    cases: Path,
    answers: Path | None,
    out: Path,
    limit: int | None,
    strategies: str,
    threads: str,
    quants: str | None,
    models: str | None,
    cost_models: str,
    cache: Path | None,
    ctx: int,
    max_tokens: int,
    format_name: str | None,
    command: str,
) -> None:
    import click

    tables = () if cost_models.strip() == NO_COST_MODELS else _names(cost_models)
    config = SensitivityConfig(
        cases=cases,
        out=out,
        answers=answers,
        strategies=parse_strategies(strategies),
        threads=parse_threads(threads),
        quants=_names(quants),
        models=tuple(Path(p) for p in _names(models)),
        cost_models=tables,
        limit=limit,
        format=format_name,
        n_ctx=ctx,
        max_tokens=max_tokens,
        cache=cache,
        command=command,
    )
    run = run_sensitivity(config, progress=lambda line: click.echo(line, err=True))
    click.echo(f"report: {run.md_path}")
    click.echo(f"data:   {run.json_path}")
    if run.failed:
        raise BenchError(
            f"{len(run.failed)} of {len(run.record['configurations'])} configurations failed "
            f"({', '.join(run.failed)}); see {run.md_path}"
        )


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m weavehost.bench.sensitivity CASES --out DIR [options]``; returns the exit
    code (a :class:`WeavehostError` is one ``Error: …`` line and its code, as in the CLI)."""
    import click

    from weavehost.cli_options import WeavehostCommand

    args = list(argv) if argv is not None else sys.argv[1:]
    path = click.Path(dir_okay=False, path_type=Path)
    command = WeavehostCommand(
        PROG,
        callback=lambda **options: _sweep(**options, command=f"{PROG} {shlex.join(args)}"),
        help="Run the same cases at each thread count and quantization (each into "
        "DIR/<quant>-t<threads>/), then once per cost table as a projection (DIR/proj-<table>/); "
        "write DIR/sensitivity.md and DIR/sensitivity.json.",
        context_settings={"help_option_names": ["-h", "--help"]},
        params=[
            click.Argument(["cases"], type=path),
            click.Option(["--answers"], type=path, default=None, help="BFCL answers for CASES."),
            click.Option(
                ["--out"],
                type=click.Path(file_okay=False, path_type=Path),
                required=True,
                help="Folder for the runs and the report.",
            ),
            click.Option(
                ["--limit"], type=click.IntRange(min=1), default=None, help="First N cases only."
            ),
            click.Option(
                ["--strategies"],
                default=",".join(DEFAULT_SENSITIVITY_STRATEGIES),
                show_default=True,
                help="Comma-separated strategies.",
            ),
            click.Option(
                ["--threads"],
                default=",".join(map(str, DEFAULT_THREADS)),
                show_default=True,
                help="Comma-separated thread counts.",
            ),
            click.Option(
                ["--quants"],
                default=None,
                help="Comma-separated quantizations of the benchmark's Qwen2.5-Coder-0.5B "
                f"(default {','.join(DEFAULT_QUANTS)} unless --models is given).",
            ),
            click.Option(
                ["--models"],
                default=None,
                metavar="PATH,...",
                help="Comma-separated GGUF files to run instead of (or before) --quants.",
            ),
            click.Option(
                ["--cost-models"],
                default=",".join(DEFAULT_COST_MODELS),
                show_default=True,
                metavar="NAME|FILE,...",
                help="Cost tables to project onto (shipped names or files), each a run of the "
                f"first model at the most threads; '{NO_COST_MODELS}' for no projection.",
            ),
            click.Option(
                ["--cache"],
                type=click.Path(file_okay=False, path_type=Path),
                default=None,
                help="Where the benchmark assets are (default: the weavehost cache).",
            ),
            click.Option(
                ["--ctx"],
                type=click.IntRange(min=256),
                default=DEFAULT_N_CTX,
                show_default=True,
                help="Context size (tokens).",
            ),
            click.Option(
                ["--max-tokens"],
                type=click.IntRange(min=1),
                default=DEFAULT_MAX_TOKENS,
                show_default=True,
                help="Most tokens one call may take.",
            ),
            click.Option(["--format", "format_name"], default=None, help="Model format override."),
        ],
    )
    return command.run(args)


if __name__ == "__main__":
    raise SystemExit(main())
