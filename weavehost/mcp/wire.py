"""Wire: MCP SDK types to and from the client-feature records of :mod:`~weavehost.mcp.features`.

Stage: servers (under :class:`~weavehost.mcp.servers.ServerPool`). The pool hands the callbacks
of one :class:`Responder` to each server's ``mcp.Client``; the same responder answers the input
requests of a 2026-07-28 ``input_required`` result, so both protocol eras reach the sampler,
the elicitor and the roots through one conversion.

Invariants:

* No SDK type leaves this module towards a :class:`~weavehost.mcp.features.Sampler` or
  :class:`~weavehost.mcp.features.Elicitor`, and none of theirs reaches the wire unconverted.
* Image and audio content in a sampling request is refused before the sampler sees it, with an
  error naming the server and the content type.
* A refusal or a failure of the sampler or elicitor never ends the connection: the callbacks
  answer the server with ``ErrorData`` carrying the message (handshake era), and
  :meth:`Responder.answer` raises :class:`~weavehost.errors.ClientFeatureError` (modern era,
  where an input response cannot carry an error). Cancellation is never swallowed.
* Server log lines below the level asked for never reach ``features.on_log``.
* Resource and prompt contents become text: a blob is described by its MIME type and size,
  never decoded into the text; an image or audio block is described, not inlined.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, cast

import anyio
import mcp_types as types
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from weavehost.errors import ClientFeatureError, ServerError
from weavehost.mcp.features import (
    ClientFeatures,
    ElicitationReply,
    ElicitationRequest,
    LogMessage,
    Progress,
    PromptArgument,
    PromptInfo,
    PromptMessage,
    ResourceInfo,
    ResourceText,
    SamplingMessage,
    SamplingReply,
    SamplingRequest,
    ToolUse,
)

__all__ = [
    "Responder",
    "all_pages",
    "blob_description",
    "check_form_schema",
    "form_choices",
    "liveness",
    "progress_callback",
    "prompt_infos",
    "prompt_messages",
    "resource_infos",
    "resource_texts",
    "sampling_reply",
    "sampling_request",
]

logger = logging.getLogger(__name__)

FEATURE_ERROR_CODE = types.INVALID_REQUEST  # the JSON-RPC code a refused sampling/elicitation gets
LOG_LEVELS: tuple[types.LoggingLevel, ...] = (
    "debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"
)  # fmt: skip

INPUT_STATE_ONLY_DELAY = 0.05  # an input_required result that asks nothing: wait, then retry
MAX_LIST_PAGES = 100  # a paginator that never ends cannot hang a list walk

SamplingResult = types.CreateMessageResult | types.CreateMessageResultWithTools


# --------------------------------------------------------------------------- sampling


def sampling_request(server: str, params: types.CreateMessageRequestParams) -> SamplingRequest:
    """A ``sampling/createMessage`` as weavehost's model is asked it; refuses what it can't read."""
    messages = tuple(_sampling_message(server, m) for m in params.messages)
    tools = tuple(
        t.model_dump(by_alias=True, mode="json", exclude_none=True) for t in params.tools or ()
    )
    choice = params.tool_choice.mode if params.tool_choice is not None else None
    return SamplingRequest(
        server=server,
        messages=messages,
        max_tokens=params.max_tokens,
        system_prompt=params.system_prompt,
        stop_sequences=tuple(params.stop_sequences or ()),
        temperature=params.temperature,
        tools=tools,
        tool_choice=choice,
    )


def _sampling_message(server: str, message: types.SamplingMessage) -> SamplingMessage:
    blocks = message.content if isinstance(message.content, list) else [message.content]
    texts: list[str] = []
    uses: list[ToolUse] = []
    results: list[tuple[str, str]] = []
    for block in blocks:
        if isinstance(block, types.TextContent):
            texts.append(block.text)
        elif isinstance(block, types.ToolUseContent):
            uses.append(ToolUse(id=block.id, name=block.name, arguments=dict(block.input)))
        elif isinstance(block, types.ToolResultContent):
            results.append((block.tool_use_id, _blocks_text(block.content)))
        else:
            kind = getattr(block, "type", type(block).__name__)
            raise ClientFeatureError(
                f"server {server!r} asked the model to read {kind} content; weavehost's model "
                "reads text only"
            )
    return SamplingMessage(
        role=message.role, text="\n".join(texts), tool_uses=tuple(uses), tool_results=tuple(results)
    )


def sampling_reply(reply: SamplingReply) -> SamplingResult:
    """The model's answer as the result a server expects: text, or ``tool_use`` blocks."""
    if not reply.tool_uses:
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text=reply.text),
            model=reply.model,
            stop_reason=reply.stop_reason,
        )
    blocks: list[Any] = [types.TextContent(type="text", text=reply.text)] if reply.text else []
    blocks.extend(
        types.ToolUseContent(type="tool_use", id=u.id, name=u.name, input=dict(u.arguments))
        for u in reply.tool_uses
    )
    return types.CreateMessageResultWithTools(
        role="assistant", content=blocks, model=reply.model, stop_reason="toolUse"
    )


