"""The third-party task set's machinery: where its servers are, and the fixtures a task gets.

Stage: benchmark inputs (``weavehost bench-agent --set third-party``). The tasks of
``agent_tasks_third_party.jsonl`` run over the MCP servers users install first:
``mcp-server-time`` and ``mcp-server-git`` (PyPI) and ``@modelcontextprotocol/server-filesystem``
(npm), pinned for CI in ``.ci/servers-requirements.txt`` and ``.ci/everything/``.

**Servers.** A task names one by a placeholder in its ``servers``: ``{mcp-server-time}``,
``{mcp-server-git}``, ``{server-filesystem}``. :func:`server_command` finds each, in order:

1. its variable (:data:`SERVER_VARIABLES`), a command line: a named program that is not there is
   an error, never a fall-through to another install;
2. the console script beside this Python (a venv's ``bin``), then on ``PATH``; for
   server-filesystem, the repository's ``.ci/everything`` install run with ``node`` (an editable
   install), then the package's own ``mcp-server-filesystem`` on ``PATH`` (``npm install -g``);
3. nowhere else: a :class:`BenchError` saying how to install it, before any task runs.

**Fixtures.** ``{files}`` and ``{repo}`` stand for folders made fresh for each task run (every
task under every variant) in the run's folder and removed after it, so a run sees the same
state whatever ran before it (:func:`fixtures`). The run's folder is a new temporary one, or
the one ``--fixtures-dir`` names (:func:`run_folder`): the same paths in every run, so that two
runs (two versions of the code) show the model the same prompts and results:

- ``{files}``: a copy of the shipped ``agent_files/`` named ``shared`` (server-filesystem is
  started with it on its command line; weavehost offers no roots unless asked, so the server
  keeps it);
- ``{repo}``: a git repository built by :func:`build_repository` from :data:`COMMITS` with a fixed
  author, committer, dates and messages, then a change left unstaged, an untracked file and a
  second branch, so a commit's message, its author or the status are facts a task can check.
  Git runs without the user's or the system's configuration.

Each git command is bounded by :data:`GIT_BOUND_S`; a failure is a :class:`BenchError`.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from weavehost.errors import BenchError

__all__ = [
    "COMMITS",
    "FIXTURE_NAMES",
    "GIT_BOUND_S",
    "SERVER_VARIABLES",
    "Commit",
    "build_repository",
    "check_run_folder",
    "fixtures",
    "placeholders_in",
    "resolve_servers",
    "run_folder",
    "server_command",
]

REPOSITORY_ROOT = Path(__file__).resolve().parents[2]  # an editable install: the checkout
FILES = Path(__file__).with_name("agent_files")
SERVER_VARIABLES = {
    "mcp-server-time": "WEAVEHOST_MCP_SERVER_TIME",
    "mcp-server-git": "WEAVEHOST_MCP_SERVER_GIT",
    "server-filesystem": "WEAVEHOST_SERVER_FILESYSTEM",
}
_PYPI = {"mcp-server-time", "mcp-server-git"}
_FILESYSTEM_ENTRY = (
    REPOSITORY_ROOT / ".ci" / "everything" / "node_modules" / "@modelcontextprotocol"
    / "server-filesystem" / "dist" / "index.js"
)  # fmt: skip
FIXTURE_NAMES = ("files", "repo")
_PLACEHOLDER = re.compile(r"\{([a-z][a-z-]*)\}")
# A git command on a small repository takes milliseconds; this only stops a hung one.
GIT_BOUND_S = 30.0


def server_command(name: str) -> str:
    """The command line that starts the third-party server ``name`` over stdio (see the module
    docstring for where it is looked for); a :class:`BenchError` saying how to install it."""
    variable = SERVER_VARIABLES[name]
    named = os.environ.get(variable, "").strip()
    if named:
        try:
            program = shlex.split(named)[0]
        except (ValueError, IndexError):
            raise BenchError(f"{variable}={named!r}: not a command line") from None
        if shutil.which(program) is None and not Path(program).is_file():
            raise BenchError(f"{variable}={named!r}: {program!r} is not on PATH")
        return named
    if name in _PYPI:
        found = shutil.which(name, path=str(Path(sys.executable).parent)) or shutil.which(name)
        if found is not None:
            return shlex.quote(found)
        how = f"pip install {name} (CI pins it in .ci/servers-requirements.txt)"
    else:
        node = shutil.which("node")
        if node is not None and _FILESYSTEM_ENTRY.is_file():
            return shlex.join([node, str(_FILESYSTEM_ENTRY)])
        found = shutil.which("mcp-server-filesystem")
        if found is not None:
            return shlex.quote(found)
        how = (
            "npm install -g @modelcontextprotocol/server-filesystem (CI pins it in "
            ".ci/everything/package.json)"
        )
    raise BenchError(
        f"the task needs {name}, which is not installed: {how}, or set {variable} to the "
        "command line that starts it"
    )


def placeholders_in(text: str) -> set[str]:
    """The ``{name}`` placeholders in ``text``."""
    return set(_PLACEHOLDER.findall(text))


def resolve_servers(text: str) -> str:
    """``text`` with each third-party server's placeholder replaced by its command line; an
    unknown placeholder (neither a server nor a fixture) is a :class:`BenchError`."""
    names = placeholders_in(text)
    for name in sorted(names):
        if name in SERVER_VARIABLES:
            text = text.replace(f"{{{name}}}", server_command(name))
        elif name not in FIXTURE_NAMES:
            known = ", ".join(f"{{{n}}}" for n in (*SERVER_VARIABLES, *FIXTURE_NAMES))
            raise BenchError(f"unknown placeholder {{{name}}} (known: {known})")
    if "repo" in names:
        _git()  # the fixture repository is built with it: missing, say so now
    return text


@dataclass(frozen=True, slots=True)
class Commit:
    """One commit of the fixture repository: who, when, what, and the files it writes."""

    author: str
    email: str
    date: str  # ISO 8601 with its offset: the author and committer date
    message: str
    files: Mapping[str, str]


ADA = ("Ada Lovelace", "ada@example.org")
GRACE = ("Grace Hopper", "grace@example.org")
COMMITS = (
    Commit(*ADA, "2024-03-04T09:00:00+00:00", "Start the garden planner", {
        "README.md": "# Garden planner\n\nWhat to sow in the community garden, and when.\n",
        "plants.csv": "plant,sow\nbasil,April\nmint,March\n",
    }),
    Commit(*GRACE, "2024-03-05T14:30:00+00:00", "Add tomatoes to the spring list", {
        "plants.csv": "plant,sow\nbasil,April\nmint,March\ntomato,May\n",
    }),
    Commit(*ADA, "2024-03-07T11:15:00+00:00", "Add care notes for the basil", {
        "care.md": "# Care\n\nWater the basil every two days.\n",
    }),
)  # fmt: skip
BRANCH = "winter-plan"  # a second branch, at the second commit
UNSTAGED = {"care.md": "# Care\n\nWater the basil every two days.\nWater the mint daily.\n"}
UNTRACKED = {"ideas.txt": "Build a compost bin by the shed.\n"}


def _git() -> str:
    git = shutil.which("git")
    if git is None:
        raise BenchError("the task's repository fixture needs git, which is not on PATH")
    return git


def _write(root: Path, files: Mapping[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8", newline="\n")


def build_repository(root: Path) -> Path:
    """Make the fixture repository in the new folder ``root`` (see the module docstring)."""
    git = _git()
    # Nothing of the user's or the system's git configuration applies (signing, hooks, CRLF).
    env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    settings = ["-c", "core.autocrlf=false", "-c", "commit.gpgsign=false", "-c", "core.hooksPath="]

    def run(*args: str, who: tuple[str, str] = ADA, date: str = COMMITS[0].date) -> None:
        stamp = {
            "GIT_AUTHOR_NAME": who[0], "GIT_AUTHOR_EMAIL": who[1], "GIT_AUTHOR_DATE": date,
            "GIT_COMMITTER_NAME": who[0], "GIT_COMMITTER_EMAIL": who[1],
            "GIT_COMMITTER_DATE": date,
        }  # fmt: skip
        try:
            subprocess.run(
                [git, *settings, "-C", str(root), *args],
                env={**env, **stamp},
                check=True,
                capture_output=True,
                timeout=GIT_BOUND_S,
            )
        except subprocess.CalledProcessError as exc:
            why = exc.stderr.decode(errors="replace").strip()
            raise BenchError(
                f"building the fixture repository: git {args[0]} failed: {why}"
            ) from None
        except subprocess.TimeoutExpired:
            raise BenchError(
                f"building the fixture repository: git {args[0]} took over {GIT_BOUND_S:g} s"
            ) from None

    root.mkdir(parents=True)
    run("init", "-q")
    run("symbolic-ref", "HEAD", "refs/heads/main")  # whatever init.defaultBranch says
    for number, commit in enumerate(COMMITS, start=1):
        _write(root, commit.files)
        run("add", "--", *commit.files)
        run("commit", "-q", "-m", commit.message,
            who=(commit.author, commit.email), date=commit.date)  # fmt: skip
        if number == 2:
            run("branch", BRANCH)
    _write(root, {**UNSTAGED, **UNTRACKED})
    return root


# The folder each task's fixtures are made in, inside the run's folder (:func:`fixtures`).
TASK_FOLDER = "task"


def check_run_folder(chosen: Path | None) -> None:
    """A :class:`BenchError` unless ``chosen`` (``--fixtures-dir``) may hold a run's fixtures:
    missing, or a folder holding nothing but the :data:`TASK_FOLDER` a run left. Anything else
    in it is the user's, which a run must not remove."""
    if chosen is None or not chosen.exists():
        return
    if not chosen.is_dir():
        raise BenchError(f"--fixtures-dir {chosen} is not a folder")
    others = sorted(p.name for p in chosen.iterdir() if p.name != TASK_FOLDER)
    if others:
        raise BenchError(
            f"--fixtures-dir {chosen} holds {', '.join(others[:3])}"
            + (" …" if len(others) > 3 else "")
            + ": give a new or empty folder (a run makes and removes only "
            f"{chosen / TASK_FOLDER} in it)"
        )


