"""Cost tables and the decode plans made from them (``engine/calibrate.py``, ``decode/padding.py``).

The tables in ``tests/data/costs/`` are the ones measured on other machines (two x86 VMs, and the
SchemaWeaver paper's two phones, which publish widths 1 and 4 only). Everything here but the last
test needs no model.
"""

from __future__ import annotations

import functools
import json
import logging
import re
from pathlib import Path
from types import SimpleNamespace

import pytest

import weavehost.decode.calibration as calibration_module
import weavehost.engine.native as native
from weavehost.decode.calibration import (
    calibrated_flash_attn,
    check_calibration,
    load_plan,
    open_calibrated,
    plan_path,
    save_plan,
    stored_plans,
)
from weavehost.decode.padding import DRAFT_MARGIN, MAX_DRAFT_ROWS, NO_PLAN, DecodePlan
from weavehost.decode.state import DecodeState
from weavehost.engine import Engine
from weavehost.engine import calibrate as calibrate_module
from weavehost.engine.calibrate import (
    ATTENTION_MARGIN,
    DEFAULT_OUTPUTS,
    DEFAULT_ROWS,
    EXACT_ATTENTION_MARGIN,
    HELD_ROWS,
    HELD_TOKENS,
    SHAPE_RETRIES,
    AttentionProbe,
    Calibration,
    CostTable,
    compare_tables,
    format_held,
    load_cost_table,
    measure_pass_costs,
    probe_attention,
    shape_faults,
    table_record,
)
from weavehost.engine.native import llamafile_in_build
from weavehost.errors import ConfigError

COSTS = Path(__file__).parent / "data" / "costs"
AVX2 = COSTS / "avx2-qwen2.5-coder-0.5b-q4_0-t2.json"
AVX512 = COSTS / "avx512-qwen2.5-coder-0.5b-q4_0-t2.json"
ONEPLUS = COSTS / "phone-oneplus12r-qwen3-1.7b-q8_0.json"
PIXEL = COSTS / "phone-pixel7-qwen3-1.7b-q8_0.json"

# A machine where a wide pass (and a prefilled token) costs as much per row as a serial one.
LINEAR = CostTable({1: 0.010, 2: 0.020, 4: 0.040, 8: 0.080}, 0.010, machine="linear")


def _plan(path: Path) -> DecodePlan:
    return DecodePlan.from_table(load_cost_table(path))


# -- loading ------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", sorted(COSTS.glob("*.json")), ids=lambda p: p.stem)
def test_every_shared_cost_table_loads_in_seconds_with_its_machine_and_source(path):
    record = json.loads(path.read_text())
    table = load_cost_table(path)
    assert table.machine == record["machine"]
    assert table.source == str(path)
    assert {str(rows) for rows in table.pass_s} == set(record["pass_ms"])
    assert table.pass_s[1] == pytest.approx(record["pass_ms"]["1"] / 1e3)
    assert table.prefill_token_s == pytest.approx(record["prefill_ms_per_token"] / 1e3)


BAD_FILES = {
    "not json": ("{", "not JSON"),
    "a list": ("[1, 2]", "JSON object"),
    "no pass_ms": ('{"prefill_ms_per_token": 1}', "pass_ms"),
    "pass_ms a list": ('{"pass_ms": [1], "prefill_ms_per_token": 1}', "pass_ms"),
    "no width 1": ('{"pass_ms": {"4": 10}, "prefill_ms_per_token": 1}', "one-row pass"),
    "negative cost": ('{"pass_ms": {"1": -3}, "prefill_ms_per_token": 1}', "positive"),
    "zero cost": ('{"pass_ms": {"1": 0}, "prefill_ms_per_token": 1}', "positive"),
    "string cost": ('{"pass_ms": {"1": "fast"}, "prefill_ms_per_token": 1}', "number"),
    "boolean cost": ('{"pass_ms": {"1": true}, "prefill_ms_per_token": 1}', "number"),
    "infinite cost": ('{"pass_ms": {"1": 1e999}, "prefill_ms_per_token": 1}', "finite"),
    "width not a number": ('{"pass_ms": {"1": 3, "x": 4}, "prefill_ms_per_token": 1}', "'x'"),
    "width zero": ('{"pass_ms": {"1": 3, "0": 4}, "prefill_ms_per_token": 1}', "rows"),
    "no prefill cost": ('{"pass_ms": {"1": 3}}', "prefill_ms_per_token"),
    "negative prefill cost": ('{"pass_ms": {"1": 3}, "prefill_ms_per_token": -1}', "positive"),
    "machine not a string": (
        '{"pass_ms": {"1": 3}, "prefill_ms_per_token": 1, "machine": 7}',
        "machine",
    ),
    "output costs a list": (
        '{"pass_ms": {"1": 3}, "prefill_ms_per_token": 1, "output_ms": [1]}',
        "output_ms",
    ),
    "output count not a number": (
        '{"pass_ms": {"1": 3}, "prefill_ms_per_token": 1, "output_rows": 8,'
        ' "output_ms": {"1": 9, "x": 10}}',
        "'x'",
    ),
    "output costs without one output": (
        '{"pass_ms": {"1": 3}, "prefill_ms_per_token": 1, "output_rows": 8, "output_ms": {"4": 9}}',
        "one output",
    ),
    "more outputs than rows": (
        '{"pass_ms": {"1": 3}, "prefill_ms_per_token": 1, "output_rows": 8,'
        ' "output_ms": {"1": 9, "16": 10}}',
        "no more outputs than",
    ),
    "output rows not a count": (
        '{"pass_ms": {"1": 3}, "prefill_ms_per_token": 1, "output_rows": "wide"}',
        "output_rows",
    ),
}


@pytest.mark.parametrize(("text", "message"), BAD_FILES.values(), ids=BAD_FILES.keys())
def test_a_malformed_cost_table_is_a_one_line_config_error_naming_the_file(tmp_path, text, message):
    path = tmp_path / "costs.json"
    path.write_text(text)
    with pytest.raises(ConfigError, match=message) as raised:
        load_cost_table(path)
    assert str(raised.value).startswith(f"{path}: ")
    assert "\n" not in str(raised.value)


def test_a_missing_or_unreadable_cost_table_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="no such cost table"):
        load_cost_table(tmp_path / "absent.json")
    with pytest.raises(ConfigError, match="cannot be read"):
        load_cost_table(tmp_path)  # a directory
    binary = tmp_path / "binary.json"
    binary.write_bytes(b"\xff\xfe{")
    with pytest.raises(ConfigError, match="cannot be read"):
        load_cost_table(binary)


# -- the fill rule ------------------------------------------------------------------------------


def test_measured_widths_cost_what_was_measured_and_gaps_are_linear_between_neighbours():
    table = load_cost_table(ONEPLUS)  # 1: 54.2 ms, 4: 65.9 ms
    assert table.pass_cost(1) == pytest.approx(0.0542)
    assert table.pass_cost(4) == pytest.approx(0.0659)
    assert table.pass_cost(2) == pytest.approx(0.0542 + (0.0659 - 0.0542) / 3)
    assert table.pass_cost(3) == pytest.approx(0.0542 + 2 * (0.0659 - 0.0542) / 3)
    # A table that does not show rows taken four at a time (5 no dearer than 4 and a quarter
    # of what 8 adds): the line, for any count between measured ones.
    flat = CostTable({1: 0.010, 4: 0.020, 5: 0.0224, 8: 0.030, 12: 0.040}, 0.002)
    assert flat.pass_cost(7) == pytest.approx(0.0224 + 2 * (0.030 - 0.0224) / 3)
    assert flat.pass_cost(10) == pytest.approx(0.035)