# --------------------------------------------------------------------------- elicitation


def elicitation_request(
    server: str, params: types.ElicitRequestFormParams | types.ElicitRequestURLParams
) -> ElicitationRequest:
    if isinstance(params, types.ElicitRequestURLParams):
        return ElicitationRequest(
            server=server,
            message=params.message,
            mode="url",
            url=params.url,
            elicitation_id=params.elicitation_id,
        )
    schema = dict(params.requested_schema)
    check_form_schema(server, schema)
    return ElicitationRequest(server=server, message=params.message, mode="form", schema=schema)


# What a form may ask (MCP: a flat object of primitive fields; enums single or multi-select).
MAX_FORM_FIELDS = 32
MAX_FORM_BYTES = 16 * 1024
_FIELD_TYPES = frozenset({"string", "number", "integer", "boolean"})


def form_choices(prop: Mapping[str, Any]) -> list[tuple[Any, str]]:
    """A form field's choices as (value, label) pairs: ``enum`` (labelled by ``enumNames``), or
    ``oneOf``/``anyOf`` whose every branch is a ``const`` (labelled by its ``title``); for a
    multi-select array, its items' choices. No choices: ``[]``.

    The one reading of choices: :func:`check_form_schema` accepts a multi-select array only when
    this finds choices in its items, and the terminal offers exactly these."""
    if prop.get("type") == "array":
        items = prop.get("items")
        return _enum_choices(items) if isinstance(items, Mapping) else []
    return _enum_choices(prop)


def _enum_choices(prop: Mapping[str, Any]) -> list[tuple[Any, str]]:
    if isinstance(prop.get("enum"), list):
        names = prop.get("enumNames")
        labels = names if isinstance(names, list) and len(names) == len(prop["enum"]) else None
        return [(v, str(labels[i]) if labels else str(v)) for i, v in enumerate(prop["enum"])]
    for key in ("oneOf", "anyOf"):
        options = prop.get(key)
        if (
            isinstance(options, list)
            and options
            and all(isinstance(o, Mapping) and "const" in o for o in options)
        ):
            return [(o["const"], str(o.get("title") or o["const"])) for o in options]
    return []


def check_form_schema(server: str, schema: Mapping[str, Any]) -> None:
    """Refuse a form no person should be asked to fill: not a flat object of primitive fields
    (strings, numbers, integers, booleans, single- or multi-select enums whose choices
    :func:`form_choices` reads), more than :data:`MAX_FORM_FIELDS` fields, or more than
    :data:`MAX_FORM_BYTES` of schema. The :class:`~weavehost.errors.ClientFeatureError` names
    the field and goes back to the server."""

    def refuse(problem: str) -> ClientFeatureError:
        return ClientFeatureError(f"server {server!r} asked to fill a form that {problem}")

    try:
        size = len(json.dumps(schema))
    except (TypeError, ValueError):
        raise refuse("is not JSON") from None
    if size > MAX_FORM_BYTES:
        raise refuse(f"takes {size} bytes of schema (at most {MAX_FORM_BYTES})")
    if schema.get("type") != "object" or not isinstance(schema.get("properties", {}), Mapping):
        raise refuse("is not an object with properties")
    properties = schema.get("properties", {})
    if len(properties) > MAX_FORM_FIELDS:
        raise refuse(f"has {len(properties)} fields (at most {MAX_FORM_FIELDS})")
    for name, prop in properties.items():
        if not isinstance(prop, Mapping):
            raise refuse(f"describes field {name!r} with {type(prop).__name__}, not an object")
        kind = prop.get("type")
        if kind == "array":
            if form_choices(prop):
                continue  # a multi-select enum
            raise refuse(f"asks field {name!r} as an array that is not a multi-select enum")
        if kind not in _FIELD_TYPES:
            raise refuse(f"asks field {name!r} as {kind!r}; a form holds only primitive fields")


def elicitation_result(reply: ElicitationReply) -> types.ElicitResult:
    accepted = reply.action == "accept" and reply.content is not None
    content = dict(reply.content or {}) if accepted else None
    return types.ElicitResult(action=reply.action, content=cast(Any, content))


# --------------------------------------------------------------------------- the responder