@contextmanager
def run_folder(chosen: Path | None) -> Iterator[Path]:
    """The folder a run makes its tasks' fixtures in: ``chosen`` (made if missing, checked by
    :func:`check_run_folder`, kept after the run), or a new temporary one, removed after it."""
    if chosen is None:
        with tempfile.TemporaryDirectory(
            prefix="weavehost-tasks-", ignore_cleanup_errors=True
        ) as made:
            yield Path(made)
        return
    check_run_folder(chosen)
    try:
        chosen.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise BenchError(f"cannot create --fixtures-dir {chosen}: {exc.strerror}") from exc
    yield chosen


@contextmanager
def fixtures(names: set[str], under: Path | None = None) -> Iterator[dict[str, str]]:
    """The fixture folders ``names`` (of :data:`FIXTURE_NAMES`), made fresh: ``{name: path}``;
    removed on exit. In a new temporary folder, or (``under``, a folder of the caller's) in
    ``under/task``, the same paths each time: a run's variants of one task then see the same
    paths in the same tool results, so their answers compare (bench-agent's same text)."""
    if not names:
        yield {}
        return
    if under is None:
        with tempfile.TemporaryDirectory(
            prefix="weavehost-tasks-", ignore_cleanup_errors=True
        ) as t:
            yield _made(names, Path(t))
        return
    place = under / TASK_FOLDER
    shutil.rmtree(place, ignore_errors=True)  # a run stopped inside a task left it
    place.mkdir(parents=True)
    try:
        yield _made(names, place)
    finally:
        shutil.rmtree(place, ignore_errors=True)


def _made(names: set[str], folder: Path) -> dict[str, str]:
    """The fixtures ``names`` built in ``folder``."""
    base = folder.resolve()  # the servers see real paths (macOS's /private/var)
    made: dict[str, str] = {}
    if "files" in names:
        made["files"] = str(shutil.copytree(FILES, base / "shared"))
    if "repo" in names:
        made["repo"] = str(build_repository(base / "garden"))
    return made