def test_rows_past_whole_tiles_cost_what_an_extra_row_was_measured_to_add():
    avx512 = load_cost_table(AVX512)  # 4: 27.2, 5: 39.8, 6: 47.5, 8: 36.6; no width 7
    # 7 rows are one tile and three rows past it, each what 5 added to 4: not the line
    # between 6 and 8, which would make them cheaper than 6.
    assert avx512.pass_cost(7) == pytest.approx(0.0272 + 3 * (0.0398 - 0.0272))
    table = CostTable({1: 0.014, 4: 0.035, 5: 0.050, 8: 0.056, 16: 0.0835, 20: 0.1056}, 0.003)
    # Between 16 and 20 the line says 18 rows cost less than 20; they cost 16 and two rows.
    assert table.pass_cost(18) == pytest.approx(0.0835 + 2 * (0.050 - 0.035))
    assert table.pass_cost(18) > table.pass_cost(20)
    # A whole number of tiles keeps the line: 12 between 8 and 16.
    assert table.pass_cost(12) == pytest.approx((0.056 + 0.0835) / 2)
    # So the plan pads such a pass to the measured width above it.
    assert DecodePlan.from_table(table).shape_for(18, 1)[0] == 20


def test_beyond_the_widest_measured_width_each_row_costs_one_prefilled_token():
    table = load_cost_table(ONEPLUS)  # prefill 9.8 ms per token
    assert table.pass_cost(5) == pytest.approx(0.0659 + 0.0098)
    assert table.pass_cost(8) == pytest.approx(0.0659 + 4 * 0.0098)
    assert table.pass_cost(100) == pytest.approx(0.0659 + 96 * 0.0098)


# Measured on the AVX-512 development machine (Qwen2.5-Coder-0.5B Q4_0, 2 threads): passes by
# rows with every row asking for logits, and passes of 32 rows by how many rows ask.
OUTPUTS = CostTable(
    {1: 0.0107, 4: 0.0261, 5: 0.0384, 8: 0.0356, 15: 0.0736, 16: 0.0481, 32: 0.0936},
    0.0015,
    output_s={1: 0.055, 4: 0.0675, 5: 0.0771, 8: 0.0679, 15: 0.0852, 16: 0.0693, 32: 0.0909},
    output_rows=32,
)


def test_a_pass_whose_rows_do_not_all_ask_for_logits_costs_less_by_what_outputs_cost():
    assert OUTPUTS.cost(16, 16) == pytest.approx(OUTPUTS.pass_cost(16))
    assert OUTPUTS.cost(16, 1) == pytest.approx(0.0481 - (0.0693 - 0.055))
    assert OUTPUTS.cost(16, 5) == pytest.approx(0.0481 - (0.0693 - 0.0771))
    assert OUTPUTS.cost(4, 1) < OUTPUTS.cost(4, 4) == pytest.approx(0.0261)
    # Between measured output counts linear: 6 outputs a third of the way from 5 to 8.
    assert OUTPUTS.output_extra(6) == pytest.approx(0.0771 + (0.0679 - 0.0771) / 3 - 0.055)


def test_a_table_without_output_costs_prices_every_row_as_asking_for_logits():
    table = load_cost_table(AVX512)
    assert not table.has_outputs
    assert all(table.cost(8, n) == table.pass_cost(8) for n in (0, 1, 5, 8))


def test_a_pass_computes_the_cheapest_measured_number_of_outputs_at_or_above_its_own():
    plan = DecodePlan.from_table(OUTPUTS)
    assert plan.shape_for(32, 5) == (32, 8)  # 5 outputs cost more than 8
    assert plan.shape_for(32, 4) == (32, 4)
    assert plan.shape_for(15, 1) == (16, 1)  # 15 rows cost more than 16
    assert plan.shape_for(16, 16) == (16, 16)
    assert plan.shape_for(16, 0) == (16, 0)  # a prefill asks for nothing
    assert plan.without_padding().shape_for(32, 5) == (32, 5)
    # Without output costs only the width changes.
    assert _plan(AVX512).shape_for(5, 5) == (8, 5)


def test_output_costs_are_stored_and_read_back_with_the_table(tmp_path):
    path = tmp_path / "costs.json"
    path.write_text(json.dumps(table_record(OUTPUTS)))
    again = load_cost_table(path)
    assert again.output_s == pytest.approx(OUTPUTS.output_s)
    assert again.output_rows == 32
    assert again.cost(16, 5) == pytest.approx(OUTPUTS.cost(16, 5))


# Measured after 50 held tokens, and again after 1,050: every row reads 1,000 tokens more, and
# a wide pass's rows read them slower than a one-row pass does (as on the Xeon, session 58).
HELD = CostTable(
    {1: 0.010, 2: 0.012, 4: 0.016, 8: 0.024, 16: 0.040, 32: 0.072},
    0.002,
    held_s={1: 0.011, 2: 0.014, 4: 0.020, 8: 0.032, 16: 0.056, 32: 0.104},
    held_tokens=1050,
    base_tokens=50,
)


def test_a_pass_after_more_held_tokens_costs_what_each_held_token_added_to_its_rows():
    ms = 1e-3
    # At 1,050 held tokens: what was measured there.
    assert HELD.at_held(1050).pass_s == pytest.approx(dict(HELD.held_s))
    # Half as many more tokens, half as much more; between measured rows, the line.
    assert HELD.held_extra(4, 550) == pytest.approx(2 * ms)
    assert HELD.held_extra(3, 1050) == pytest.approx(3 * ms)
    assert HELD.at_held(2050).pass_cost(6) == pytest.approx(HELD.pass_cost(6) + 12 * ms)
    # Beyond the widest held pass, in proportion to the rows: each reads every held token; so
    # does the prefilled token that prices each row beyond the widest measured pass.
    assert HELD.held_extra(64, 1050) == pytest.approx(64 * ms)
    assert HELD.at_held(1050).prefill_token_s == pytest.approx(HELD.prefill_token_s + ms)
    assert HELD.at_held(1050).pass_cost(40) == pytest.approx(0.104 + 8 * 0.003)
    # No more tokens than the table's own: the table itself.
    assert HELD.held_extra(4, 50) == 0.0 and HELD.at_held(40) is HELD
    assert not HELD.at_held(1050).knows_held  # a table for one length


def test_a_held_pass_measured_cheaper_than_the_table_s_adds_nothing_and_no_held_costs_add_nothing():
    noisy = CostTable(
        {1: 0.010, 2: 0.012}, 0.002, held_s={1: 0.009, 2: 0.013}, held_tokens=1050, base_tokens=50
    )
    assert noisy.held_extra(1, 2050) == 0.0
    assert noisy.held_extra(2, 2050) == pytest.approx(0.002)
    assert LINEAR.at_held(4000) is LINEAR and LINEAR.held_extra(8, 4000) == 0.0
    assert format_held(LINEAR) == ""
    assert format_held(noisy) == "a pass by rows after 1050 held tokens (ms): 1 9.0, 2 13.0"


def test_held_costs_are_stored_and_read_back_with_the_table_and_a_bad_one_is_a_config_error(
    tmp_path,
):
    path = tmp_path / "costs.json"
    record = table_record(HELD)
    path.write_text(json.dumps(record))
    again = load_cost_table(path)
    assert (again.held_tokens, again.base_tokens) == (1050, 50)
    assert again.at_held(2000).pass_s == pytest.approx(dict(HELD.at_held(2000).pass_s))
    for bad, message in [
        ({"held_pass_ms": [1]}, '"held_pass_ms" must be an object'),
        ({"held_tokens": 20}, "more held tokens (20) than the table's own (50)"),
        ({"held_pass_ms": {"2": 14.0}}, "costs after held tokens need a one-row pass"),
        ({"base_tokens": -1}, '"base_tokens" must be a whole number of tokens'),
    ]:
        path.write_text(json.dumps({**record, **bad}))
        with pytest.raises(ConfigError, match=re.escape(message)):
            load_cost_table(path)