class Responder:
    """Answers one server's sampling, elicitation and roots requests from :class:`ClientFeatures`.

    Its ``*_callback`` methods are what ``mcp.Client`` takes (handshake era: the server sends a
    request mid-call); :meth:`answer` serves the input requests of a modern ``input_required``
    result. Both go through the same conversions.
    """

    def __init__(
        self, server: str, features: ClientFeatures, *, log_level: types.LoggingLevel = "info"
    ) -> None:
        self.server = server
        self.features = features
        self.log_level = log_level

    async def sample(self, params: types.CreateMessageRequestParams) -> SamplingResult:
        sampler = self.features.sampler
        if sampler is None:
            raise ClientFeatureError(f"server {self.server!r} asked for sampling; none is offered")
        return sampling_reply(await sampler.sample(sampling_request(self.server, params)))

    async def elicit(
        self, params: types.ElicitRequestFormParams | types.ElicitRequestURLParams
    ) -> types.ElicitResult:
        elicitor = self.features.elicitor
        if elicitor is None:
            raise ClientFeatureError(
                f"server {self.server!r} asked for elicitation; none is offered"
            )
        return elicitation_result(await elicitor.elicit(elicitation_request(self.server, params)))

    def roots(self) -> types.ListRootsResult:
        return types.ListRootsResult(
            roots=[
                types.Root(uri=cast(Any, path.as_uri()), name=path.name or str(path))
                for path in self.features.roots.paths
            ]
        )

    async def answer(self, request: types.InputRequest) -> types.InputResponse:
        """One input request of an ``input_required`` result; a refusal raises."""
        try:
            if isinstance(request, types.CreateMessageRequest):
                return await self.sample(request.params)
            if isinstance(request, types.ElicitRequest):
                return await self.elicit(request.params)
            return self.roots()
        except ClientFeatureError:
            raise
        except Exception as exc:  # boundary: a sampler or elicitor is outside code
            raise ClientFeatureError(_failure(self.server, request.method, exc)) from exc

    async def complete(
        self,
        what: str,
        send: Callable[[types.InputResponses | None, str | None], Awaitable[Any]],
        *,
        max_rounds: int,
    ) -> Any:
        """``send(None, None)``, then answer each ``input_required`` result and send again.

        The input requests are answered one at a time (a person, or the one local model, answers
        them). A refusal raises :class:`ClientFeatureError` naming ``what``; a server still asking
        after ``max_rounds`` is a :class:`ServerError`.
        """
        result = await send(None, None)
        for _ in range(max_rounds):
            if not isinstance(result, types.InputRequiredResult):
                return result
            responses: types.InputResponses | None = None
            if result.input_requests:
                responses = {}
                for key, request in result.input_requests.items():
                    try:
                        responses[key] = await self.answer(request)
                    except ClientFeatureError as exc:
                        raise ClientFeatureError(
                            f"server {self.server!r}: {what} needed {request.method}, "
                            f"which was not answered: {exc}"
                        ) from exc
            else:
                await anyio.sleep(INPUT_STATE_ONLY_DELAY)
            result = await send(responses, result.request_state)
        if isinstance(result, types.InputRequiredResult):
            raise ServerError(
                f"server {self.server!r}: {what} still asked for input after {max_rounds} rounds"
            )
        return result

    # The callbacks mcp.Client takes. Each answers ErrorData rather than raising.

    async def sampling_callback(
        self, _context: Any, params: types.CreateMessageRequestParams
    ) -> SamplingResult | types.ErrorData:
        return await self._reply("sampling/createMessage", self.sample(params))

    async def elicitation_callback(
        self, _context: Any, params: types.ElicitRequestParams
    ) -> types.ElicitResult | types.ErrorData:
        return await self._reply("elicitation/create", self.elicit(params))

    async def list_roots_callback(self, _context: Any) -> types.ListRootsResult:
        return self.roots()

    async def logging_callback(self, params: types.LoggingMessageNotificationParams) -> None:
        """A server log line to ``features.on_log``; below ``log_level`` it is dropped (a
        handshake-era server that was never asked for a level may send every line)."""
        if LOG_LEVELS.index(params.level) < LOG_LEVELS.index(self.log_level):
            return
        message = LogMessage(
            server=self.server, level=params.level, data=params.data, logger=params.logger
        )
        listener = self.features.on_log
        if listener is None:
            logger.debug("server %r log (%s): %s", self.server, params.level, params.data)
            return
        try:
            listener(message)
        except Exception:  # boundary: a listener must not break the server's session
            logger.exception("log listener failed on a message from server %r", self.server)

    async def _reply(self, method: str, answer: Any) -> Any:
        try:
            return await answer
        except ClientFeatureError as exc:
            return types.ErrorData(code=FEATURE_ERROR_CODE, message=str(exc))
        except Exception as exc:  # boundary: never let outside code crash the connection
            message = _failure(self.server, method, exc)
            logger.warning("%s", message)
            return types.ErrorData(code=FEATURE_ERROR_CODE, message=message)


