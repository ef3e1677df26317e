"""Calibration, whole: measuring a machine, storing what it measured, and opening a model as it
was calibrated.

Stage: setup (before decoding). The one owner of calibration; nothing else reads or writes a
stored calibration or chooses the attention kernel:

- **Measuring** (:func:`calibrate`, what ``weavehost calibrate`` runs): flash attention timed
  on and off (on, the engine's default, is kept unless off is clearly faster), then the cost
  of a pass of each width with that kernel, interleaved and shape-checked
  (:mod:`weavehost.engine.calibrate`, the engine's measuring instruments), and the
  :class:`~weavehost.decode.padding.DecodePlan` made from that table.
- **Checking** (:func:`check_calibration`, ``weavehost calibrate --check``): the same
  measurement again with the stored kernel, stored nowhere, compared width by width with the
  stored table (:class:`~weavehost.engine.calibrate.Agreement`).
- **Storing** it per model file, thread count and KV cache type (the name says the type but
  for ``f16``: a quantized V cache is measured with flash attention, which it needs, and no
  probe) under
  :func:`weavehost.paths.cache_dir`
  (:func:`plan_path`, :func:`save_plan`) and reading it back (:func:`load_plan`,
  :func:`calibrated_flash_attn`). Without one a model gets :data:`~weavehost.decode.padding.NO_PLAN`
  and flash attention on (the engine's default).
- **Opening** a model as calibrated (:func:`open_calibrated`): the engine with the kernel its
  calibration was measured with, and its :class:`~weavehost.decode.state.DecodeState`, whose
  plan is the stored one. The host, the bench runner (and through it the stock peers, opened
  with the engine's kernel) and so a server's sampling request all open models here.

Invariant: a plan is used only with the kernel and the cache type it was measured with. An
engine's kernel and cache are fixed when it opens; a thermal back-off that changes its thread
count (:meth:`~weavehost.engine.Engine.set_threads`) reads that thread count's stored plan only
if it was measured with the same kernel and cache, and decodes with
:data:`~weavehost.decode.padding.NO_PLAN` otherwise (:func:`stored_plans`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from weavehost.decode.padding import NO_PLAN, DecodePlan
from weavehost.decode.state import DecodeState, PlanSource
from weavehost.engine import DEFAULT_N_CTX, DEFAULT_N_SEQ_MAX, Engine, default_threads
from weavehost.engine.calibrate import (
    AGREEMENT,
    CALIBRATION_N_CTX,
    Agreement,
    AttentionProbe,
    Calibration,
    CostTable,
    compare_tables,
    cpu_model,
    measure_pass_costs,
    probe_attention,
    table_from_record,
)
from weavehost.engine.native import (
    BUILD_FACTS,
    DEFAULT_KV_CACHE,
    KV_CACHE_TYPES,
    build_facts,
    needs_flash_attn,
)
from weavehost.errors import ConfigError
from weavehost.paths import cache_dir

__all__ = [
    "CALIBRATION_VERSION",
    "CalibrationCheck",
    "CalibrationRun",
    "OpenedModel",
    "calibrate",
    "calibrated_flash_attn",
    "check_calibration",
    "decode_state",
    "load_plan",
    "open_calibrated",
    "plan_path",
    "save_plan",
    "stored_plans",
]

logger = logging.getLogger(__name__)

# The stored calibration's format; an older file is refused with "run `weavehost calibrate`".
# 3: passes no longer call into Python at every graph node (engine.native.AbortFlag), which
# took ~6 ms off every pass whatever its width: tables measured before price them wrongly.
CALIBRATION_VERSION = 3


def plan_path(model: Path, threads: int, kv_cache: str = DEFAULT_KV_CACHE) -> Path:
    """Where the calibration of ``model`` at ``threads`` threads with a ``kv_cache`` cache is
    stored (an f16 cache's, the default before ``q8_0-k``, under the name it has always had)."""
    stat = model.stat()
    key = f"{model.stem}-{stat.st_size}-t{threads}"
    if kv_cache != "f16":
        key += f"-kv{kv_cache}"
    return cache_dir() / "calibration" / f"{key}.json"


def save_plan(
    model: Path,
    threads: int,
    calibration: Calibration,
    plan: DecodePlan,
    kv_cache: str = DEFAULT_KV_CACHE,
) -> Path:
    """Store ``calibration`` (a cost file plus how it was made and the padding) for ``model``
    at ``threads`` threads with a ``kv_cache`` cache."""
    path = plan_path(model, threads, kv_cache)
    path.parent.mkdir(parents=True, exist_ok=True)
    record: dict[str, Any] = {
        "calibration": CALIBRATION_VERSION,
        "model": model.name,
        **calibration.record(),
        "padding": {str(n): w for n, w in sorted(plan.widths.items())},
        **build_facts(),
    }
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(record, indent=2) + "\n")
    tmp.replace(path)
    return path


