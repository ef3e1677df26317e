"""An SDK ``MCPServer`` that uses every client feature, in whichever protocol era it is spoken to.

Test fixture for the pool's client features. :func:`build` returns a fresh server (tests connect
to it in-process); run as a script it serves stdio in both eras (the client's first request
decides), or with ``--legacy`` only the ``initialize`` handshake, as a pre-2026 server would.

    python features_server.py [--legacy]

Tools: ``ask_model`` (samples the client's model: system prompt, temperature, stop sequences,
``max_tokens``), ``ask_model_with_tools`` (offers the model a ``lookup`` tool), ``ask_model_about_image``
(sends image content), ``ask_user`` (a form: name, age), ``visit`` (a URL to open), ``roots``,
``steps`` (``n`` progress notifications and log lines), ``wait`` (writes ``started`` to
``record``, reports progress once, and waits; on cancellation appends ``cancelled``),
``flip`` (adds a tool and says the list changed), ``client_capabilities``. Resources:
``note://readme`` (text), ``data://logo.png`` (a blob) and the template ``note://{name}``.
Prompts: ``greet(name)`` and ``with_context`` (an embedded resource and an image).
"""

# ruff: noqa: E501 - tool descriptions read best one line each

from __future__ import annotations

import base64
import json
import sys
import warnings
from typing import Annotated

import anyio
from mcp.server.mcpserver import (
    Context,
    Elicit,
    ElicitationResult,
    ListRoots,
    MCPServer,
    Resolve,
    Sample,
)
from mcp.server.mcpserver.prompts.base import AssistantMessage, UserMessage
from mcp_types import (
    CreateMessageResult,
    CreateMessageResultWithTools,
    ElicitRequest,
    ElicitRequestURLParams,
    EmbeddedResource,
    ImageContent,
    InputRequiredResult,
    ListRootsResult,
    SamplingMessage,
    TextContent,
    TextResourceContents,
    Tool,
    ToolChoice,
)
from pydantic import BaseModel

# The deprecated logging capability is what this fixture exercises on purpose.
warnings.filterwarnings("ignore", message="The logging capability is deprecated")

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)


class Person(BaseModel):
    name: str
    age: int = 30


def _text(prompt: str) -> SamplingMessage:
    return SamplingMessage(role="user", content=TextContent(type="text", text=prompt))


def want_answer(prompt: str, max_tokens: int = 20) -> Sample:
    return Sample([_text(prompt)], max_tokens=max_tokens, system_prompt="Answer briefly.",
                  temperature=0.2, stop_sequences=["END"])  # fmt: skip


def want_tool_call(prompt: str) -> Sample:
    lookup = Tool(name="lookup", description="Look a word up.",
                  input_schema={"type": "object", "properties": {"word": {"type": "string"}}, "required": ["word"]})  # fmt: skip
    return Sample(
        [_text(prompt)], max_tokens=50, tools=[lookup], tool_choice=ToolChoice(mode="auto")
    )


def want_image_read() -> Sample:
    image = ImageContent(type="image", data=base64.b64encode(PNG).decode(), mime_type="image/png")
    return Sample([SamplingMessage(role="user", content=image)], max_tokens=20)


def want_person() -> Elicit[Person]:
    return Elicit("Who is asking?", Person)


def want_roots() -> ListRoots:
    return ListRoots()