def test_a_plan_for_a_long_conversation_drafts_fewer_rows_where_its_rows_read_more_tokens():
    short, long = DecodePlan.from_table(HELD), DecodePlan.from_table(HELD.at_held(3050))
    rows = [(short.draft_rows(1, p), long.draft_rows(1, p)) for p in (0.5, 0.6, 0.7, 0.8, 0.9)]
    assert all(at_long <= at_short for at_short, at_long in rows)
    assert any(at_long < at_short for at_short, at_long in rows)
    assert long.pass_cost(4, 4) > short.pass_cost(4, 4)


def test_recost_sums_a_histogram_of_passes_by_rows():
    assert LINEAR.recost({1: 3, 4: 2, 3: 0}) == pytest.approx(3 * 0.010 + 2 * 0.040)
    assert LINEAR.recost({}) == 0.0
    with pytest.raises(ValueError):
        LINEAR.pass_cost(0)


# -- the plan's decisions -----------------------------------------------------------------------


def test_padding_goes_to_the_cheapest_measured_width_at_or_above():
    plan = _plan(AVX512)  # 3 costs 29.1 but 4 costs 27.2; 5..7 cost more than 8
    assert [plan.width_for(n) for n in range(1, 10)] == [1, 2, 4, 4, 8, 8, 8, 8, 9]
    assert all(_plan(path).width_for(n) == n for path in (AVX2, ONEPLUS) for n in range(1, 9))


def test_values_side_by_side_never_pay_where_a_wide_pass_costs_as_much_per_row():
    plan = DecodePlan.from_table(LINEAR)
    assert not any(plan.parallel_pays(n) for n in range(1, 20))
    # Even with a cheap write-back, as long as the value passes are measured ones.
    cheap_prefill = CostTable(LINEAR.pass_s, 0.001)
    assert not any(DecodePlan.from_table(cheap_prefill).parallel_pays(n) for n in range(1, 9))


def test_values_side_by_side_pay_where_four_rows_cost_1_2_times_one_and_a_write_back_is_cheap():
    plan = DecodePlan.from_table(CostTable({1: 0.010, 4: 0.012}, 0.0005))
    assert all(plan.parallel_pays(n) for n in (3, 4, 8))
    assert not plan.parallel_pays(1)


@pytest.mark.parametrize(("path", "fewest"), [(ONEPLUS, 5), (PIXEL, 4)], ids=["oneplus", "pixel"])
def test_on_a_phone_values_side_by_side_pay_only_beside_drafted_values_when_there_are_many(
    path, fewest
):
    # A 4-row pass costs 1.1-1.2x one row, so a value drafted on sequence 0 at the default
    # acceptance costs ~0.65 of a pass a token, and the write-back prefills at ~10 ms a row.
    plan = _plan(path)
    assert [plan.parallel_pays(n) for n in range(2, 9)] == [n >= fewest for n in range(2, 9)]


def test_on_the_x86_tables_values_side_by_side_pay_only_where_padding_to_8_is_cheap():
    avx2, avx512 = _plan(AVX2), _plan(AVX512)
    assert not any(avx2.parallel_pays(n) for n in range(2, 9))  # 2 rows cost 1.8 x 1 row
    assert [avx512.parallel_pays(n) for n in range(2, 9)] == [False] * 4 + [True] * 3


def test_drafts_are_few_on_avx2_with_a_low_acceptance_and_more_on_a_phone():
    avx2, phone = _plan(AVX2), _plan(ONEPLUS)
    assert avx2.draft_rows(1, accept_p=0.3) == avx2.draft_rows(1) == 0
    assert phone.draft_rows(1, accept_p=0.3) >= 1
    assert phone.draft_rows(1) == 2
    assert phone.draft_rows(1, accept_p=0.9) > phone.draft_rows(1)


def test_drafts_fill_rows_that_padding_would_waste():
    plan = _plan(AVX512)  # 5 rows are padded to 8 anyway; a 5th row would cost 8 rows
    assert plan.draft_rows(5, accept_p=0.5) == 3
    assert plan.draft_rows(4, accept_p=0.5) == 0


def test_draft_rows_maximise_expected_tokens_per_second_up_to_the_cap():
    free = CostTable({1: 0.010, 64: 0.010}, 1e-9)  # any pass up to 64 rows costs one row's
    plan = DecodePlan.from_table(free)
    assert plan.draft_rows(1, accept_p=1.0) == MAX_DRAFT_ROWS
    assert plan.draft_rows(1, accept_p=0.0) == 0
    # The answer is the shortest draft within DRAFT_MARGIN of the best by the geometric model.
    for p in (0.2, 0.5, 0.8):
        rates = [
            (1 + sum(p**i for i in range(1, d + 1))) / free.pass_cost(plan.width_for(1 + d))
            for d in range(MAX_DRAFT_ROWS + 1)
        ]
        best = max(rates)
        assert plan.draft_rows(1, accept_p=p) == min(
            d for d, rate in enumerate(rates) if rate >= best * (1 - DRAFT_MARGIN)
        )


def test_each_guessed_token_is_sized_by_its_own_rate_sure_guesses_fill_a_pass_unsure_do_not():
    plan = _plan(AVX512)  # 2 rows cost 2x one; 4 rows 2.6x
    assert plan.draft_length(1, [0.96]) == 0  # one sure guess alone: a 2-row pass, no gain
    # The grammar's ' ' then a number from the request: a 4-row pass that pays.
    assert plan.draft_length(1, [0.96, 0.89, 0.89]) == 3
    assert plan.draft_length(1, [0.96, 0.3, 0.3]) == 0  # unsure after the first: not sent
    assert plan.draft_length(1, [0.5] * MAX_DRAFT_ROWS) == plan.draft_rows(1, accept_p=0.5)
    assert plan.draft_length(1, []) == 0
    with pytest.raises(ValueError, match="probabilities"):
        plan.draft_length(1, [1.5])


def test_a_pass_that_holds_a_forced_run_carries_guesses_that_alone_would_not_pay():
    plan = _plan(AVX512)  # 16 rows 50.2 ms, 17 rows 51.9 ms, one row 10.5 ms
    assert plan.draft_length(1, [0.96]) == 0  # alone, a sure guess doubles the pass
    assert plan.draft_length(16, [0.96]) == 1  # after 15 forced rows it adds 1.7 ms
    assert plan.draft_length(16, [0.96, 0.89, 0.89]) == 3
    assert plan.draft_length(16, [0.96, 0.05, 0.05]) == 1  # an unlikely guess still is not


def test_a_text_drafted_with_foresight_sends_each_kept_run_where_rows_are_cheap_not_where_dear():
    # kept[i]: how many of the tokens after token i a draft read with it would have had kept.
    kept = [3, 2, 1, 0, 0, 5, 4, 3, 2, 1, 0]
    cheap = DecodePlan.from_table(CostTable({1: 0.010, 8: 0.011, 32: 0.014}, 0.0005))
    drafted = cheap.foreseen(kept)
    assert drafted is not None
    assert (drafted.tokens, drafted.fewest_passes) == (11, 3)  # tokens 0-3, 4, 5-10
    assert drafted.passes == 3 and drafted.seconds < drafted.one_row_seconds == 11 * 0.010
    # Where every row costs a pass, drafting saves nothing: the cheapest schedule costs what
    # one row a token does, however few passes drafting every kept token would take.
    dear = DecodePlan.from_table(LINEAR).foreseen(kept)
    assert dear is not None and dear.fewest_passes == 3
    assert dear.seconds == pytest.approx(dear.one_row_seconds)
    assert DecodePlan.from_table(LINEAR).foreseen([0, 0]).passes == 2  # type: ignore[union-attr]
    assert NO_PLAN.foreseen(kept) is None  # nothing prices a pass


