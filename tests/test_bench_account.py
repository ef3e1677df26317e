"""A call's time account: the parts a :class:`CallAttempt` times, the passes' split by a cost
table, and the summary and table ``weavehost bench`` shows (no model: the run's own lines are
checked in ``test_bench_runner.py``)."""

from __future__ import annotations

import time

import pytest

from weavehost.bench.account import ACCOUNT_KEYS, ACCOUNT_PARTS, account_record, logits_share
from weavehost.bench.report import account_means, format_account, summarize
from weavehost.decode.base import CallAccount, CallAttempt
from weavehost.decode.constraint import MaskClock
from weavehost.engine import EngineStats
from weavehost.engine.calibrate import CostTable

# One-row passes cost 10 ms, eight-row passes 30 ms with every row asking for logits; eight
# outputs add 7 ms over one (12 against 5 ms).
TABLE = CostTable(
    {1: 0.010, 8: 0.030}, 0.002, output_s={1: 0.005, 8: 0.012}, output_rows=8, source="known"
)


class _Engine:
    """What a :class:`CallAttempt` reads of an engine: its counters and sequence 0."""

    def __init__(self) -> None:
        self.stats = EngineStats()
        self.n_seq_max = 1

    def seq_len(self, seq: int) -> int:
        return 5

    def has_next_logits(self, seq: int) -> bool:
        return False

    def pass_rows_between(self, start: float, end: float) -> dict[int, int]:
        return {}


def _pass(engine: _Engine, seconds: float, rows: int = 1, outputs: int = 1) -> None:
    stats = engine.stats
    stats.passes += 1
    stats.decode_s += seconds
    stats.pass_shapes[(rows, outputs)] = stats.pass_shapes.get((rows, outputs), 0) + 1


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """``time.perf_counter`` as a clock the test moves (``clock[0] += seconds``)."""
    now = [100.0]
    monkeypatch.setattr(time, "perf_counter", lambda: now[0])
    return now


def test_a_call_s_time_is_its_passes_masks_selector_and_the_rest(clock):
    engine, masks = _Engine(), MaskClock()
    masks.seconds, masks.masks = 9.0, 40  # an earlier call's masks are not this call's
    engine.stats.decode_s = 7.0  # nor its passes
    attempt = CallAttempt.start("weave", engine, masks)  # type: ignore[arg-type]
    clock[0] += 1.0  # Python before the selector
    with attempt.selecting():
        clock[0] += 3.0  # the selector: 1.5 s of passes, 0.5 s of masks, 1 s of its own
        _pass(engine, 1.5)
        masks.seconds += 0.5
        masks.masks += 2
    clock[0] += 2.5  # a pass of 2 s after it, and half a second of Python
    _pass(engine, 2.0)
    result = attempt.finish(calls=[], text="", tokens=[])
    account = result.account
    assert account is not None
    assert account.total_s == pytest.approx(6.5)
    assert account.passes_s == pytest.approx(3.5)
    assert account.mask_s == pytest.approx(0.5)
    assert account.selector_s == pytest.approx(1.0)
    assert account.other_s == pytest.approx(1.5)
    assert (account.passes, account.masks) == (2, 2)
    assert account.total_s == pytest.approx(result.final_latency_s)


def test_a_call_without_masks_or_selector_has_only_passes_and_the_rest(clock):
    engine = _Engine()
    attempt = CallAttempt.start("serial", engine)  # type: ignore[arg-type]
    clock[0] += 0.25
    _pass(engine, 0.2)
    account = attempt.finish(calls=[], text="", tokens=[]).account
    assert account is not None
    assert (account.mask_s, account.selector_s, account.masks) == (0.0, 0.0, 0)
    assert account.passes_s == pytest.approx(0.2)
    assert account.other_s == pytest.approx(0.05)


def test_a_mask_is_timed_on_its_factory_s_clock(clock, monkeypatch: pytest.MonkeyPatch):
    from weavehost.decode.constraint import Constraint

    class _Matcher:
        def compute_bitmask(self) -> bytes:
            clock[0] += 0.003
            return bytes([0b101])

    masks = MaskClock()
    allowed = Constraint(_Matcher(), 3, masks).allowed()  # type: ignore[arg-type]
    assert allowed.tolist() == [True, False, True]
    assert masks.seconds == pytest.approx(0.003)
    assert masks.masks == 1


def test_the_logits_share_is_what_the_table_prices_the_outputs_beyond_the_first():
    # An 8-row pass of 8 outputs costs 30 ms, 7 of them its outputs beyond the first; three
    # one-row passes cost 10 ms each, none of it beyond the first output.
    shapes = {(8, 8): 1, (1, 1): 3}
    assert logits_share(shapes, TABLE) == pytest.approx(0.007 / 0.060)
    assert logits_share({(1, 1): 4, (8, 1): 2}, TABLE) == 0.0
    assert logits_share({}, TABLE) is None
    rows_only = CostTable({1: 0.010, 8: 0.030}, 0.002)  # a table without output costs
    assert logits_share(shapes, rows_only) is None


