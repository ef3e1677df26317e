"""``weavehost bench-report``: the click command over ``html_report.build_report``.

Stage: CLI (thin). It reads one or more ``weavehost bench --out`` folders and writes the SVG
charts and ``report.html`` into ``--out``. A missing run folder or ``results.jsonl``, a folder
that is not a ``weavehost bench`` run (a ``weavehost bench-agent`` one included), and a missing
matplotlib, are :class:`BenchError` (exit 2) that the CLI group turns into one ``Error:`` line.
"""

from __future__ import annotations

from pathlib import Path

import click

from weavehost.bench.html_report import build_report

__all__ = ["bench_report"]


@click.command("bench-report")
@click.argument("run_dirs", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("report"),
    show_default=True,
    help="Folder for report.html and one SVG per chart.",
)
@click.option("--title", default=None, help="Heading of the page (default: names the runs).")
def bench_report(run_dirs: tuple[Path, ...], out: Path, title: str | None) -> None:
    """Chart one or more `weavehost bench --out` RUN_DIRS into one self-contained report.html.

    Needs matplotlib (pip install 'weavehost[bench]').
    """
    files = build_report(list(run_dirs), out, title=title)
    for chart in files.charts:
        click.echo(f"chart:  {chart}")
    click.echo(f"report: {files.html}")