def test_the_neutral_plan_sends_guesses_while_all_of_them_are_likely_enough():
    assert NO_PLAN.draft_length(1, [0.96, 0.89, 0.3]) == 2  # 0.96 * 0.89 >= 0.5; * 0.3 is not
    assert NO_PLAN.draft_length(1, [0.96] * 10) == 4  # at most NEUTRAL_DRAFT_ROWS


def test_the_neutral_plan_pads_nothing_decodes_side_by_side_and_drafts_a_little():
    assert NO_PLAN.source == "none"
    assert [NO_PLAN.width_for(n) for n in range(1, 9)] == list(range(1, 9))
    assert not NO_PLAN.parallel_pays(2) and not NO_PLAN.parallel_pays(1)
    assert DecodePlan({}).parallel_pays(2)  # a neutral plan asked for explicitly
    assert [NO_PLAN.draft_rows(1, accept_p=p) for p in (0.3, 0.5, 0.75, 0.95)] == [0, 1, 2, 4]


def test_a_plan_says_where_it_came_from():
    assert _plan(AVX2).source == f"cost model {AVX2}"
    assert DecodePlan.from_table(LINEAR, source="calibrated (x)").source == "calibrated (x)"


# -- the stored calibration ---------------------------------------------------------------------


def _fake_engine(tmp_path: Path) -> SimpleNamespace:
    model = tmp_path / f"{tmp_path.name}.gguf"  # stored plans live in a shared cache dir
    model.write_bytes(b"GGUF")
    return SimpleNamespace(path=model, n_threads=2)


def test_a_stored_calibration_is_a_cost_file_and_comes_back_as_the_same_plan(tmp_path):
    engine = _fake_engine(tmp_path)
    assert load_plan(engine.path, 2) is NO_PLAN
    table = load_cost_table(AVX512)
    calibration = Calibration(table, {64: 0.002, 128: 0.0017}, repeats=3, threads=2)
    path = save_plan(engine.path, 2, calibration, DecodePlan.from_table(table))
    assert path == plan_path(engine.path, 2)
    assert load_cost_table(path).pass_s == table.pass_s  # bench --cost-model reads it as is
    state = DecodeState(plans=stored_plans(engine.path, flash_attn=True))
    plan = state.plan(engine)
    assert state.plan(engine) is plan  # a model's state reads it once per thread count
    assert plan.source == f"calibrated ({path})"
    assert [plan.width_for(n) for n in range(1, 9)] == [1, 2, 4, 4, 8, 8, 8, 8]
    assert json.loads(path.read_text())["padding"] == {"3": 4, "5": 8, "6": 8, "7": 8}


def test_a_table_measured_by_a_build_that_runs_wide_passes_otherwise_still_plans_and_warns(
    tmp_path, caplog, monkeypatch
):
    engine = _fake_engine(tmp_path)
    table = load_cost_table(AVX512)
    calibration = Calibration(table, {128: 0.002}, repeats=3, threads=2)
    path = save_plan(engine.path, 2, calibration, DecodePlan.from_table(table))
    stored = json.loads(path.read_text())
    assert stored["extra_buffers"] is True  # this build repacks
    assert stored["llamafile"] is False  # and has no llamafile sgemm (the README's build)
    with caplog.at_level(logging.WARNING):
        assert load_plan(engine.path, 2).source == f"calibrated ({path})"
    assert not caplog.records

    # llama-cpp-python rebuilt with llama.cpp's AMX kernels (models load without repacking)
    # and with llamafile's sgemm: wide passes cost otherwise.
    monkeypatch.setattr(native, "amx_in_build", lambda: True)
    monkeypatch.setattr(native, "llamafile_in_build", lambda: True)
    with caplog.at_level(logging.WARNING):
        assert load_plan(engine.path, 2).source == f"calibrated ({path})"  # still the plan
    (warning,) = caplog.records
    assert "measured by a llama-cpp-python built otherwise" in warning.message
    assert "with llama.cpp's repacked weights, without llamafile's sgemm" in warning.message
    assert "run `weavehost calibrate` again" in warning.message


def test_a_calibration_with_a_quantized_kv_cache_is_stored_apart_and_opens_flash_attention(
    tmp_path,
):
    engine = _fake_engine(tmp_path)
    table = load_cost_table(AVX512)
    f16 = Calibration(table, {128: 0.002}, repeats=3, threads=2, flash_attn=False)
    save_plan(engine.path, 2, f16, DecodePlan.from_table(table), "f16")
    assert plan_path(engine.path, 2, "f16").name.endswith("-t2.json")  # its name of old
    assert plan_path(engine.path, 2, "q8_0") != plan_path(engine.path, 2, "f16")
    assert load_plan(engine.path, 2, kv_cache="q8_0") is NO_PLAN  # f16's table: not q8_0's
    assert calibrated_flash_attn(engine.path, 2, "f16") is False
    assert calibrated_flash_attn(engine.path, 2, "q8_0") is True  # a quantized V cache needs it
    q8 = Calibration(table, {128: 0.002}, repeats=3, threads=2)
    path = save_plan(engine.path, 2, q8, DecodePlan.from_table(table), "q8_0")
    assert path == plan_path(engine.path, 2, "q8_0") and path.name.endswith("-t2-kvq8_0.json")
    plan = load_plan(engine.path, 2, flash_attn=True, kv_cache="q8_0")
    assert plan.source == f"calibrated ({path})"
    assert load_plan(engine.path, 2, flash_attn=False, kv_cache="f16").source != plan.source


def test_the_default_cache_s_calibration_is_its_own_and_keeps_the_kernel_it_chose(tmp_path, caplog):
    engine = _fake_engine(tmp_path)
    table = load_cost_table(AVX512)
    assert load_plan(engine.path, 2) is NO_PLAN
    assert not caplog.records  # nothing calibrated at all: nothing to warn of
    f16 = Calibration(table, {128: 0.002}, repeats=3, threads=2, flash_attn=False)
    save_plan(engine.path, 2, f16, DecodePlan.from_table(table), "f16")
    # An f16 calibration is not the default cache's (q8_0 keys): nothing stored for it yet,
    # and a warning says how to calibrate it.
    assert plan_path(engine.path, 2).name.endswith("-t2-kvq8_0-k.json")
    with caplog.at_level(logging.WARNING):
        assert load_plan(engine.path, 2) is NO_PLAN
    (warning,) = caplog.records
    assert "calibrated at 2 threads for the f16 KV cache, not the q8_0-k one" in warning.message
    assert "--threads 2 --kv-cache q8_0-k`, or run with --kv-cache f16" in warning.message
    assert calibrated_flash_attn(engine.path, 2) is True  # none stored: the engine's default
    # Quantized keys over f16 values open either way: the kernel is the one calibrated.
    keys = Calibration(table, {128: 0.002}, repeats=3, threads=2, flash_attn=False)
    path = save_plan(engine.path, 2, keys, DecodePlan.from_table(table))
    assert path == plan_path(engine.path, 2, "q8_0-k")
    assert calibrated_flash_attn(engine.path, 2) is False
    assert load_plan(engine.path, 2, flash_attn=False).source == f"calibrated ({path})"


STALE = {
    "an older weavehost's file": {
        "pass_ms": {"1": 7.0, "2": 9.0},
        "prefill_ms_per_token": 1.0,
        "padding": {},
    },
    "damaged costs": {"calibration": 3, "pass_ms": {"1": -1}, "prefill_ms_per_token": 1.0},
    "a list": [1, 2],
}


@pytest.mark.parametrize("record", STALE.values(), ids=STALE.keys())
def test_an_old_or_damaged_stored_calibration_says_to_run_calibrate(tmp_path, record):
    engine = _fake_engine(tmp_path)
    stored = plan_path(engine.path, 2)
    stored.parent.mkdir(parents=True, exist_ok=True)
    stored.write_text(json.dumps(record))
    with pytest.raises(ConfigError, match="unreadable.*run `weavehost calibrate`"):
        load_plan(engine.path, 2)
    stored.write_text("{not json")
    with pytest.raises(ConfigError, match="run `weavehost calibrate`"):
        load_plan(engine.path, 2)