def _result(clock: list[float]):
    engine = _Engine()
    attempt = CallAttempt.start("weave", engine)  # type: ignore[arg-type]
    clock[0] += 0.1
    _pass(engine, 0.03, rows=8, outputs=8)
    for _ in range(3):
        _pass(engine, 0.01)
    return attempt.finish(calls=[], text="", tokens=[])


def test_a_line_s_account_splits_its_passes_into_rows_and_logits_by_the_table(clock):
    record = account_record(_result(clock), TABLE)
    assert record is not None
    assert set(record) == set(ACCOUNT_KEYS)
    assert record["passes_s"] == pytest.approx(0.060)
    assert record["logits_rows_s"] == pytest.approx(0.007)
    assert record["rows_s"] == pytest.approx(0.053)
    assert sum(record[key] for key in ACCOUNT_PARTS) == pytest.approx(record["total_s"])


def test_a_line_s_passes_are_split_as_the_table_prices_them_after_the_case_s_prompt(clock):
    # After 1,000 held tokens more than it was measured after, this machine's 8-row pass costs
    # 20 ms more and its one-row pass 2 ms: its outputs are a smaller share of the passes.
    held = CostTable(
        {1: 0.010, 8: 0.030}, 0.002, output_s={1: 0.005, 8: 0.012}, output_rows=8,
        held_s={1: 0.012, 8: 0.050}, held_tokens=1042, base_tokens=42,
    )  # fmt: skip
    record = account_record(_result(clock), held, held=1042)
    assert record is not None
    assert record["logits_rows_s"] == pytest.approx(0.060 * 0.007 / (0.050 + 3 * 0.012))
    at_base = account_record(_result(clock), held, held=42)
    assert at_base is not None and at_base["logits_rows_s"] == pytest.approx(0.007)


def test_without_a_table_the_passes_are_not_split(clock):
    record = account_record(_result(clock), None)
    assert record is not None
    assert record["rows_s"] is None and record["logits_rows_s"] is None
    assert record["passes_s"] == pytest.approx(0.060)


def _line(strategy: str, account: dict | None) -> dict:
    return {"id": "c", "strategy": strategy, "calls": [], "account": account}


def _account(total: float, passes_s: float, passes: int, logits: float | None) -> dict:
    return {
        "total_s": total,
        "passes_s": passes_s,
        "rows_s": None if logits is None else passes_s - logits,
        "logits_rows_s": logits,
        "mask_s": 0.001,
        "selector_s": 0.0,
        "other_s": total - passes_s - 0.001,
        "passes": passes,
        "masks": passes,
    }


def test_the_summary_means_each_part_per_call_and_per_pass():
    lines = [
        _line("weave", _account(0.2, 0.1, 10, 0.02)),
        _line("weave", _account(0.4, 0.3, 30, None)),
        _line("weave", None),  # a line without an account is left out
    ]
    means = account_means(lines)
    assert means is not None
    assert means["n"] == 2
    assert means["per_call_s"]["total_s"] == pytest.approx(0.3)
    assert means["per_call_s"]["logits_rows_s"] == pytest.approx(0.02)  # the line that has it
    assert means["per_pass_s"]["passes_s"] == pytest.approx(0.4 / 40)
    assert means["per_pass_s"]["logits_rows_s"] == pytest.approx(0.02 / 10)
    assert means["mean_passes"] == 20
    assert account_means([_line("peer", None)]) is None


def test_the_account_table_shows_each_strategy_with_an_account_per_call_and_per_pass():
    summary = summarize(
        [_line("weave", _account(0.2, 0.1, 10, 0.02)), _line("llama_cpp_python", None)]
    )
    assert summary["llama_cpp_python"]["account"] is None
    table = format_account(summary)
    lines = table.splitlines()
    assert lines[0].split()[:4] == ["strategy", "per", "n", "passes"]
    assert lines[2].split()[:5] == ["weave", "call", "1", "10.0", "200.0"]
    assert lines[3].split()[:2] == ["pass", "20.0"]
    assert "llama_cpp_python" not in table
    assert format_account(summarize([_line("llama_cpp_python", None)])) == ""


def test_a_reply_s_account_is_its_passes_and_its_calls_masks_and_selectors():
    stats = EngineStats(passes=5, decode_s=0.3, prefill_s=0.1)
    first = CallAccount(0.4, 0.2, 0.05, 0.01, 0.14, 3, 10)
    second = CallAccount(0.2, 0.1, 0.02, 0.0, 0.08, 1, 4)
    account = CallAccount.over(0.7, stats, [first, second])
    assert account.passes_s == pytest.approx(0.4)  # the reply's, decisions' passes included
    assert account.mask_s == pytest.approx(0.07)
    assert account.selector_s == pytest.approx(0.01)
    assert account.other_s == pytest.approx(0.22)
    assert (account.passes, account.masks) == (5, 14)