def _failure(server: str, method: str, exc: BaseException) -> str:
    return f"answering {method} for server {server!r} failed: {type(exc).__name__}: {exc}"


# --------------------------------------------------------------------------- resources, prompts


def blob_description(uri: str, blob: str, mime_type: str | None) -> str:
    """One line for binary content: its type and size, never its bytes."""
    size = len(blob) * 3 // 4 - blob[-2:].count("=")
    return f"[binary content {uri}: {mime_type or 'unknown type'}, {size} bytes]"


def resource_infos(
    server: str,
    resources: Sequence[types.Resource],
    templates: Sequence[types.ResourceTemplate],
) -> list[ResourceInfo]:
    infos = [
        ResourceInfo(
            server=server,
            uri=r.uri,
            name=r.name,
            title=r.title,
            description=r.description,
            mime_type=r.mime_type,
        )
        for r in resources
    ]
    infos.extend(
        ResourceInfo(
            server=server,
            uri=t.uri_template,
            name=t.name,
            title=t.title,
            description=t.description,
            mime_type=t.mime_type,
            template=True,
        )
        for t in templates
    )
    return infos


def resource_texts(
    contents: Sequence[types.TextResourceContents | types.BlobResourceContents],
) -> list[ResourceText]:
    return [
        ResourceText(uri=c.uri, text=_contents_text(c), mime_type=c.mime_type) for c in contents
    ]


def prompt_infos(server: str, prompts: Sequence[types.Prompt]) -> list[PromptInfo]:
    return [
        PromptInfo(
            server=server,
            name=p.name,
            title=p.title,
            description=p.description,
            arguments=tuple(
                PromptArgument(name=a.name, description=a.description, required=bool(a.required))
                for a in p.arguments or ()
            ),
        )
        for p in prompts
    ]


def prompt_messages(messages: Sequence[types.PromptMessage]) -> list[PromptMessage]:
    return [PromptMessage(role=m.role, text=_block_text(m.content)) for m in messages]


def _contents_text(contents: types.TextResourceContents | types.BlobResourceContents) -> str:
    if isinstance(contents, types.TextResourceContents):
        return contents.text
    return blob_description(contents.uri, contents.blob, contents.mime_type)


def _blocks_text(blocks: Sequence[Any]) -> str:
    return "\n".join(_block_text(b) for b in blocks)


def _block_text(block: Any) -> str:
    """Any content block as text a model can read."""
    if isinstance(block, types.TextContent):
        return block.text
    if isinstance(block, types.EmbeddedResource):
        return _contents_text(block.resource)
    if isinstance(block, types.ResourceLink):
        label = f" ({block.title or block.name})" if (block.title or block.name) else ""
        return f"[resource link: {block.uri}{label}]"
    if isinstance(block, types.ImageContent | types.AudioContent):
        size = len(block.data) * 3 // 4 - block.data[-2:].count("=")
        return f"[{block.type}: {block.mime_type}, {size} bytes]"
    if isinstance(block, Mapping):
        return str(block.get("text", block))
    return f"[{getattr(block, 'type', type(block).__name__)} content]"


# --------------------------------------------------------------------------- requests in either era


async def liveness(session: Any, bound: float) -> None:
    """One cheap request the server must answer: ``ping``, or in the 2026-07-28 era (which has
    no ping) ``server/discover``."""
    version = session.protocol_version
    if version in MODERN_PROTOCOL_VERSIONS:
        await session.send_discover(version)
    else:
        await session.send_request(
            types.PingRequest(), types.EmptyResult, request_read_timeout_seconds=bound
        )


async def all_pages(fetch: Callable[..., Awaitable[Any]], attribute: str) -> list[Any]:
    """Every item of a paginated list, at most ``MAX_LIST_PAGES`` pages."""
    items: list[Any] = []
    cursor: str | None = None
    for _ in range(MAX_LIST_PAGES):
        params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
        page = await fetch(params=params)
        items.extend(getattr(page, attribute))
        cursor = page.next_cursor
        if not cursor:
            break
    else:
        logger.warning("%s still paginating after %d pages", attribute, MAX_LIST_PAGES)
    return items


def progress_callback(server: str, listener: Callable[[Progress], None]) -> Any:
    """The SDK's per-request progress callback, handing ``listener`` :class:`Progress` records."""

    async def report(progress: float, total: float | None, message: str | None) -> None:
        listener(Progress(server=server, progress=progress, total=total, message=message))

    return report