# -- flash attention, on or off ------------------------------------------------------------------


def test_the_attention_kernel_is_the_one_whose_turn_costs_less_prompt_and_passes_together():
    # A kernel that prefills faster but passes slower loses a turn of 256 prefilled tokens, 64
    # one-row passes and 16 of 8 rows.
    wide = {False: 0.050, True: 0.050}
    slower_passes = AttentionProbe(
        {False: 0.0042, True: 0.0041}, {False: 0.027, True: 0.0375}, wide
    )
    assert not slower_passes.flash_attn
    assert slower_passes.turn_s(False) == pytest.approx(256 * 0.0042 + 64 * 0.027 + 16 * 0.05)
    # One whose prompt costs much less wins although each pass costs a little more.
    slower_prefill = AttentionProbe({False: 0.024, True: 0.008}, {False: 0.030, True: 0.032}, wide)
    assert slower_prefill.flash_attn
    # So does one whose wide passes cost much less, as on the Xeon at an agent's depth.
    slower_wide = AttentionProbe(
        {False: 0.004, True: 0.004}, {False: 0.027, True: 0.028}, {False: 0.150, True: 0.050}
    )
    assert slower_wide.flash_attn
    stored = slower_passes.record()
    assert stored["off"]["pass_ms"] == 27.0 and stored["on"]["prefill_ms_per_token"] == 4.1
    assert stored["on"]["wide_pass_ms"] == 50.0 and stored["wide_rows"] == 8


ONLY_ON_EXACT = {False: False, True: True}  # quantized keys, a build with llamafile's sgemm
ONLY_OFF_EXACT = {False: True, True: False}  # f16 keys, the README's build
BOTH_EXACT = {False: True, True: True}  # quantized keys, the README's build


def test_flash_attention_that_alone_keeps_drafts_exact_is_kept_unless_off_saves_a_third():
    # The EPYC of session 51 with q8_0 keys: off runs the turn ~14% faster (cheaper prefill
    # and wide passes at 1,024 cells), but with llamafile's sgemm only on computes a wide pass's
    # rows as one row's.
    prefill = {False: 0.0021, True: 0.0029}
    passes = {False: 0.0130, True: 0.0130}
    wide = {False: 0.042, True: 0.050}
    epyc_f16 = AttentionProbe(prefill, passes, wide)
    epyc_quantized_keys = AttentionProbe(prefill, passes, wide, exact=ONLY_ON_EXACT)
    assert epyc_quantized_keys.turn_s(False) < epyc_quantized_keys.turn_s(True) * 0.9
    assert not epyc_f16.flash_attn  # nothing to keep: the faster kernel
    assert epyc_quantized_keys.flash_attn and epyc_quantized_keys.margin == EXACT_ATTENTION_MARGIN
    record = epyc_quantized_keys.record()
    assert (record["exact_with_flash_attn"], record["exact_without_flash_attn"]) == (True, False)
    # Without llamafile's sgemm both kernels are exact: the faster one, off.
    both = AttentionProbe(prefill, passes, wide, exact=BOTH_EXACT)
    assert not both.flash_attn and both.margin == ATTENTION_MARGIN
    # The Xeon of run 13 at 1,200 cells: off a one-row pass 29 ms against 77, 12 rows 86 ms
    # against 296: off, exact or not.
    xeon = AttentionProbe(
        {False: 0.0042, True: 0.0041},
        {False: 0.029, True: 0.077},
        {False: 0.06, True: 0.2},
        exact=ONLY_ON_EXACT,
    )
    assert not xeon.flash_attn


def test_flash_attention_off_where_it_alone_keeps_drafts_exact_is_kept_unless_on_saves_a_third():
    # An f16 cache in the README's build: off is exact, on is not past 512 cells. On runs the
    # turn ~12% faster here, which is not worth drafts that part at near-ties.
    prefill = {False: 0.0029, True: 0.0021}
    passes = {False: 0.0130, True: 0.0130}
    wide = {False: 0.050, True: 0.042}
    probe = AttentionProbe(prefill, passes, wide, exact=ONLY_OFF_EXACT)
    assert probe.turn_s(True) < probe.turn_s(False) * 0.9
    assert not probe.kept and not probe.flash_attn and probe.margin == EXACT_ATTENTION_MARGIN
    much_faster_on = AttentionProbe(
        prefill, {False: 0.077, True: 0.029}, {False: 0.2, True: 0.06}, exact=ONLY_OFF_EXACT
    )
    assert much_faster_on.flash_attn


def test_which_kernel_keeps_wide_passes_exact_follows_the_cache_and_the_build(monkeypatch):
    for sgemm in (False, True):
        monkeypatch.setattr(native, "llamafile_in_build", lambda sgemm=sgemm: sgemm)
        # On: quantized keys, whatever the build (f16's one-row passes take the split-KV path).
        on = [native.exact_wide_passes(kv, True) for kv in ("q8_0-k", "q8_0", "f16")]
        assert on == [True, True, False]
        # Off: exact wherever the build has no llamafile sgemm, whatever the cache.
        off = [native.exact_wide_passes(kv, False) for kv in ("q8_0-k", "f16")]
        assert off == [not sgemm, not sgemm]


def test_a_model_opens_with_the_attention_kernel_its_calibration_was_measured_with(tmp_path):
    engine = _fake_engine(tmp_path)
    assert calibrated_flash_attn(engine.path, 2)  # not calibrated: the engine's default, on
    table = load_cost_table(AVX512)
    for chosen in (False, True):
        calibration = Calibration(table, {128: 0.002}, repeats=3, threads=2, flash_attn=chosen)
        path = save_plan(engine.path, 2, calibration, DecodePlan.from_table(table))
        assert json.loads(path.read_text())["flash_attn"] is chosen
        assert calibrated_flash_attn(engine.path, 2) is chosen
        assert calibrated_flash_attn(engine.path, 1)  # another thread count: not calibrated
    # Stored before weavehost chose: measured with llama.cpp's default for the CPU, on.
    record = json.loads(path.read_text())
    del record["flash_attn"]
    path.write_text(json.dumps(record))
    assert calibrated_flash_attn(engine.path, 2)
    path.write_text("{not json")  # load_plan reports it; the kernel is the default
    assert calibrated_flash_attn(engine.path, 2)


def test_a_plan_measured_with_the_other_kernel_is_not_used(tmp_path):
    engine = _fake_engine(tmp_path)
    table = load_cost_table(AVX512)
    calibration = Calibration(table, {128: 0.002}, repeats=3, threads=2, flash_attn=False)
    save_plan(engine.path, 2, calibration, DecodePlan.from_table(table))
    assert load_plan(engine.path, 2, flash_attn=False).table is not None
    assert load_plan(engine.path, 2, flash_attn=True) is NO_PLAN
    assert load_plan(engine.path, 2).table is not None  # no kernel asked: the stored plan


@pytest.mark.model
def test_a_thermal_thread_change_keeps_the_kernel_the_model_was_opened_with(
    embedded_model_path, tmp_path, monkeypatch
):
    monkeypatch.setenv("WEAVEHOST_CACHE", str(tmp_path))  # this model's plans, this test's alone
    table = load_cost_table(AVX512)
    for threads, kernel in ((2, False), (1, True)):
        calibration = Calibration(
            table, {128: 0.002}, repeats=3, threads=threads, flash_attn=kernel
        )
        save_plan(embedded_model_path, threads, calibration, DecodePlan.from_table(table))
    with open_calibrated(embedded_model_path, n_ctx=512, n_threads=2) as opened:
        engine, state = opened.engine, opened.state
        assert engine.flash_attn is False  # as its calibration at 2 threads was measured
        assert state.plan(engine).source == f"calibrated ({plan_path(embedded_model_path, 2)})"
        engine.set_threads(1)  # a hot phone backs off
        # The table at 1 thread was measured with flash attention on: it does not hold here.
        assert engine.flash_attn is False
        assert state.plan(engine) is NO_PLAN
        engine.set_threads(2)
        assert state.plan(engine).table is not None


