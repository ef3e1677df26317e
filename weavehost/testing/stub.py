"""The stub MCP server: a real server process that serves a spec (see ``stub-spec.schema.json``).

Stage: testing. ``python -m weavehost.testing.stub SPEC [--record FILE] [--http --port N]`` (or
``weavehost stub``) serves one validated spec over stdio, or streamable HTTP on 127.0.0.1. It is
the SDK's low-level ``Server`` with handlers that read the spec, so it speaks both protocol eras
as the client opens (``"protocol": "legacy"``: the ``initialize`` handshake only, over stdio).

What a tool does, in order, on each call (a call is counted once, not again when the client
retries it with the answers to an ``input_required`` result):

1. ``crash_after: N``: the process exits (code :data:`CRASH_EXIT_CODE`) on call N+1, before
   answering; ``hang``: never answers (until the client cancels);
2. ``garbage_stdout``: non-JSON lines on stdout ahead of the answer (stdio only);
3. ``progress: n``: n ``notifications/progress`` (when the client asked for progress), then
   ``delay_s``;
4. ``ask_model`` / ``ask_user``: a sampling / elicitation request back to the client (mid-call
   in the handshake era, an ``input_required`` result in the 2026-07-28 era); the answer is
   ``{{answer}}``, ``{{action}}`` and ``{{content}}`` to the response template;
5. the response: ``text`` (``{{name}}`` replaced by that argument; a missing one is an
   ``isError`` result that says so), ``error``, ``structuredContent``, or ``sequence`` (one per
   call, the last one repeating); ``oversized_result: N`` replaces it with N bytes of text;
6. ``tools_change_after: N``: after call N the spec's ``tools_change`` is applied and the client
   told (``notifications/tools/list_changed``, or the ``subscriptions/listen`` stream).

A tool's own ``behaviour`` counts its own calls; the server's ``behaviour`` counts all of them
(a key in the tool's wins). With ``--record FILE`` every message the stub receives (requests
and notifications: ``method``, ``params``, ``id``, ``time``) is appended to FILE as one JSON line,
flushed before it is handled, so a crash loses nothing.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import re
import socket
import sys
import threading
import time
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TextIO

import anyio
import mcp_types as types
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ToolsListChanged
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from weavehost.errors import StubSpecError
from weavehost.testing.spec import load_spec, spec_name

__all__ = ["CRASH_EXIT_CODE", "HOST", "MCP_PATH", "StubApp", "main", "serve"]

CRASH_EXIT_CODE = 3  # the exit code of a ``crash_after`` crash, told apart from a failure (1)
HOST = "127.0.0.1"
MCP_PATH = "/mcp"
DEFAULT_GARBAGE_LINES = 2  # ``garbage_stdout: true``
DEFAULT_MAX_TOKENS = 64  # ``ask_model`` without ``maxTokens``
ASK_MODEL, ASK_USER = "ask_model", "ask_user"  # the keys of the input_required requests
_TEMPLATE = re.compile(r"\{\{\s*([A-Za-z_][\w.-]*)\s*\}\}")


class _MissingValue(Exception):
    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name


class _Wire:
    """The stdio wire, written a whole line at a time so garbage never tears a message.

    The SDK's stdio transport writes each message, then flushes; both calls come here, and
    ``write`` sends the line at once under the lock a garbage line takes too.
    """

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._lock = threading.Lock()

    def _write_all(self, data: bytes) -> None:
        with self._lock:
            view = memoryview(data)
            while view:
                view = view[os.write(self._fd, view) :]

    async def write(self, text: str) -> None:
        await anyio.to_thread.run_sync(self._write_all, text.encode("utf-8"))

    async def flush(self) -> None:
        return None

    async def garbage(self, n: int) -> None:
        lines = "".join(f"stub garbage line {i + 1}: this is not JSON\n" for i in range(n))
        await anyio.to_thread.run_sync(self._write_all, lines.encode("utf-8"))


class _Recorder:
    """Server middleware: one JSON line per inbound message, flushed before it is handled."""

    def __init__(self, out: TextIO) -> None:
        self._out = out

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> Any:
        entry = {
            "method": ctx.method,
            "params": dict(ctx.params) if ctx.params is not None else None,
            "id": ctx.request_id,
            "time": time.time(),
        }
        self._out.write(json.dumps(entry, default=str) + "\n")
        self._out.flush()
        return await call_next(ctx)


class StubApp:
    """One stub server's state (its current tools and call counts) and its SDK ``Server``."""

    def __init__(self, spec: Mapping[str, Any], *, record: TextIO | None = None) -> None:
        self.spec = spec
        self.tools: dict[str, dict[str, Any]] = {t["name"]: dict(t) for t in spec.get("tools", [])}
        self.calls = Counter[str]()
        self.total_calls = 0
        self.changed = False
        self.wire: _Wire | None = None
        self.bus = InMemorySubscriptionBus()
        self.server: Server[Any] = Server(
            spec_name(spec),
            version=str(spec.get("version", "0")),
            instructions=spec.get("instructions"),
            get_tool_input_schema=lambda name: self.tools.get(name, {}).get("inputSchema"),
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
            on_list_resources=self._list_resources if spec.get("resources") else None,
            on_read_resource=self._read_resource if spec.get("resources") else None,
            on_list_prompts=self._list_prompts if spec.get("prompts") else None,
            on_get_prompt=self._get_prompt if spec.get("prompts") else None,
            on_subscriptions_listen=ListenHandler(self.bus),
        )
        if record is not None:
            self.server.middleware.append(_Recorder(record))

    def init_options(self) -> Any:
        return self.server.create_initialization_options(NotificationOptions(tools_changed=True))

    # ----------------------------------------------------------------------- tools

    async def _list_tools(self, ctx: Any, params: Any) -> types.ListToolsResult:
        # SDK models, not dicts: the SDK fills the per-era fields (ttlMs, cacheScope) of lists.
        tools = [_model(types.Tool, _wire_tool(t)) for t in self.tools.values()]
        return types.ListToolsResult(tools=tools)

    async def _call_tool(
        self, ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> HandlerResult:
        tool = self.tools.get(params.name)
        if tool is None:
            unknown = f"unknown tool {params.name!r}; have: {', '.join(self.tools) or '-'}"
            return _model(types.CallToolResult, _error(unknown))
        args = dict(params.arguments or {})
        first_round = params.input_responses is None and params.request_state is None
        if first_round:
            self.calls[tool["name"]] += 1
            self.total_calls += 1
            await self._misbehave(ctx, tool)
        result = await self._result(ctx, tool, args, params.input_responses)
        if isinstance(result, types.InputRequiredResult):
            return result
        size = self._setting(tool, "oversized_result")[0]
        if size:
            result = {"content": [{"type": "text", "text": "x" * int(size)}], "isError": False}
        await self._maybe_change_tools(ctx, tool)
        return _model(types.CallToolResult, result)

    def _setting(self, tool: Mapping[str, Any], key: str) -> tuple[Any, int]:
        """A behaviour and the call count it reads: the tool's own, else the server's."""
        own = tool.get("behaviour") or {}
        if key in own:
            return own[key], self.calls[tool["name"]]
        return (self.spec.get("behaviour") or {}).get(key), self.total_calls

    async def _misbehave(
        self, ctx: ServerRequestContext[Any, Any], tool: Mapping[str, Any]
    ) -> None:
        crash_after, count = self._setting(tool, "crash_after")
        if crash_after is not None and count > crash_after:
            os._exit(CRASH_EXIT_CODE)  # on purpose: no cleanup, no answer, as a real crash
        if self._setting(tool, "hang")[0]:
            await anyio.sleep_forever()
        garbage = self._setting(tool, "garbage_stdout")[0]
        if garbage and self.wire is not None:
            await self.wire.garbage(DEFAULT_GARBAGE_LINES if garbage is True else int(garbage))
        steps = self._setting(tool, "progress")[0] or 0
        for i in range(1, steps + 1):
            await ctx.session.report_progress(i, steps, f"step {i} of {steps}")
        delay = self._setting(tool, "delay_s")[0]
        if delay:
            await anyio.sleep(delay)

    async def _maybe_change_tools(
        self, ctx: ServerRequestContext[Any, Any], tool: Mapping[str, Any]
    ) -> None:
        after, count = self._setting(tool, "tools_change_after")
        if after is None or self.changed or count < after:
            return
        self.changed = True
        change = self.spec["tools_change"]
        for name in change.get("remove", []):
            self.tools.pop(name, None)
        for update in change.get("update", []):
            if update["name"] in self.tools:
                self.tools[update["name"]].update(copy.deepcopy(update))
        for added in change.get("add", []):
            self.tools[added["name"]] = copy.deepcopy(added)
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            await self.bus.publish(ToolsListChanged())
        else:
            await ctx.session.send_tool_list_changed()

    async def _result(
        self,
        ctx: ServerRequestContext[Any, Any],
        tool: Mapping[str, Any],
        args: Mapping[str, Any],
        responses: Mapping[str, Any] | None,
    ) -> dict[str, Any] | types.InputRequiredResult:
        """One round's answer: the response rendered with the arguments and the client's
        answers, an ``input_required`` result that asks for them, or an ``isError`` result
        when a template needs a value the call did not give or the client refused to answer.
        (Those two faults travel as exceptions, so no argument name can be mistaken for one.)"""
        values: dict[str, Any] = dict(args)
        if tool.get(ASK_MODEL) or tool.get(ASK_USER):
            try:
                answers = await self._ask(ctx, tool, args, responses)
            except _MissingValue as missing:
                return _error(_missing_message(tool, missing.name))
            except MCPError as exc:
                return _error(f"the client did not answer: {exc.error.message}")
            if isinstance(answers, types.InputRequiredResult):
                return answers
            values.update(answers)
        return self._respond(tool, values)

    async def _ask(
        self,
        ctx: ServerRequestContext[Any, Any],
        tool: Mapping[str, Any],
        args: Mapping[str, Any],
        responses: Mapping[str, Any] | None,
    ) -> dict[str, Any] | types.InputRequiredResult:
        """The client's answers to ``ask_model`` / ``ask_user`` as template values. Raises
        :class:`_MissingValue` for a prompt or message whose template the arguments do not
        fill, and ``MCPError`` when the client refuses a request (handshake era)."""
        sampling = _sampling_params(tool[ASK_MODEL], args) if tool.get(ASK_MODEL) else None
        form = _form_params(tool[ASK_USER], args) if tool.get(ASK_USER) else None
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            if responses is None:
                requests: dict[str, Any] = {}
                if sampling is not None:
                    requests[ASK_MODEL] = types.CreateMessageRequest(params=sampling)
                if form is not None:
                    requests[ASK_USER] = types.ElicitRequest(params=form)
                return types.InputRequiredResult(input_requests=requests)
            model_reply, user_reply = responses.get(ASK_MODEL), responses.get(ASK_USER)
        else:
            model_reply = user_reply = None
            if sampling is not None:
                model_reply = await ctx.session.create_message(
                    sampling.messages,
                    max_tokens=sampling.max_tokens,
                    system_prompt=sampling.system_prompt,
                    related_request_id=ctx.request_id,
                )
            if form is not None:
                user_reply = await ctx.session.elicit_form(
                    form.message, form.requested_schema, related_request_id=ctx.request_id
                )
        return _answers(model_reply, user_reply)

    def _respond(self, tool: Mapping[str, Any], values: Mapping[str, Any]) -> dict[str, Any]:
        response = tool.get("response")
        if response is None:
            return _default_result(values)
        if "sequence" in response:
            items = response["sequence"]
            response = items[min(self.calls[tool["name"]], len(items)) - 1]
        try:
            return _render_response(response, values)
        except _MissingValue as missing:
            return _error(_missing_message(tool, missing.name))

    # ----------------------------------------------------------------------- resources, prompts

    async def _list_resources(self, ctx: Any, params: Any) -> types.ListResourcesResult:
        fields = ("uri", "name", "title", "description", "mimeType")
        listed = [
            _model(
                types.Resource,
                {k: r[k] for k in fields if k in r} | {"name": r.get("name", r["uri"])},
            )
            for r in self.spec.get("resources", [])
        ]
        return types.ListResourcesResult(resources=listed)

    async def _read_resource(self, ctx: Any, params: types.ReadResourceRequestParams) -> Any:
        for resource in self.spec.get("resources", []):
            if resource["uri"] == str(params.uri):
                content = {"uri": resource["uri"], "text": resource["text"]}
                if "mimeType" in resource:
                    content["mimeType"] = resource["mimeType"]
                return _model(types.ReadResourceResult, {"contents": [content]})
        raise MCPError(types.INVALID_PARAMS, f"no resource {params.uri!r}")

    async def _list_prompts(self, ctx: Any, params: Any) -> types.ListPromptsResult:
        fields = ("name", "title", "description", "arguments")
        listed = [
            _model(types.Prompt, {k: p[k] for k in fields if k in p}) for p in self.spec["prompts"]
        ]
        return types.ListPromptsResult(prompts=listed)

    async def _get_prompt(self, ctx: Any, params: types.GetPromptRequestParams) -> Any:
        prompt = next((p for p in self.spec["prompts"] if p["name"] == params.name), None)
        if prompt is None:
            raise MCPError(types.INVALID_PARAMS, f"no prompt {params.name!r}")
        args = dict(params.arguments or {})
        for argument in prompt.get("arguments", []):
            if argument.get("required") and argument["name"] not in args:
                raise MCPError(
                    types.INVALID_PARAMS,
                    f"prompt {params.name!r} needs argument {argument['name']!r}",
                )
        messages = prompt.get("messages") or [{"role": "user", "text": prompt["text"]}]
        try:
            rendered = [
                {"role": m["role"], "content": {"type": "text", "text": _render(m["text"], args)}}
                for m in messages
            ]
        except _MissingValue as missing:
            raise MCPError(
                types.INVALID_PARAMS, f"prompt {params.name!r} needs argument {missing.name!r}"
            ) from None
        result = {"messages": rendered}
        if "description" in prompt:
            result["description"] = prompt["description"]
        return _model(types.GetPromptResult, result)


# --------------------------------------------------------------------------- values


def _model(cls: Any, wire: Mapping[str, Any]) -> Any:
    """An SDK model from its wire (camelCase) form."""
    return cls.model_validate(wire, by_name=False)


def _wire_tool(tool: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {
        "name": tool["name"],
        "description": tool.get("description", ""),
        "inputSchema": tool.get("inputSchema") or {"type": "object", "properties": {}},
    }
    for key in ("title", "outputSchema", "annotations"):
        if key in tool:
            out[key] = tool[key]
    return out


def _error(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "isError": True}


def _missing_message(tool: Mapping[str, Any], name: str) -> str:
    return f"stub tool {tool['name']!r}: its template needs {name!r}, which the call did not give"


def _render(text: str, values: Mapping[str, Any]) -> str:
    def value(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in values:
            raise _MissingValue(name)
        found = values[name]
        return found if isinstance(found, str) else json.dumps(found)

    return _TEMPLATE.sub(value, text)


def _render_deep(value: Any, values: Mapping[str, Any]) -> Any:
    if isinstance(value, str):
        return _render(value, values)
    if isinstance(value, list):
        return [_render_deep(v, values) for v in value]
    if isinstance(value, dict):
        return {k: _render_deep(v, values) for k, v in value.items()}
    return value


def _render_response(response: Mapping[str, Any], values: Mapping[str, Any]) -> dict[str, Any]:
    if "error" in response:
        return _error(_render(response["error"], values))
    result: dict[str, Any] = {"isError": False}
    if "structuredContent" in response:
        structured = _render_deep(response["structuredContent"], values)
        result["structuredContent"] = structured
        text = _render(response["text"], values) if "text" in response else json.dumps(structured)
    else:
        text = _render(response.get("text", "ok"), values)
    result["content"] = [{"type": "text", "text": text}]
    return result


def _default_result(values: Mapping[str, Any]) -> dict[str, Any]:
    """No ``response`` in the spec: the client's answers (as JSON when there is more than the
    model's text), or ``ok``."""
    answers = {k: values[k] for k in ("answer", "action", "content") if k in values}
    if list(answers) == ["answer"]:
        text = answers["answer"]
    elif answers:
        text = json.dumps(answers)
    else:
        text = "ok"
    return {"content": [{"type": "text", "text": text}], "isError": False}


def _sampling_params(ask: Mapping[str, Any], args: Mapping[str, Any]) -> Any:
    text = types.TextContent(type="text", text=_render(ask["prompt"], args))
    return types.CreateMessageRequestParams(
        messages=[types.SamplingMessage(role="user", content=text)],
        max_tokens=int(ask.get("maxTokens", DEFAULT_MAX_TOKENS)),
        system_prompt=ask.get("systemPrompt"),
    )


def _form_params(ask: Mapping[str, Any], args: Mapping[str, Any]) -> Any:
    return types.ElicitRequestFormParams(
        message=_render(ask["message"], args), requested_schema=ask["schema"]
    )


def _answers(model_reply: Any, user_reply: Any) -> dict[str, Any]:
    values: dict[str, Any] = {}
    if model_reply is not None:
        content = getattr(model_reply, "content", None)
        blocks = content if isinstance(content, list) else [content]
        text = "".join(getattr(b, "text", "") or "" for b in blocks if b is not None)
        values["answer"] = text
        values["model"] = getattr(model_reply, "model", "")
    if user_reply is not None:
        values["action"] = getattr(user_reply, "action", "cancel")
        values["content"] = getattr(user_reply, "content", None)  # a template writes it as JSON
    return values


# --------------------------------------------------------------------------- serving


async def serve(
    spec: Mapping[str, Any],
    *,
    record: TextIO | None = None,
    http: bool = False,
    port: int = 0,
    port_file: Path | None = None,
    announce: TextIO | None = None,
) -> None:
    """Serve ``spec`` until the client goes (stdio) or the process is stopped (HTTP)."""
    app = StubApp(spec, record=record)
    if http:
        await _serve_http(app, port, port_file, announce)
    else:
        await _serve_stdio(app, legacy=spec.get("protocol") == "legacy")


async def _serve_stdio(app: StubApp, *, legacy: bool) -> None:
    from mcp.server.runner import serve_dual_era_loop, serve_loop
    from mcp.server.stdio import stdio_server

    # Own the wire: a private copy of fd 1 for messages (and garbage, a line at a time), with
    # fd 1 itself pointed at stderr so a stray print never reaches the client.
    wire_fd = os.dup(1)
    os.dup2(2, 1)
    app.wire = _Wire(wire_fd)
    loop = serve_loop if legacy else serve_dual_era_loop
    server = app.server
    async with (
        stdio_server(stdout=app.wire) as (read, write),  # type: ignore[arg-type]
        server.lifespan(server) as state,
    ):
        await loop(server, read, write, lifespan_state=state, init_options=app.init_options())


async def _serve_http(
    app: StubApp, port: int, port_file: Path | None, announce: TextIO | None
) -> None:
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((HOST, port))
    except OSError as exc:
        raise StubSpecError(f"--port {port}: cannot listen on {HOST}:{port}: {exc}") from exc
    sock.listen(128)  # from here on connections queue, so the URL can be announced at once
    url = f"http://{HOST}:{sock.getsockname()[1]}{MCP_PATH}"
    if port_file is not None:
        partial = port_file.with_name(port_file.name + ".partial")
        partial.write_text(url + "\n")
        partial.replace(port_file)  # atomic: a reader never sees half a URL
    if announce is not None:
        announce.write(f"weavehost stub {app.server.name!r} serving {url}\n")
        announce.flush()
    starlette = app.server.streamable_http_app(streamable_http_path=MCP_PATH, host=HOST)
    config = uvicorn.Config(starlette, log_level="warning", lifespan="on")
    await uvicorn.Server(config).serve(sockets=[sock])


def run(
    spec_path: str,
    *,
    record: str | None = None,
    http: bool = False,
    port: int = 0,
    port_file: str | None = None,
) -> None:
    """Load ``spec_path`` and serve it (blocking). Raises :class:`StubSpecError` for a bad spec."""
    spec = load_spec(spec_path)
    out = open(record, "a", encoding="utf-8") if record else None  # noqa: SIM115 - lives as long as the server
    try:
        anyio.run(
            lambda: serve(
                spec,
                record=out,
                http=http,
                port=port,
                port_file=Path(port_file) if port_file else None,
                announce=sys.stdout if http else None,
            )
        )
    except KeyboardInterrupt:
        pass
    finally:
        if out is not None:
            out.close()


def main(argv: list[str] | None = None) -> int:
    """``python -m weavehost.testing.stub``: a bad spec is one ``Error:`` line and exit 2."""
    parser = argparse.ArgumentParser(
        prog="python -m weavehost.testing.stub", description="Serve a stub MCP server spec."
    )
    parser.add_argument("spec", help="the spec file (.json, or .yaml with PyYAML)")
    parser.add_argument("--record", help="append every message received to FILE (JSON lines)")
    parser.add_argument("--http", action="store_true", help="streamable HTTP on 127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="HTTP port (0: a free one)")
    parser.add_argument("--port-file", help="write the HTTP URL to FILE once listening")
    ns = parser.parse_args(argv)
    try:
        run(ns.spec, record=ns.record, http=ns.http, port=ns.port, port_file=ns.port_file)
    except StubSpecError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return exc.exit_code
    return 0


if __name__ == "__main__":
    sys.exit(main())