def build() -> MCPServer:
    server = MCPServer("features", log_level="WARNING")

    @server.tool()
    async def ask_model(
        prompt: str,
        reply: Annotated[CreateMessageResult, Resolve(want_answer)],
        max_tokens: int = 20,
    ) -> str:
        """Ask the client's model."""
        assert isinstance(reply.content, TextContent)
        return f"{reply.model} said: {reply.content.text} ({reply.stop_reason})"

    @server.tool()
    async def ask_model_with_tools(
        prompt: str, reply: Annotated[CreateMessageResultWithTools, Resolve(want_tool_call)]
    ) -> str:
        """Ask the client's model, offering it a tool."""
        blocks = reply.content if isinstance(reply.content, list) else [reply.content]
        return json.dumps(
            {
                "stop": reply.stop_reason,
                "blocks": [b.model_dump(mode="json", exclude_none=True) for b in blocks],
            }
        )

    @server.tool()
    async def ask_model_about_image(
        reply: Annotated[CreateMessageResult, Resolve(want_image_read)],
    ) -> str:
        """Ask the client's model to look at an image."""
        return "the model saw it"

    @server.tool()
    async def ask_user(person: Annotated[ElicitationResult[Person], Resolve(want_person)]) -> str:
        """Ask the user for their name and age."""
        if person.action == "accept":
            return f"hello {person.data.name}, {person.data.age}"
        return f"the user chose {person.action}"

    @server.tool()
    async def visit(url: str, ctx: Context) -> str | InputRequiredResult:
        """Ask the user to open a URL."""
        message = "Sign in to continue."
        if not _modern(ctx):
            result = await ctx.elicit_url(message, url, "sign-in-1")
            return f"url elicitation: {result.action}"
        answer = (ctx.input_responses or {}).get("visit")
        if answer is None:
            params = ElicitRequestURLParams(
                mode="url", message=message, url=url, elicitation_id="sign-in-1"
            )
            return InputRequiredResult(
                input_requests={"visit": ElicitRequest(params=params)}, request_state="asked"
            )
        return f"url elicitation: {getattr(answer, 'action', '?')}"

    @server.tool()
    async def roots(listed: Annotated[ListRootsResult, Resolve(want_roots)]) -> str:
        """The client's roots, one URI a line."""
        return "\n".join(str(root.uri) for root in listed.roots)

    @server.tool()
    async def steps(n: int, ctx: Context) -> str:
        """Report n steps of progress, logging each."""
        for i in range(1, n + 1):
            await ctx.report_progress(i, n, f"step {i}")
            await ctx.info(f"did step {i}")
        await ctx.debug("too fine to be asked for")
        return f"{n} steps"

    @server.tool()
    async def wait(record: str, ctx: Context) -> str:
        """Record the start, then wait until cancelled (and record that)."""
        path = anyio.Path(record)
        await path.write_text("started\n")
        try:
            await ctx.report_progress(0, None, "waiting")
            await anyio.sleep_forever()
        except anyio.get_cancelled_exc_class():
            with anyio.CancelScope(shield=True):
                await path.write_text("started\ncancelled\n")
            raise
        return "never"

    @server.tool()
    async def flip(ctx: Context) -> str:
        """Add a tool, and tell the client the list changed."""
        server.add_tool(lambda: "new", name="added", description="Added by flip.")
        if _modern(ctx):
            await ctx.notify_tools_changed()
        else:
            await ctx.session.send_tool_list_changed()
        return "flipped"

    @server.tool()
    async def client_capabilities(ctx: Context) -> str:
        """The capabilities the client declared."""
        declared = ctx.client_capabilities
        return json.dumps(
            declared.model_dump(mode="json", by_alias=True, exclude_none=True) if declared else None
        )

    @server.resource(
        "note://readme",
        name="readme",
        title="Read me",
        description="The notes.",
        mime_type="text/plain",
    )
    def readme() -> str:
        return "Remember the milk."

    @server.resource("data://logo.png", name="logo", mime_type="image/png")
    def logo() -> bytes:
        return PNG

    @server.resource("note://{name}", name="note", description="A note by name.")
    def note(name: str) -> str:
        return f"note {name}"

    @server.prompt()
    def greet(name: str) -> str:
        """Greet someone."""
        return f"Say hello to {name}."

    @server.prompt()
    def with_context() -> list:
        """A prompt with a resource and an image."""
        notes = TextResourceContents(
            uri="note://readme", mime_type="text/plain", text="Remember the milk."
        )
        image = ImageContent(
            type="image", data=base64.b64encode(PNG).decode(), mime_type="image/png"
        )
        return [
            UserMessage(EmbeddedResource(type="resource", resource=notes)),
            UserMessage(image),
            AssistantMessage("Noted."),
        ]

    return server


def _modern(ctx: Context) -> bool:
    return (ctx.protocol_version or "") >= "2026-07-28"


async def _serve_handshake_only(server: MCPServer) -> None:
    from mcp.server.runner import serve_loop
    from mcp.server.stdio import stdio_server

    lowlevel = server._lowlevel_server
    async with stdio_server() as (read, write), lowlevel.lifespan(lowlevel) as state:
        options = lowlevel.create_initialization_options()
        await serve_loop(lowlevel, read, write, lifespan_state=state, init_options=options)


if __name__ == "__main__":
    if "--legacy" in sys.argv:
        anyio.run(_serve_handshake_only, build())
    else:
        build().run()