def _calibrate_command(model: Path, cache: Path, monkeypatch, max_rows: int):
    """``weavehost calibrate`` on ``model`` at one thread and one round, its plans stored in
    ``cache`` (this test's alone): a function of the extra arguments that runs it. The attention
    probe is the real one over a shallower prompt (128 held tokens, not 1,024): the command's
    path is the same, in a few seconds instead of most of a minute."""
    from click.testing import CliRunner

    from weavehost.cli import main

    monkeypatch.setenv("WEAVEHOST_CACHE", str(cache))
    shallow = functools.partial(probe_attention, repeats=1, held=128)
    monkeypatch.setattr(calibration_module, "probe_attention", shallow)
    args = ["calibrate", "--model", str(model), "--threads", "1", "--repeats", "1"]
    return lambda *extra: CliRunner().invoke(main, [*args, "--max-rows", str(max_rows), *extra])


@pytest.mark.model
def test_the_calibrate_command_stores_what_the_next_opening_of_the_model_runs_with(
    embedded_model_path, tmp_path, monkeypatch
):
    calibrate = _calibrate_command(embedded_model_path, tmp_path, monkeypatch, max_rows=2)
    result = calibrate("--json")
    assert result.exit_code == 0, result.output
    stored = json.loads(result.output)
    assert stored == json.loads(plan_path(embedded_model_path, 1).read_text())
    with open_calibrated(embedded_model_path, n_ctx=512, n_threads=1) as opened:
        assert opened.engine.flash_attn is stored["flash_attn"]
        assert opened.state.plan(opened.engine).table is not None


@pytest.mark.model
def test_calibrate_check_measures_again_stores_nothing_and_exits_1_on_a_table_that_disagrees(
    embedded_model_path, tmp_path, monkeypatch
):
    calibrate = _calibrate_command(embedded_model_path, tmp_path, monkeypatch, max_rows=2)
    # Stored: 2 rows cost 10x one, which no machine measures for SmolLM2.
    table = CostTable({1: 0.001, 2: 0.010}, 0.001)
    calibration = Calibration(table, {128: 0.001}, repeats=1, threads=1, flash_attn=True)
    path = save_plan(embedded_model_path, 1, calibration, DecodePlan.from_table(table))
    stored = path.read_text()
    result = calibrate("--check", "--json")
    assert result.exit_code == 1, result.output
    report = json.loads(result.output)
    assert report["passed"] is False and report["stored"] == str(path)
    assert report["worst"]["kind"] == "rows" and report["worst"]["count"] == 2
    assert report["relative_difference"]["rows"]["1"] == 0.0
    assert report["relative_difference"]["held"] == {}  # the stored table has no held passes
    assert report["worst"]["difference"] > 0.5
    assert path.read_text() == stored  # nothing stored


@pytest.mark.model
def test_calibrate_check_says_in_words_where_the_passes_after_held_tokens_disagree(
    embedded_model_path, tmp_path, monkeypatch
):
    calibrate = _calibrate_command(embedded_model_path, tmp_path, monkeypatch, max_rows=2)
    # Stored: after held tokens 2 rows cost 10x one, which no machine measures for SmolLM2.
    table = CostTable({1: 0.001, 2: 0.0014}, 0.001, held_s={1: 0.001, 2: 0.010},
                      held_tokens=HELD_TOKENS, base_tokens=42)  # fmt: skip
    calibration = Calibration(table, {128: 0.001}, repeats=1, threads=1, flash_attn=True)
    save_plan(embedded_model_path, 1, calibration, DecodePlan.from_table(table))
    result = calibrate("--check")
    assert result.exit_code == 1, result.output
    held_line = (
        f"after {HELD_TOKENS} held tokens (× the one-row pass after them), difference: 1 0.0%"
    )
    assert held_line in result.output
    assert "(held 2); absolute:" in result.output and result.output.rstrip().endswith("DISAGREE")


@pytest.mark.model
def test_calibrate_with_a_q8_0_cache_measures_that_cache_unprobed_and_checks_against_its_own_file(
    embedded_model_path, tmp_path, monkeypatch
):
    opened: list[tuple[bool, str]] = []
    open_engine = Engine.open

    def opening(*args, **kwargs):
        opened.append((kwargs["flash_attn"], kwargs.get("kv_cache", "f16")))
        return open_engine(*args, **kwargs)

    monkeypatch.setattr(Engine, "open", opening)
    calibrate = _calibrate_command(embedded_model_path, tmp_path, monkeypatch, max_rows=2)
    result = calibrate("--kv-cache", "q8_0")
    assert result.exit_code == 0, result.output
    assert opened == [(True, "q8_0")]  # no probe: a quantized cache needs flash attention
    assert "flash attention: on (a q8_0 KV cache needs it; not probed)" in result.output
    path = plan_path(embedded_model_path, 1, "q8_0")
    assert f"stored in {path}" in result.output and not plan_path(embedded_model_path, 1).exists()
    assert "q8_0 KV cache" in json.loads(path.read_text())["machine"]
    checked = calibrate("--kv-cache", "q8_0", "--check", "--json")
    report = json.loads(checked.output)
    assert report["stored"] == str(path) and report["kv_cache"] == "q8_0"
    assert report["flash_attn"] == {"stored": True, "probe": None}
    assert calibrate("--check").exit_code == 2  # none of the default cache: nothing to check


@pytest.mark.model
def test_the_attention_probe_opens_the_real_model_with_each_kernel_and_times_both(
    embedded_model_path, monkeypatch
):
    opened: list[bool] = []
    open_engine = Engine.open

    def opening(*args, **kwargs):
        opened.append(kwargs["flash_attn"])
        return open_engine(*args, **kwargs)

    monkeypatch.setattr(Engine, "open", opening)
    probe = probe_attention(embedded_model_path, n_threads=1, repeats=1, held=64)
    assert opened == [False, True, True, False]  # two openings each, a drift weighs alike
    costs = [probe.prefill_token_s, probe.pass_s, probe.wide_pass_s]
    assert all(set(cost) == {False, True} for cost in costs)
    assert all(seconds > 0 for cost in costs for seconds in cost.values())
    # The default cache's keys are quantized; off is exact in the README's build.
    assert probe.exact == {False: not llamafile_in_build(), True: True}


@pytest.mark.model
@pytest.mark.parametrize("flash_attn", [False, True])
def test_an_engine_opened_either_way_says_so_and_keys_its_saved_states_by_it(
    embedded_model_path, flash_attn
):
    with Engine.open(embedded_model_path, n_ctx=512, n_threads=1, flash_attn=flash_attn) as e:
        assert e.flash_attn is flash_attn and e.identity.flash_attn is flash_attn
        logits = e.prefill(0, e.tokenize("The weather in Paris is"))
        assert logits is not None and logits.shape[0] >= e.n_vocab
        calibration = measure_pass_costs(
            e, rows=(1, 2), repeats=1, prefill_chunks=(8,), outputs=(1,), output_rows=2
        )
        assert calibration.flash_attn is flash_attn
        assert calibration.record()["flash_attn"] is flash_attn


# -- measuring ----------------------------------------------------------------------------------


