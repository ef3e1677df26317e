"""What every benchmark records about where it ran: the source commit among it."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from weavehost.bench import machine
from weavehost.bench.machine import machine_info, source_commit

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.skipif(
    shutil.which("git") is None or not (ROOT / ".git").exists(), reason="not a git checkout"
)
def test_a_run_records_the_commit_of_the_source_it_ran():
    head = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    commit = machine_info()["commit"]
    assert commit == source_commit()
    assert head.startswith(commit.removesuffix("+dirty"))


def test_outside_a_checkout_the_commit_is_not_recorded(monkeypatch, tmp_path):
    fake = tmp_path / "weavehost" / "bench" / "machine.py"
    fake.parent.mkdir(parents=True)
    monkeypatch.setattr(machine, "__file__", str(fake))
    assert source_commit() is None
