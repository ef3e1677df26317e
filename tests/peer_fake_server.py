"""A stand-in for a peer's server process (``bench-agent --peer``): a script, run as
``python tests/peer_fake_server.py ARGS... --port N`` (the other arguments, a real server's, are
ignored), serving :class:`~tests.remote_fake_server.FakeOpenAI` on that port until SIGTERM. How
it behaves is set by the environment:

- ``FAKE_PEER=ready`` (default): ``GET /v1/models`` answers 200; the chat completions are, in
  turn, a streamed call of ``get_current_weather`` for Paris and an answer with its weather.
- ``FAKE_PEER=never``: ``GET /v1/models`` answers 503, forever (never ready).
- ``FAKE_PEER=exit``: it prints a line and exits with code 3 before listening.
- ``FAKE_PEER_CHILD=1``: it first starts a child in its process group that ignores SIGTERM
  (what a server's worker left behind looks like).

It prints its pid and arguments first.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.remote_fake_server import DONE, FakeOpenAI, Reply, chunk, streamed_call  # noqa: E402

STUBBORN_CHILD = (
    "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(120)"
)
NEVER = 10**9  # models requests answered 503


def main() -> None:
    mode = os.environ.get("FAKE_PEER", "ready")
    print(f"fake peer: {mode}, pid {os.getpid()}, argv {sys.argv[1:]}", flush=True)
    if os.environ.get("FAKE_PEER_CHILD"):
        subprocess.Popen([sys.executable, "-c", STUBBORN_CHILD])
    if mode == "exit":
        print("fake peer: cannot load the model", flush=True)
        sys.exit(3)
    call = Reply(events=[*streamed_call("get_current_weather", '{"city": "Paris"}'),
                         chunk(finish="tool_calls"), DONE])  # fmt: skip
    answer = Reply(events=[chunk(text="It is -2.9 C in Paris."), chunk(finish="stop"), DONE])
    port = int(sys.argv[sys.argv.index("--port") + 1])
    failures = NEVER if mode == "never" else 0
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    with FakeOpenAI([call, answer], models_failures=failures, port=port):
        while True:
            signal.pause()


if __name__ == "__main__":
    main()
