"""``weavehost bench-agent``: the end-to-end agent benchmark, task by task through :class:`Host`.

Stage: benchmark (end to end, on top of the agent). Where ``weavehost bench`` times one call
written into a fixed prompt, this runs whole turns as a user meets them: servers started, the
conversation rendered and prefilled, free text, the call, the tool run, the answer.

Guarantees:

- **A task runs as ``weavehost run`` does.** Each task, under each variant (a strategy, with
  the prompt cache on or off where :class:`Host` has one), gets a fresh :class:`Host`: its
  servers started, the model loaded, an empty KV cache; then one session for its turns, so a
  follow-up turn reuses the conversation. Starting the host is not timed. Variants are
  interleaved per task and their order rotates by one each task, as ``weavehost bench`` does,
  so machine noise hits all alike.
- **Times are the host's clock** (``time.perf_counter``) in the consumer of the turn's events,
  from the moment the turn is started to the moment an event is received:

  * *time to first tool start*: in the first turn where a tool result came back, to the start
    of the run that served that turn's first ``tool_result``: the ``provisional_call`` event
    with ``started: true`` when the result's ``source`` is ``provisional``, else the
    ``final_call`` event before it (``final`` or ``cache``; approval is ``always`` or ``never``,
    so nothing waits for a person between the event and the run). None when no tool ran.
  * *time to final answer*: each turn to its ``done`` event; a task's is the sum over its turns
    (what a user waits in all).
  * *provisional results*: ``tool_result`` events whose ``source`` is ``provisional``.

- **Scoring** (:mod:`weavehost.bench.agent_report`): a turn succeeds when the calls that ran
  match its expected calls by BFCL's checker (none expected: none ran) and its answer (the text
  after its last tool result) contains every fact, case-insensitively; a task when every turn
  does.
- **A remote model** (``--model http(s)://HOST:PORT/v1``, or ``--config`` with a remote
  ``model``): the server writes every call, so the variants are ``remote`` (trusted read-only
  calls start provisionally from the stream) and ``remote-late`` (``earlyStart: false``: they
  run once the reply ends); the prompt cache is the server's own (``cache=off`` here).
- **The stock stacks beside it** (``--peer NAME``, :mod:`weavehost.bench.agent_peer`): each
  peer is a local OpenAI-compatible server over the same GGUF, with the same threads and
  context size, started once before the first task (not timed) and stopped after the run,
  whatever ends it. Its variant, ``peer=NAME``, runs every task through weavehost's remote
  model against it, as a user of that server gets the turn (a remote model's variant
  ``remote``: early starts from the stream on; the server's own prompt cache), scored and timed
  as above, interleaved with weavehost's own variants. A peer that exits during the run stops
  it. Peers need a local GGUF: they do not go with a remote ``--model``.
- **One task set a run.** Every record and the summary name the set the tasks file is
  (``set``: ``examples``, ``third-party``, or ``custom`` for a file of the user's own;
  :func:`weavehost.bench.agent_tasks.task_set_of`), so the 51 over the example servers and the
  tasks over third-party servers are reported apart, never mixed.
- **Fixtures are fresh for each task run**: the folders a task's ``{files}`` and ``{repo}``
  stand for are made before its host starts and removed after it
  (:func:`weavehost.bench.agent_third_party.fixtures`), at the same paths for every variant of
  the run (one run folder), so the variants' tool results and answers compare; the model
  factory gets the task with them filled in.
- **Bad input fails before anything runs**: a malformed tasks file (:class:`BenchError` naming
  the line), a server path that is not there, an unknown strategy (:class:`ConfigError`), a
  model that cannot be found. Expected failures are data: a :class:`WeavehostError` met while
  running one task (a server that will not start, an engine fault) is that task's ``error`` and
  the run goes on; a model that does not load stops the run.
- **A cost model** (``--cost-model TABLE``: a cost file, or a shipped table by name as
  ``weavehost bench`` takes it, :func:`weavehost.bench.costs.resolve_cost_model`) re-prices
  each turn's passes after its last tool result with that machine's table: each turn's
  ``projected_after_result_s``, and per variant its geometric mean and ratio to drafts off
  (:func:`weavehost.bench.agent_report.answer_projection` says what is in it). A projection,
  never a measurement, and labelled so. As in ``weavehost bench``, the local model decodes by
  the plan made from the table (its calls' passes, and how many drafted tokens an answer's pass
  carries: ``Host(decode_plan=…)``), so the passes are the ones that machine's plan would
  choose; the run's own times are then not this machine's best. A local model only: a remote
  model's passes are the server's. An unknown table fails before anything runs.
- **Where drafts change an answer, the gap is reported.** The local model records each free
  token's top-two gap (``Host(record_margins=True)``: one ``max`` over the vocabulary a token);
  a drafted variant's record carries, per turn whose answer differs from the same task's
  drafts-off answer, the first choice where they part and both gaps there
  (:mod:`weavehost.bench.answer_gaps`).
- ``DIR/results.jsonl`` gets one line per task and variant, written and flushed as soon as it is
  known (a drafted variant's once the same task's drafts-off variant has run too);
  ``DIR/summary.json`` the setup and the summary.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from weavehost.agent import DEFAULT_MAX_STEPS
from weavehost.bench.agent_foresight import add_foresight
from weavehost.bench.agent_peer import (
    Launch,
    PeerCommand,
    PeerServer,
    parse_peers,
    peer_command,
    serve_peer,
)
from weavehost.bench.agent_report import (
    TurnTrace,
    format_tables,
    judge_turn,
    project_turns,
    setup_info,
    summarize_agent,
    trace_turn,
)
from weavehost.bench.agent_tasks import AgentTask, bind_task, load_tasks, task_set_of
from weavehost.bench.agent_third_party import check_run_folder, fixtures, run_folder
from weavehost.bench.answer_gaps import DraftPairs
from weavehost.bench.costs import resolve_cost_model
from weavehost.bench.machine import busy_warning, load_average
from weavehost.bench.runner import parse_strategies, write_line
from weavehost.config import DEFAULT_KV_CACHE, HostConfig, RemoteModelConfig
from weavehost.decode import STRATEGIES
from weavehost.decode.padding import DecodePlan
from weavehost.engine import DEFAULT_N_CTX, default_threads
from weavehost.engine.calibrate import CostTable, load_cost_table, table_record
from weavehost.engine.thermal import default_thread_count
from weavehost.errors import AbortedError, BenchError, ModelError, WeavehostError

if TYPE_CHECKING:
    from weavehost.agent import AgentModel, Event

__all__ = [
    "DEFAULT_AGENT_STRATEGIES",
    "ANSWER_DRAFT_MODES",
    "GUIDANCE_MODES",
    "PROMPT_CACHE_MODES",
    "REMOTE_STRATEGIES",
    "AgentBenchConfig",
    "AgentBenchRun",
    "Variant",
    "plan_variants",
    "run_agent_bench",
]

DEFAULT_AGENT_STRATEGIES = ("weave", "constrained")
# With a remote model (an OpenAI-compatible server) the server writes every call: the variants
# are the remote model with provisional starts from the stream, and without (earlyStart false).
REMOTE_STRATEGIES = ("remote", "remote-late")
PROMPT_CACHE_MODES = ("on", "off", "both")
# Greedy answers drafted and verified (Host's answer_drafts): on, off, or both in one run.
ANSWER_DRAFT_MODES = ("on", "off", "both")
# The host's guidance in the prompt: on, off, or both (an A/B in one run).
GUIDANCE_MODES = ("on", "off", "both")
# A hang guard on one turn, not a speed limit: a healthy turn of a 0.5B model on 2 threads takes
# well under a minute; past this the turn is cancelled and recorded as an error.
TURN_BOUND_S = 900.0

ModelFactory = Callable[[AgentTask, str], "AgentModel"]
"""Builds the model a task runs with under a strategy, instead of loading the GGUF (tests)."""


@dataclass(frozen=True, slots=True)
class AgentBenchConfig:
    """What ``weavehost bench-agent`` was asked to do."""

    tasks: Path
    out: Path
    model: str | None = None
    strategies: tuple[str, ...] = DEFAULT_AGENT_STRATEGIES
    limit: int | None = None
    threads: int | None = None
    prompt_cache: str = "both"
    answer_drafts: str = "on"
    guidance: str = "off"
    n_ctx: int = DEFAULT_N_CTX
    max_steps: int = DEFAULT_MAX_STEPS
    remote: RemoteModelConfig | None = None  # a remote server instead of ``model``
    peers: tuple[str, ...] = ()  # stock stacks run beside (``--peer``), each a variant
    cost_model: str | None = None  # a cost file or shipped table's name (``--cost-model``)
    kv_cache: str = DEFAULT_KV_CACHE  # the local model's KV cache type (``--kv-cache``)
    fixtures_dir: Path | None = None  # the run's fixtures here, not in a temporary folder


@dataclass(frozen=True, slots=True)
class Variant:
    """One way of running every task: a strategy, with the prompt cache ``on`` or ``off`` and,
    for a local model, answer drafts ``on`` or ``off`` (``None``: a remote model's) and the
    host's guidance ``on`` or ``off`` (``None``: the host's default, not named in the label);
    or a stock stack (``peer``), driven by the remote model."""

    strategy: str
    prompt_cache: str
    peer: str | None = None
    answer_drafts: str | None = None
    guidance: str | None = None

    @property
    def label(self) -> str:
        if self.peer is not None:
            return f"peer={self.peer}"
        drafts = "" if self.answer_drafts is None else f" drafts={self.answer_drafts}"
        guidance = "" if self.guidance is None else f" guidance={self.guidance}"
        return f"{self.strategy} cache={self.prompt_cache}{drafts}{guidance}"


@dataclass(frozen=True, slots=True)
class AgentBenchRun:
    """Where a finished run wrote its files, and its summary."""

    results: Path
    summary_json: Path
    summary: Mapping[str, Any]
    table: str


def parse_agent_strategies(text: str | Sequence[str]) -> tuple[str, ...]:
    """``"weave,constrained"`` as decoder names, each once (the stock peer writes no agent's
    calls); a :class:`BenchError` otherwise."""
    return parse_strategies(text, known=tuple(STRATEGIES))


def plan_variants(
    strategies: Sequence[str],
    prompt_cache: str,
    answer_drafts: str | None = None,
    guidance: str | None = None,
) -> list[Variant]:
    """Every strategy with every prompt-cache, answer-drafts and guidance setting asked for
    (``answer_drafts=None``: not a setting of these variants, a remote model's;
    ``guidance=None``: the host's default)."""
    if prompt_cache not in PROMPT_CACHE_MODES:
        raise BenchError(
            f"--prompt-cache: expected one of {', '.join(PROMPT_CACHE_MODES)}, got {prompt_cache!r}"
        )
    if answer_drafts is not None and answer_drafts not in ANSWER_DRAFT_MODES:
        raise BenchError(
            f"--answer-drafts: expected one of {', '.join(ANSWER_DRAFT_MODES)}, "
            f"got {answer_drafts!r}"
        )
    modes = ("off", "on") if prompt_cache == "both" else (prompt_cache,)
    if guidance is not None and guidance not in GUIDANCE_MODES:
        raise BenchError(
            f"--guidance: expected one of {', '.join(GUIDANCE_MODES)}, got {guidance!r}"
        )
    drafts = ("off", "on") if answer_drafts == "both" else (answer_drafts,)
    guided = ("on", "off") if guidance == "both" else (guidance,)
    return [
        Variant(strategy, mode, answer_drafts=draft, guidance=with_guidance)
        for strategy in strategies
        for mode in modes
        for draft in drafts
        for with_guidance in guided
    ]


def run_agent_bench(
    config: AgentBenchConfig,
    *,
    progress: Callable[[str], None] | None = None,
    make_model: ModelFactory | None = None,
) -> AgentBenchRun:
    """Run every task under every variant; write ``results.jsonl`` and ``summary.json``."""
    if config.remote is not None:  # the local strategies and prompt cache do not apply
        asked = config.strategies
        if tuple(asked) == DEFAULT_AGENT_STRATEGIES:
            asked = REMOTE_STRATEGIES
        strategies = parse_strategies(asked, known=REMOTE_STRATEGIES)
    else:
        strategies = parse_agent_strategies(config.strategies)
    tasks = load_tasks(config.tasks)
    if config.limit is not None:
        tasks = tasks[: config.limit]
    cache_mode = "off" if config.remote is not None else config.prompt_cache
    drafts_mode = None if config.remote is not None else config.answer_drafts
    # A remote server writes its own prompt: the host's guidance does not reach it. Guidance
    # off is the host's default, named in the labels only where a run asks for on or both.
    local_guidance = config.guidance if config.guidance != "off" else None
    guidance_mode = None if config.remote is not None else local_guidance
    variants = plan_variants(strategies, cache_mode, drafts_mode, guidance_mode)
    peers = parse_peers(config.peers)
    if peers and config.remote is not None:
        raise BenchError("--peer starts a server over a local GGUF; it does not go with a remote "
                         "--model")  # fmt: skip
    costs = _cost_model(config)  # an unknown or malformed table fails here
    model_path: str | None = None
    if config.remote is not None:
        model_path = config.remote.describe()
    elif make_model is None or peers:
        from weavehost.models import resolve_model

        model_path = str(resolve_model(config.model).path)  # a missing model fails here, once
    launch = Launch(Path(model_path or ""), config.threads or default_thread_count(), config.n_ctx,
                    config.kv_cache)  # fmt: skip
    uncalibrated = None
    if model_path is not None and config.remote is None and make_model is None:
        uncalibrated = _uncalibrated(config, launch)  # a stale stored calibration fails here
    commands = [peer_command(name, launch) for name in peers]  # a missing peer fails here
    variants += [Variant("remote", "off", peer=name) for name in peers]
    check_run_folder(config.fixtures_dir)  # a folder holding the user's files fails here
    try:
        config.out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise BenchError(f"cannot create --out folder {config.out}: {exc.strerror}") from exc
    plan = _Plan(config, tuple(tasks), tuple(variants), model_path, tuple(commands), costs)
    if uncalibrated and progress is not None:
        progress(f"bench-agent: {uncalibrated}")
    return anyio.run(_run, plan, progress, make_model)


def _uncalibrated(config: AgentBenchConfig, launch: Launch) -> str | None:
    """A warning where drafted answers are asked for but this machine has no calibration of
    the model at these threads (and no --cost-model stands in): without a cost table nothing
    is drafted, so drafts on would run as drafts off. A stored calibration that is damaged or
    from an older weavehost is a :class:`ConfigError` now, before any task starts."""
    from weavehost.decode.calibration import load_plan
    from weavehost.decode.padding import NO_PLAN

    if config.answer_drafts == "off" or config.cost_model is not None:
        return None
    if load_plan(launch.model, launch.threads, kv_cache=config.kv_cache) is not NO_PLAN:
        return None
    return (
        f"no calibration of {launch.model.name} at {launch.threads} threads on this machine: "
        "answers are not drafted, so drafts on runs as drafts off; run `weavehost calibrate "
        f"--model {launch.model} --threads {launch.threads}"
        + ("" if config.kv_cache == DEFAULT_KV_CACHE else f" --kv-cache {config.kv_cache}")
        + "` first"
    )


@dataclass(frozen=True, slots=True)
class _Plan:
    """A run as checked before anything starts."""

    config: AgentBenchConfig
    tasks: tuple[AgentTask, ...]
    variants: tuple[Variant, ...]
    model_path: str | None  # the GGUF (or the remote server) weavehost's variants run
    commands: tuple[PeerCommand, ...]  # the peers to start
    costs: _CostModel | None = None  # the table answers are re-priced with (``--cost-model``)


@dataclass(frozen=True, slots=True)
class _CostModel:
    """The cost table a run re-prices its answers with, and the file it came from."""

    path: Path
    table: CostTable

    @property
    def plan(self) -> DecodePlan:
        """The decode plan made from the table, which the local model decodes by (its calls'
        passes and how many drafted tokens an answer's pass carries), as ``weavehost bench
        --cost-model`` gives ``weave`` one."""
        return DecodePlan.from_table(self.table, source=f"bench-agent --cost-model {self.path}")

    def describe(self) -> dict[str, Any]:
        return {
            "file": str(self.path),
            "machine": self.table.machine,
            "table": table_record(self.table),
            "projection": "the passes after each turn's last tool result re-priced by this "
            "table; the local model decoded by the plan made from it (calls and drafts), as "
            "weavehost bench --cost-model does",
        }


def _cost_model(config: AgentBenchConfig) -> _CostModel | None:
    """The table ``--cost-model`` names (:class:`ConfigError` if none is found or it is
    malformed; :class:`BenchError` with a remote model, whose passes are not seen here)."""
    if config.cost_model is None:
        return None
    if config.remote is not None:
        raise BenchError("--cost-model re-prices the local model's passes; a remote --model's "
                         "passes are the server's and are not seen here")  # fmt: skip
    path = resolve_cost_model(config.cost_model)
    return _CostModel(path, load_cost_table(path))


async def _run(
    plan: _Plan,
    progress: Callable[[str], None] | None,
    make_model: ModelFactory | None,
) -> AgentBenchRun:
    """The run, with the peers' servers up around it (stopped whatever ends it)."""
    async with AsyncExitStack() as stack:
        servers: dict[str, PeerServer] = {}
        for command in plan.commands:
            log = plan.config.out / f"peer-{command.name}.log"
            server = await stack.enter_async_context(serve_peer(command, log))
            servers[command.name] = server
            if progress is not None:
                progress(f"bench-agent: peer {server.name} ready at {server.url} in "
                         f"{server.started_s:.1f} s (pid {server.pid}, log {log})")  # fmt: skip
        return await _run_tasks(plan, progress, make_model, servers)


async def _run_tasks(
    plan: _Plan,
    progress: Callable[[str], None] | None,
    make_model: ModelFactory | None,
    servers: Mapping[str, PeerServer],
) -> AgentBenchRun:
    config, tasks, variants = plan.config, plan.tasks, plan.variants
    results = config.out / "results.jsonl"
    task_set = task_set_of(config.tasks)
    records: list[dict[str, Any]] = []
    described: dict[str, Any] = {}
    total, done = len(tasks) * len(variants), 0
    warning = busy_warning(load_average(), config.threads or default_threads())
    if warning and progress is not None:
        progress(f"bench-agent: {warning}")
    # A drafted record goes out once its undrafted partner has run, with their differences.
    pairs = DraftPairs(
        (v.strategy, v.prompt_cache, v.guidance) for v in variants if v.answer_drafts == "off"
    )
    # One folder for the run's fixtures: each task's are made again at the same paths for
    # every variant, so the variants' conversations (and answers) compare.
    with (
        run_folder(config.fixtures_dir) as fx,
        results.open("w", encoding="utf-8") as sink,
    ):
        for index, task in enumerate(tasks):
            shift = index % len(variants)
            for variant in (*variants[shift:], *variants[:shift]):
                record = {"set": task_set}
                record.update(await _run_task(task, variant, plan, make_model, described, servers,
                                              Path(fx)))  # fmt: skip
                if plan.costs is not None:
                    record = project_turns(record, plan.costs.table)
                records.append(record)
                for line in pairs.ready(record):
                    write_line(sink, line)
                done += 1
                if progress is not None:
                    progress(f"[{done}/{total}] {variant.label} {task.id}: {_verdict(record)}")
        for line in pairs.rest():
            write_line(sink, line)
    labels = [v.label for v in variants]
    summary = {
        "set": task_set,
        "setup": setup_info(
            tasks_file=config.tasks,
            model=plan.model_path,
            host=described,
            variants=labels,
            limit=config.limit,
        ),
        **summarize_agent(records, labels),
    }
    if servers:
        summary["setup"]["peers"] = {name: s.describe() for name, s in servers.items()}
    if plan.costs is not None:
        summary["setup"]["cost_model"] = plan.costs.describe()
    if config.remote is None:
        summary["setup"]["kv_cache"] = config.kv_cache
    summary_json = config.out / "summary.json"
    summary_json.write_text(json.dumps(summary, indent=2, default=str) + "\n", encoding="utf-8")
    return AgentBenchRun(
        results=results, summary_json=summary_json, summary=summary, table=format_tables(summary)
    )


def _verdict(record: Mapping[str, Any]) -> str:
    if record.get("error"):
        return f"error ({record['error']})"
    answer = record.get("answer_s")
    timing = f" in {answer:.2f} s" if answer is not None else ""
    return ("ok" if record["success"] else "failed") + timing


async def _run_task(
    task: AgentTask,
    variant: Variant,
    plan: _Plan,
    make_model: ModelFactory | None,
    described: dict[str, Any],
    servers: Mapping[str, PeerServer],
    fixtures_under: Path | None = None,
) -> dict[str, Any]:
    config = plan.config
    record: dict[str, Any] = {
        "id": task.id,
        "variant": variant.label,
        "strategy": variant.strategy,
        "prompt_cache": variant.prompt_cache,
        "peer": variant.peer,
        "answer_drafts": variant.answer_drafts,
        "guidance": variant.guidance,
        "tags": list(task.tags),
        "success": None,
        "error": None,
    }
    kwargs: dict[str, Any] = {
        "trust": list(task.trust),
        "approval": task.approval,
        "strategy": variant.strategy,
        "threads": config.threads,
        "n_ctx": config.n_ctx,
        "max_steps": config.max_steps,
        # The user's choice, not the resolved path: the host picks its defaults (tool_choice
        # and the embedded SmolLM2's calls on description words) from where the model came from.
        "model": config.model,
        "prompt_cache": variant.prompt_cache == "on",
        # Each free token's top-two gap in the timings, for where drafted answers part.
        "record_margins": True,
    }
    if config.remote is None and variant.peer is None:
        kwargs["kv_cache"] = config.kv_cache
    if variant.answer_drafts is not None:
        kwargs["answer_drafts"] = variant.answer_drafts == "on"
    if plan.costs is not None and config.remote is None:  # decoded as planned for that machine
        kwargs["decode_plan"] = plan.costs.plan
    if variant.guidance is not None:
        kwargs["guidance"] = variant.guidance == "on"
    if config.remote is not None:
        early = variant.strategy == "remote"
        kwargs["config"] = HostConfig(remote=replace(config.remote, early_start=early))
        kwargs["model"] = None
        del kwargs["strategy"]  # a variant's name, not a local decoding strategy
    if variant.peer is not None:  # weavehost's remote model on the stock stack's server
        server = servers[variant.peer]
        server.check_running()
        kwargs["config"] = HostConfig(remote=server.remote(read_timeout=TURN_BOUND_S))
        kwargs["model"] = None
        del kwargs["strategy"]
    if task.tool_choice is not None:
        kwargs["tool_choice"] = task.tool_choice
    turns: list[dict[str, Any]] = []
    try:
        # Made before the host starts (a few milliseconds of git and copying; nothing else runs
        # yet), removed after it stops.
        with fixtures(task.fixtures, fixtures_under) as folders:
            bound = bind_task(task, folders)
            await _run_turns(bound, variant, kwargs, make_model, described, turns)
    except (AbortedError, ModelError):
        raise
    except WeavehostError as exc:
        record["error"] = f"{type(exc).__name__}: {exc}"
    record.update(_task_numbers(task, turns))
    if record["error"] is None:
        record["error"] = next((t["error"] for t in turns if t["error"]), None)
    return record


async def _run_turns(
    task: AgentTask,
    variant: Variant,
    kwargs: dict[str, Any],
    make_model: ModelFactory | None,
    described: dict[str, Any],
    turns: list[dict[str, Any]],
) -> None:
    """One host over the task's servers, one session for its turns; each judged turn is
    appended to ``turns`` as it ends (an error later keeps the turns before it)."""
    from weavehost.host import Host

    kwargs = {**kwargs, "servers": list(task.servers)}
    if make_model is not None and variant.peer is None:
        kwargs["agent_model"] = make_model(task, variant.strategy)
    async with Host(**kwargs) as host:
        if not described and variant.peer is None:  # the setup is weavehost's own model's
            described.update(host.description)
        functions = [
            {"name": spec.qualified_name, "parameters": spec.schema_dict()}
            for spec in host.catalog  # type: ignore[union-attr]
        ]
        session = host.session()
        for turn in task.turns:
            trace = await _observe(session.run(turn.user))
            turns.append(judge_turn(turn, trace, functions))
            # After the turn's clock stopped: its answer drafted again with foresight.
            await add_foresight(session, turns[-1])
            if trace.error is not None:
                break  # the conversation is not what the next turn expects


async def _observe(events: Any) -> TurnTrace:
    """Receive one turn's events, each stamped with the time since the turn was started."""
    timed: list[tuple[float, Event]] = []
    started = time.perf_counter()
    with anyio.move_on_after(TURN_BOUND_S) as bound:
        async for event in events:
            timed.append((time.perf_counter() - started, event))
    trace = trace_turn(timed)
    if bound.cancelled_caught:
        return trace.failed(f"no answer within {TURN_BOUND_S:g} s (the bench's hang guard)")
    return trace


def _task_numbers(task: AgentTask, turns: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """A task's numbers from its judged turns (see the module docstring)."""
    complete = len(turns) == len(task.turns)
    first_tool = next((t["first_tool_s"] for t in turns if t["first_tool_s"] is not None), None)
    answers = [t["answer_s"] for t in turns]
    return {
        "success": complete and all(t["success"] for t in turns),
        "first_tool_s": first_tool,
        "answer_s": round(sum(answers), 4) if complete and None not in answers else None,
        "tool_results": sum(t["tool_results"] for t in turns),
        "provisional_results": sum(t["provisional_results"] for t in turns),
        "turns": list(turns),
    }