@pytest.mark.model
def test_measuring_smollm2_gives_a_positive_cost_for_every_row_count_up_to_32(fresh_engine):
    engine = fresh_engine
    # Short prefill chunks and one timed pass each: the shape is checked here, not the costs.
    calibration = measure_pass_costs(engine, repeats=1, prefill_chunks=(16, 32), machine="test")
    table = calibration.table
    assert sorted(table.pass_s) == list(DEFAULT_ROWS)
    assert all(cost > 0 for cost in table.pass_s.values())
    assert table.output_rows == 32
    assert sorted(table.output_s) == list(DEFAULT_OUTPUTS)
    assert all(cost > 0 for cost in table.output_s.values())
    assert set(calibration.prefill_chunk_s) == {16, 32}
    assert table.prefill_token_s == min(calibration.prefill_chunk_s.values()) > 0
    assert (table.machine, calibration.threads) == ("test", engine.n_threads)
    # The same passes after 1,024 held tokens: 32 rows that read them all cost more.
    assert (sorted(table.held_s), table.held_tokens) == (list(HELD_ROWS), HELD_TOKENS)
    assert table.held_s[32] > table.pass_s[32]
    assert all(engine.seq_len(seq) == 0 for seq in range(engine.n_seq_max))
    assert engine.kv_span(0) == (-1, -1)


# -- measuring on a noisy machine (fake timings) ------------------------------------------------