def _warn_other_caches(model: Path, threads: int, kv_cache: str) -> None:
    """Warn where ``model`` has no calibration at ``threads`` threads for ``kv_cache`` but has
    one for another cache type (an f16 calibration stored before ``q8_0-k`` became the
    default): it decodes without a plan, so nothing is drafted or padded."""
    others = [t for t in KV_CACHE_TYPES if t != kv_cache and plan_path(model, threads, t).exists()]
    if others:
        logger.warning(
            "%s is calibrated at %d threads for the %s KV cache, not the %s one it runs with: "
            "no plan, so answers are not drafted; run `weavehost calibrate --model %s "
            "--threads %d --kv-cache %s`, or run with --kv-cache %s",
            model.name, threads, " and ".join(others), kv_cache, model, threads, kv_cache,
            others[0],
        )  # fmt: skip


def _record_kernel(record: Any) -> bool:
    """The kernel a stored record was measured with: one stored before ``calibrate`` chose
    was measured with flash attention on."""
    return not isinstance(record, dict) or record.get("flash_attn") is not False


def calibrated_flash_attn(model: Path, threads: int, kv_cache: str = DEFAULT_KV_CACHE) -> bool:
    """Whether to open ``model`` at ``threads`` threads with flash attention: as the stored
    calibration of its ``kv_cache`` cache was measured (``weavehost calibrate`` times both and
    keeps the faster; its table holds for that setting only), on without one (the engine's
    default) and with a cache that needs it (a quantized V cache). An unreadable calibration is
    :func:`load_plan`'s to report: on here."""
    if needs_flash_attn(kv_cache):
        return True
    try:
        record = json.loads(plan_path(model, threads, kv_cache).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return True
    return _record_kernel(record)


def load_plan(
    model: Path, threads: int, *, flash_attn: bool | None = None, kv_cache: str = DEFAULT_KV_CACHE
) -> DecodePlan:
    """The plan stored for ``model`` at ``threads`` threads with a ``kv_cache`` cache, or
    :data:`NO_PLAN` if none was made, or (``flash_attn`` given) if it was measured with the
    other kernel.

    A stored file that is damaged, or written by an older weavehost, is a :class:`ConfigError`
    that says to run ``weavehost calibrate``.
    """
    path = plan_path(model, threads, kv_cache)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        _warn_other_caches(model, threads, kv_cache)
        return NO_PLAN
    except OSError as exc:
        raise ConfigError(
            f"{path}: the stored calibration is unreadable ({exc}); run `weavehost calibrate`"
        ) from exc
    try:
        record = json.loads(text)
        if not isinstance(record, dict) or record.get("calibration") != CALIBRATION_VERSION:
            raise ConfigError(f"not a version {CALIBRATION_VERSION} calibration")
        table = table_from_record(record, source=str(path))
    except (ValueError, ConfigError) as exc:
        raise ConfigError(
            f"{path}: the stored calibration is unreadable ({exc}); run `weavehost calibrate`"
        ) from exc
    if flash_attn is not None and _record_kernel(record) != flash_attn:
        logger.info(
            "%s was measured with flash attention %s, the model runs with it %s: no plan",
            path,
            "on" if _record_kernel(record) else "off",
            "on" if flash_attn else "off",
        )
        return NO_PLAN
    _warn_other_build(path, record)
    return DecodePlan.from_table(table, source=f"calibrated ({path})")


def _warn_other_build(path: Path, record: dict[str, Any]) -> None:
    """Warn where a stored table was measured by a build that runs wide passes otherwise
    (llama-cpp-python rebuilt since, with or without its AMX kernels or llamafile's sgemm): the
    plan still holds, its wide passes priced off by a fifth or more. What a record stored before
    it said is not judged."""
    now = build_facts()
    other = [
        f"{'with' if measured else 'without'} {BUILD_FACTS[fact]}"
        for fact, measured in record.items()
        if fact in now and isinstance(measured, bool) and measured != now[fact]
    ]
    if other:
        logger.warning(
            "%s was measured by a llama-cpp-python built otherwise (%s): wide passes are priced "
            "off; run `weavehost calibrate` again",
            path, ", ".join(other),
        )  # fmt: skip


def stored_plans(model: Path, flash_attn: bool, kv_cache: str = DEFAULT_KV_CACHE) -> PlanSource:
    """The plan for each thread count of ``model`` opened with the ``flash_attn`` kernel and a
    ``kv_cache`` cache: the stored one when it was measured so, :data:`NO_PLAN` otherwise."""
    return lambda threads: load_plan(model, threads, flash_attn=flash_attn, kv_cache=kv_cache)


def decode_state(engine: Engine) -> DecodeState:
    """A new decode state for ``engine``'s model, its plans the stored calibration's for the
    kernel the engine was opened with."""
    plans = stored_plans(engine.path, engine.flash_attn, engine.identity.kv_cache)
    return DecodeState(engine.identity, plans=plans)


@dataclass(frozen=True, slots=True)
class OpenedModel:
    """An engine opened as calibrated, and the decode state that goes with it."""

    engine: Engine
    state: DecodeState


@contextlib.contextmanager
def open_calibrated(
    model: Path,
    *,
    n_threads: int,
    n_ctx: int = DEFAULT_N_CTX,
    n_seq_max: int = DEFAULT_N_SEQ_MAX,
    plan: DecodePlan | None = None,
    kv_cache: str = DEFAULT_KV_CACHE,
) -> Iterator[OpenedModel]:
    """Open ``model`` with a ``kv_cache`` cache and the kernel its calibration at the thread
    count was measured with (flash attention on without one), with its decode state; both end
    with the block. The plan at the opening thread count is read now, so a damaged calibration
    fails here. ``plan``: the state decodes by this plan at every thread count instead of the
    stored one (another machine's costs: ``weavehost bench-agent --cost-model``'s projection)."""
    flash_attn = calibrated_flash_attn(model, n_threads, kv_cache)
    with Engine.open(
        model,
        n_ctx=n_ctx,
        n_threads=n_threads,
        n_seq_max=n_seq_max,
        flash_attn=flash_attn,
        kv_cache=kv_cache,
    ) as engine:
        if plan is None:
            state = decode_state(engine)
        else:
            state = DecodeState(engine.identity, plans=lambda _threads: plan)
        state.plan(engine)
        yield OpenedModel(engine, state)


@dataclass(frozen=True, slots=True)
class CalibrationRun:
    """What :func:`calibrate` measured and stored: the attention probe, the calibration (its
    table), the plan made from it, the machine it describes and the file it went to."""

    probe: AttentionProbe | None  # None: the cache type fixed the kernel (flash attention on)
    calibration: Calibration
    plan: DecodePlan
    machine: str
    path: Path


def calibrate(
    model: Path,
    *,
    threads: int | None,
    rows: Sequence[int],
    repeats: int,
    cpu_flags: Sequence[str] = (),
    kv_cache: str = DEFAULT_KV_CACHE,
) -> CalibrationRun:
    """Measure ``model`` on this machine and store its calibration: flash attention off only
    where it runs a turn clearly faster than on (:class:`AttentionProbe`, with that
    ``kv_cache``; on, unprobed, where the cache needs it), then the cost of a pass of each of
    ``rows`` rows (medians of ``repeats`` interleaved rounds, shape-checked) with that kernel
    and cache, and the plan made from it."""
    probe = _probe(model, threads, kv_cache)
    flash_attn = probe.flash_attn if probe is not None else True
    calibration, machine = _measure(
        model, threads, flash_attn, rows, repeats, cpu_flags, kv_cache=kv_cache
    )
    calibration = dataclasses.replace(calibration, attention=probe)
    plan = DecodePlan.from_table(calibration.table, source="calibrated")
    path = save_plan(model, calibration.threads, calibration, plan, kv_cache)
    return CalibrationRun(probe, calibration, plan, machine, path)


def _probe(model: Path, threads: int | None, kv_cache: str) -> AttentionProbe | None:
    """Flash attention timed on and off with a ``kv_cache`` cache, or ``None`` where that
    cache needs it on."""
    if needs_flash_attn(kv_cache):
        return None
    return probe_attention(model, n_threads=threads, kv_cache=kv_cache)


def _measure(
    model: Path,
    threads: int | None,
    flash_attn: bool,
    rows: Sequence[int],
    repeats: int,
    cpu_flags: Sequence[str],
    *,
    kv_cache: str = DEFAULT_KV_CACHE,
) -> tuple[Calibration, str]:
    """The table of ``model`` measured with the ``flash_attn`` kernel and a ``kv_cache``
    cache, and the machine."""
    with Engine.open(
        model,
        n_ctx=CALIBRATION_N_CTX,
        n_seq_max=DEFAULT_N_SEQ_MAX,
        n_threads=threads,
        flash_attn=flash_attn,
        kv_cache=kv_cache,
    ) as engine:
        machine = f"{cpu_model()}, {engine.n_threads} threads ({', '.join(cpu_flags) or 'no AVX2'})"
        if kv_cache != "f16":
            machine += f", {kv_cache} KV cache"
        calibration = measure_pass_costs(engine, rows=rows, repeats=repeats, machine=machine)
    for fault in calibration.shape_faults:
        logger.warning("%s: the table's shape check failed: %s", model.name, fault)
    return calibration, machine


@dataclass(frozen=True, slots=True)
class CalibrationCheck:
    """A calibration measured again beside the stored one (:func:`check_calibration`).

    ``stored``: the stored table; ``stored_flash_attn``: its kernel, which the new table
    (``calibration``) was measured with too, so that the two compare; ``probe``: the attention
    probe run again, whose choice should be the stored kernel; ``agreement``: the tables'
    differences width by width."""

    path: Path
    stored: CostTable
    stored_flash_attn: bool
    probe: AttentionProbe | None  # None: the cache type fixed the kernel (flash attention on)
    calibration: Calibration
    agreement: Agreement

    @property
    def kernel_agrees(self) -> bool:
        return self.probe is None or self.probe.flash_attn == self.stored_flash_attn

    def passed(self, bound: float = AGREEMENT) -> bool:
        """The same kernel chosen, and every count within ``bound`` (relative to one row)."""
        return self.kernel_agrees and self.agreement.agrees(bound)


def check_calibration(
    model: Path,
    *,
    threads: int | None,
    rows: Sequence[int],
    repeats: int,
    cpu_flags: Sequence[str] = (),
    kv_cache: str = DEFAULT_KV_CACHE,
) -> CalibrationCheck:
    """Measure ``model`` again as :func:`calibrate` would, with the stored calibration's
    kernel, store nothing, and compare. No stored calibration (or an unreadable one) is a
    :class:`ConfigError` that says to run ``weavehost calibrate``."""
    path = plan_path(model, threads or default_threads(), kv_cache)
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
        stored = table_from_record(record, source=str(path))
    except FileNotFoundError:
        raise ConfigError(f"{path}: nothing to check; run `weavehost calibrate` first") from None
    except (OSError, ValueError, ConfigError) as exc:
        raise ConfigError(
            f"{path}: the stored calibration is unreadable ({exc}); run `weavehost calibrate`"
        ) from exc
    flash_attn = _record_kernel(record)
    probe = _probe(model, threads, kv_cache)
    calibration, _ = _measure(
        model, threads, flash_attn, rows, repeats, cpu_flags, kv_cache=kv_cache
    )
    calibration = dataclasses.replace(calibration, attention=probe)
    agreement = compare_tables(stored, calibration.table)
    return CalibrationCheck(path, stored, flash_attn, probe, calibration, agreement)
