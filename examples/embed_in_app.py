"""Embedding weavehost in another program: one-shot questions and a multi-turn session.

Run from the repository root:  python examples/embed_in_app.py

The host starts the example weather server over stdio, loads the embedded model (or the GGUF in
WEAVEHOST_MODEL), and yields the same events `weavehost run --json` prints.
"""

from __future__ import annotations

from pathlib import Path

import anyio

from weavehost import Host
from weavehost.mcp.executor import ApprovalRequest

TOOLS = Path(__file__).resolve().parents[1] / "tools"


class AskNobody:
    """An approver for an app without a dialog: refuse anything that needs approval."""

    async def approve(self, request: ApprovalRequest) -> bool:
        print(f"[refused] {request.spec.qualified_name}({dict(request.arguments)})")
        return False


async def main() -> None:
    async with Host(
        servers=[str(TOOLS / "weather.py")],
        trust=["weather"],  # its read-only tools may start on the provisional call
        approver=AskNobody(),
        max_steps=3,
    ) as host:
        # One question, one fresh conversation.
        async for event in host.run("What is the weather in Paris?"):
            if event.type == "text":
                print(event["text"], end="", flush=True)
            elif event.type in ("provisional_call", "final_call", "tool_result"):
                print(f"\n[{event.type}] {event.to_json()}")
        print()

        # Several turns: the conversation stays in the model's KV cache between them.
        session = host.session()
        for prompt in ("What is the weather in Oslo?", "And in Lima?"):
            async for event in session.run(prompt):
                if event.type == "timings":
                    print(
                        f"[step {event['step']}] prefilled {event['prefilled_tokens']} new "
                        f"tokens, reused {event['reused_tokens']}"
                    )
                elif event.type == "tool_result":
                    print(f"[tool] {event['text']}")


if __name__ == "__main__":
    anyio.run(main)