class FakeClock:
    """The calibration's clock: it moves only when a fake pass runs."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class TimedEngine:
    """Enough of an engine for `measure_pass_costs`: each pass advances the clock by
    ``cost(rows, outputs, forced, index)`` seconds (``index``: the pass's place in the run),
    and is recorded as ``(rows, outputs, forced)``."""

    n_batch, n_ctx, n_seq_max, n_threads, flash_attn = 512, 2048, 16, 2, True

    def __init__(self, clock: FakeClock, cost) -> None:
        self.clock, self.cost, self.passes = clock, cost, []
        self.held = 0  # tokens sequence 0 holds before the pass

    def tokenize(self, text, special=False):
        return list(range(len(text.split())))

    def clear(self):
        self.held = 0

    def prefill(self, seq, tokens, logits_last=True):
        self.held += len(tokens)

    def fork(self, src, dst):
        pass

    def drop(self, seq, from_pos=0):
        self.held = min(self.held, from_pos)

    def run_pass(self, batch):
        shape = (len(batch), sum(row.logits for row in batch), batch[0].forced)
        self.clock.now += self.cost(*shape, len(self.passes))
        self.passes.append(shape)
        return []


def _steady(rows, outputs, forced, index):
    """A machine where a pass costs 10 ms, 3 ms a row and 1 ms a row asking for logits; a
    prefill 1 ms a token."""
    return rows * 1e-3 if forced else (10 + 3 * rows + outputs) * 1e-3


def _timed_engine(monkeypatch, cost=_steady) -> TimedEngine:
    clock = FakeClock()
    monkeypatch.setattr(calibrate_module, "_clock", clock)
    return TimedEngine(clock, cost)


SMALL = {"prefill_chunks": (16,), "output_rows": 8, "outputs": (1, 4), "held_tokens": 0}


def test_every_width_is_timed_once_per_round_in_a_shuffled_order_not_one_width_after_another(
    monkeypatch,
):
    engine = _timed_engine(monkeypatch)
    measure_pass_costs(engine, rows=(1, 2, 4, 8), repeats=3, **SMALL)
    shapes = {(1, 1, False), (2, 2, False), (4, 4, False), (8, 8, False), (8, 1, False),
              (8, 4, False), (16, 1, True)}  # fmt: skip
    assert len(engine.passes) == len(shapes) * 4  # one untimed round, then 3 timed
    rounds = [engine.passes[i : i + len(shapes)] for i in range(0, len(engine.passes), len(shapes))]
    assert all(set(one) == shapes and len(one) == len(shapes) for one in rounds)
    assert len({tuple(one) for one in rounds[1:]}) > 1  # the order changes from round to round


def test_a_drift_during_the_run_lands_on_every_width_alike(monkeypatch):
    total = 9 * 10  # 8 widths and a prefill chunk, a warm-up round and 9 timed rounds

    def drifting(rows, outputs, forced, index):  # the machine slows down to 2x over the run
        return _steady(rows, outputs, forced, index) * (1 + index / total)

    engine = _timed_engine(monkeypatch, drifting)
    table = measure_pass_costs(
        engine, rows=range(1, 9), repeats=9, prefill_chunks=(1,), output_rows=0, held_tokens=0
    ).table
    for n in range(2, 9):
        true = (10 + 4 * n) / 14  # × a one-row pass
        assert table.pass_s[n] / table.pass_s[1] == pytest.approx(true, rel=0.08)


def test_the_same_passes_are_timed_again_after_many_held_tokens_in_rounds_of_their_own(
    monkeypatch,
):
    engine: TimedEngine

    def reading(rows, outputs, forced, index):  # each row reads each held token in 1 us
        return _steady(rows, outputs, forced, index) + (0 if forced else rows * engine.held * 1e-6)

    engine = _timed_engine(monkeypatch, reading)
    rows = (1, 2, 4, 8)
    calibration = measure_pass_costs(engine, rows=rows, repeats=3, held_tokens=512, **{
        key: value for key, value in SMALL.items() if key != "held_tokens"
    })  # fmt: skip
    table, base = calibration.table, len(engine.tokenize(calibrate_module._PROMPT))
    assert (table.held_tokens, table.base_tokens) == (512, base)
    assert set(table.held_s) == set(rows)  # of HELD_ROWS, those measured
    for n in rows:
        assert table.pass_s[n] == pytest.approx(_steady(n, n, False, 0) + n * base * 1e-6)
        assert table.held_s[n] == pytest.approx(_steady(n, n, False, 0) + n * 512 * 1e-6)
        assert table.at_held(2000).pass_s[n] == pytest.approx(
            _steady(n, n, False, 0) + n * 2000 * 1e-6
        )
    held_passes = engine.passes[-len(rows) * 4 :]  # after the others: a warm-up and 3 rounds
    assert sorted(held_passes) == sorted([(n, n, False) for n in rows] * 4)
    assert calibration.record()["held_pass_ms"]["8"] == pytest.approx(table.held_s[8] * 1e3)


def test_no_held_passes_are_timed_where_the_context_has_no_room_for_them(monkeypatch):
    engine = _timed_engine(monkeypatch)
    engine.n_ctx = 1024
    calibration = measure_pass_costs(engine, rows=(1, 2), repeats=1, held_tokens=1024, **{
        key: value for key, value in SMALL.items() if key != "held_tokens"
    })  # fmt: skip
    assert not calibration.table.knows_held
    assert "held_pass_ms" not in calibration.record()


def test_shape_faults_allow_what_row_tiles_allow_and_nothing_more():
    # Measured on the AVX-512 machine (Qwen2.5-Coder-0.5B Q4_0, ms): 8 rows cost less than 7
    # and 16 less than 15 (whole tiles of four); 16 and 12 cost the same within the noise.
    assert shape_faults({4: 28.4, 7: 55.4, 8: 36.9, 12: 50.6, 15: 76.8, 16: 48.4}) == []
    assert shape_faults({4: 30.0, 8: 20.0}) == [(4, 8)]  # 8 rows do all that 4 do, and more
    # A run whose first output counts were measured while the machine was busy: 5 read 91 ms,
    # 9 (one tile more) 78: 9 does all that 5 does.
    assert shape_faults({1: 68.4, 5: 91.2, 6: 78.5, 9: 77.6}) == [(5, 6), (5, 9)]


def _disturbed_at_12(until):
    """12 rows cost 1.5x what they should for the first ``until`` passes of the run."""

    def cost(rows, outputs, forced, index):
        slow = 1.5 if rows == 12 and not forced and index < until else 1.0
        return _steady(rows, outputs, forced, index) * slow

    return cost


WIDTHS = (1, 4, 8, 12, 16)


def test_a_table_that_fails_the_shape_check_has_its_widths_timed_again_until_it_passes(
    monkeypatch,
):
    first = (len(WIDTHS) + 1) * 6  # a warm-up round, 5 timed rounds: 5 widths and a prefill
    engine = _timed_engine(monkeypatch, _disturbed_at_12(until=first))
    calibration = measure_pass_costs(
        engine, rows=WIDTHS, repeats=5, prefill_chunks=(1,), output_rows=0, held_tokens=0
    )
    table = calibration.table
    assert calibration.remeasured == ("rows 12",)  # the dearer of the two
    assert calibration.shape_faults == ()
    assert len(engine.passes) == first + 5  # then 5 rounds of 12
    assert table.pass_s[12] < table.pass_s[16]
    assert calibration.record()["shape_check"]["remeasured"] == ["rows 12"]


def test_a_table_that_still_fails_the_shape_check_says_so_with_the_calibration(monkeypatch):
    engine = _timed_engine(monkeypatch, _disturbed_at_12(until=10**9))
    calibration = measure_pass_costs(
        engine, rows=WIDTHS, repeats=5, prefill_chunks=(1,), output_rows=0, held_tokens=0
    )
    assert calibration.shape_faults == (
        "rows 16 cost 74.0 ms, less than rows 12 (87.0 ms) by more than 10%",
    )
    assert calibration.record()["shape_check"]["faults"] == list(calibration.shape_faults)
    extra = SHAPE_RETRIES * 5  # each retry: 5 rounds of 12
    assert len(engine.passes) == (len(WIDTHS) + 1) * 6 + extra


def test_a_held_pass_that_fails_the_shape_check_is_timed_again_in_rounds_of_its_own(monkeypatch):
    engine: TimedEngine

    first = 6 * 4 + 3 * 4  # 6 shapes, then 3 held: each a warm-up and 3 rounds

    def disturbed(rows, outputs, forced, index):  # 4 held rows read slowly, at first
        slow = 2.0 if rows == 4 and engine.held > 100 and index < first else 1.0
        return _steady(rows, outputs, forced, index) * slow

    engine = _timed_engine(monkeypatch, disturbed)
    settings = {key: value for key, value in SMALL.items() if key != "held_tokens"}
    calibration = measure_pass_costs(engine, rows=(1, 4, 8), repeats=3, held_tokens=512, **settings)
    assert calibration.remeasured == ("held 4",)  # dearer than 8 held rows, which do all it does
    assert calibration.shape_faults == ()
    assert calibration.table.held_s[4] < calibration.table.held_s[8]
    assert len(engine.passes) == first + 3  # its retry: 3 rounds of it alone
    assert engine.passes[-3:] == [(4, 4, False)] * 3


def test_calibrate_prints_the_probes_turns_and_why_it_kept_the_kernel(capsys):
    from weavehost.cli import _print_probe

    prefill, passes = {False: 0.0021, True: 0.0029}, {False: 0.013, True: 0.013}
    rounds = {False: (2.0, 2.1), True: (2.3, 2.4)}
    wide = {False: 0.042, True: 0.05}
    _print_probe(AttentionProbe(prefill, passes, wide, rounds, exact=ONLY_ON_EXACT))
    printed = capsys.readouterr().out
    assert printed.startswith("flash attention: on (a turn over 1024 held tokens")
    assert (
        "off 2.04 s (2.10 ms a prefilled token, 13.0 ms a one-row pass, 42.0 ms a pass of 8 rows)"
        in printed
    )
    assert printed.endswith(
        "off only if faster by 33.3%: exact drafts with it on, the noise between openings 5.0%)\n"
    )
    _print_probe(AttentionProbe(prefill, passes, wide, rounds, exact=ONLY_OFF_EXACT))
    printed = capsys.readouterr().out
    assert printed.startswith("flash attention: off (a turn over 1024 held tokens")
    assert printed.endswith("on only if faster by 33.3%: exact drafts with it off, the noise "
                            "between openings 5.0%)\n")  # fmt: skip
    _print_probe(AttentionProbe(prefill, passes, wide, rounds, exact=BOTH_EXACT))
    printed = capsys.readouterr().out
    assert printed.startswith("flash attention: off (")
    assert "off only if faster by 10.0%: exact drafts with it off or on" in printed


def test_a_coin_flip_between_the_attention_kernels_keeps_the_engines_default():
    # Today's second calibration of Qwen2.5-Coder-0.5B: off 1735.7 ms a turn, on 1737.4.
    coin_flip = AttentionProbe(
        {False: 0.0017337, True: 0.0016826},
        {False: 0.0132514, True: 0.0136867},
        {False: 0.05, True: 0.05},
    )
    assert coin_flip.turn_s(False) < coin_flip.turn_s(True)
    assert coin_flip.flash_attn  # off is faster by 0.1%: within the noise
    assert coin_flip.margin == ATTENTION_MARGIN


def test_the_margin_off_must_clear_grows_with_the_noise_between_openings_of_one_kernel():
    prefill = {False: 0.001, True: 0.001}
    passes = {False: 0.009, True: 0.010}
    wide = {False: 0.030, True: 0.034}  # off: a turn 8.9% less
    steady = AttentionProbe(prefill, passes, wide, {False: (1.00, 1.01), True: (1.10, 1.11)})
    assert steady.noise == pytest.approx(0.01) and not steady.flash_attn
    noisy = AttentionProbe(prefill, passes, wide, {False: (1.00, 1.08), True: (1.10, 1.11)})
    assert noisy.noise == pytest.approx(0.08) and noisy.margin == pytest.approx(0.16)
    assert noisy.flash_attn
    assert noisy.record()["off"]["turn_ms_by_opening"] == [1000.0, 1080.0]


def test_two_tables_are_compared_by_each_widths_cost_relative_to_one_row():
    before = CostTable({1: 0.010, 4: 0.030, 8: 0.040}, 0.001, output_s={1: 0.05}, output_rows=8)
    slower = CostTable({1: 0.011, 4: 0.033, 8: 0.044}, 0.001, output_s={1: 0.055}, output_rows=8)
    uniform = compare_tables(before, slower)  # a machine 10% slower throughout
    assert max(uniform.rows.values()) == pytest.approx(0, abs=1e-9)
    assert uniform.absolute[8] == pytest.approx(0.10)
    assert uniform.agrees()
    moved = CostTable({1: 0.010, 4: 0.036, 8: 0.040}, 0.001, output_s={1: 0.05}, output_rows=8)
    found = compare_tables(before, moved)
    assert found.worst == ("rows", 4, pytest.approx(0.20))
    assert not found.agrees() and found.agrees(bound=0.25)


def test_the_passes_after_held_tokens_are_compared_too_each_relative_to_one_row_so():
    def table(held_4: float, held_tokens: int = 1024) -> CostTable:
        return CostTable({1: 0.010, 4: 0.030}, 0.001, held_s={1: 0.012, 4: held_4},
                         held_tokens=held_tokens, base_tokens=42)  # fmt: skip

    assert compare_tables(table(0.040), table(0.040)).agrees()
    found = compare_tables(table(0.040), table(0.050))
    assert found.worst == ("held", 4, pytest.approx(0.25))
    assert not found.agrees()
    assert found.record()["relative_difference"]["held"] == {"1": 0.0, "4": 0.25}
    assert found.record()["worst"] == {"kind": "held", "count": 4, "difference": 0.25}
    # Held passes timed after other lengths, or in one table only, are not compared.
    assert compare_tables(table(0.040), table(0.050, held_tokens=2048)).held == {}
    assert compare_tables(CostTable({1: 0.010, 4: 0.030}, 0.001), table(0.050)).held == {}


def test_checking_a_model_never_calibrated_says_to_calibrate_first(tmp_path, monkeypatch):
    monkeypatch.setenv("WEAVEHOST_CACHE", str(tmp_path))
    engine = _fake_engine(tmp_path)
    with pytest.raises(ConfigError, match="nothing to check; run `weavehost calibrate` first"):
        check_calibration(engine.path, threads=2, rows=(1, 2), repeats=1)
