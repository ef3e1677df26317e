"""The model server's configuration: a remote OpenAI-compatible server instead of a GGUF file,
as ``weavehost.model`` in a config file or an ``http(s)://`` ``--model`` gives it.

Stage: configuration (beside :mod:`weavehost.config`, which reads the rest of the file and
re-exports these names). Invariants:

* One rule decides which model server is used (:func:`resolve_remote`), for the host,
  ``weavehost models`` and ``bench-agent`` alike: a ``--model`` wins over the config; a flag's
  URL keeps the config's other remote settings.
* ``${NAME}`` in the URL and headers is expanded from the environment, in a file and in a
  ``--model`` URL alike (:func:`weavehost.config_check.expand`); :meth:`RemoteModelConfig.describe`
  masks a URL's password and query values and never shows a header.
* Records are frozen; nothing here touches the network (:mod:`weavehost.agent.remote` does).

Keys of ``weavehost.model`` as an object (only ``url`` is required)::

    {"url": "http://gpu-box:8080/v1", "name": "qwen2.5-7b",
     "headers": {"Authorization": "Bearer ${LLM_KEY}"}, "contextSize": 32768,
     "timeouts": {"connect": 10, "read": 120}, "retries": 2,
     "stream": true, "earlyStart": true}
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from weavehost.config_check import Checker, expand, expand_map, kind_of, mask_url, parse_numbers

__all__ = ["RemoteModelConfig", "is_model_url", "parse_model", "resolve_remote"]


@dataclass(frozen=True, slots=True)
class RemoteModelConfig:
    """A remote OpenAI-compatible model server: ``"model": {"url": …}`` in the file, or an
    ``http(s)://`` ``--model``. ``url`` is the API base (``http://HOST:PORT/v1``); ``name`` the
    model asked for (default: the first the server lists); ``headers`` go with every request
    (``${ENV}`` expanded: an API key stays out of the file); ``context_size`` is used when the
    server does not say its own. ``stream``: ``True`` streams every request, ``False`` none,
    ``"forced"`` all but those leaving the choice of a call to the model (llama-cpp-python's
    server cannot stream those). ``early_start``: a trusted read-only call may start from the
    stream before the server finishes it."""

    url: str
    name: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    context_size: int | None = None
    connect_timeout: float = 10.0  # connecting to the server
    read_timeout: float = 120.0  # the longest silence while waiting for a reply or a chunk
    retries: int = 2  # further tries of an idempotent GET (/v1/models, /props), with back-off
    stream: bool | Literal["forced"] = True
    early_start: bool = True

    def describe(self) -> str:
        """The URL with any password and query values masked (never a header)."""
        return mask_url(self.url)


def is_model_url(text: str | None) -> bool:
    """Whether a ``--model`` / ``"model"`` value names a remote server rather than a file."""
    return bool(text) and text.lower().startswith(("http://", "https://"))  # type: ignore[union-attr]


def resolve_remote(
    model: str | None, configured: RemoteModelConfig | None
) -> RemoteModelConfig | None:
    """The remote model server to use, None for a local GGUF file; the one rule for the host,
    ``weavehost models`` and ``bench-agent``. A ``--model`` wins over the config's ``"model"``:
    a path means no server; a URL (``${ENV}`` expanded as in a file) keeps the config's other
    remote settings (headers, timeouts …). Without ``--model``, the config's server if any."""
    if not model:
        return configured
    if not is_model_url(model):
        return None
    url = expand(Checker("--model"), model, "")
    return replace(configured, url=url) if configured else RemoteModelConfig(url=url)


_REMOTE_KEYS = ("url", "name", "headers", "contextSize", "timeouts", "retries", "stream",
                "earlyStart")  # fmt: skip


def parse_model(check: Checker, raw: Any) -> str | RemoteModelConfig:
    """``weavehost.model``: a GGUF path (returned as it is), an ``http(s)://`` URL, or a remote
    server's settings (each a :class:`RemoteModelConfig`)."""
    key = "weavehost.model"
    if isinstance(raw, str):
        if is_model_url(raw):
            return RemoteModelConfig(url=expand(check, raw, key))
        return check.string(raw, key)
    entry = check.obj(raw, key)
    check.known_keys(entry, key, _REMOTE_KEYS)
    if "url" not in entry:
        raise check.fail(key, 'expected a path, a URL, or an object with "url"')
    url = expand(check, check.string(entry["url"], f"{key}.url"), f"{key}.url")
    if not is_model_url(url):
        raise check.fail(f"{key}.url", f"expected an http(s):// URL, got {kind_of(entry['url'])}")
    remote = RemoteModelConfig(
        url=url, headers=expand_map(check, entry.get("headers", {}), f"{key}.headers")
    )
    if "name" in entry:
        remote = replace(remote, name=check.string(entry["name"], f"{key}.name"))
    if "contextSize" in entry:
        size = check.number(entry["contextSize"], f"{key}.contextSize", integer=True)
        remote = replace(remote, context_size=size)
    if "timeouts" in entry:
        names = {"connect": "connect_timeout", "read": "read_timeout"}
        remote = parse_numbers(check, entry["timeouts"], f"{key}.timeouts", names, remote)
    if "retries" in entry:
        remote = replace(remote, retries=check.number(entry["retries"], f"{key}.retries",
                                                      integer=True, minimum=-1))  # fmt: skip
    if "stream" in entry:
        stream = entry["stream"]
        if stream not in (True, False, "forced"):
            raise check.fail(f"{key}.stream", f"expected true, false or \"forced\", got "
                             f"{kind_of(stream)}")  # fmt: skip
        remote = replace(remote, stream=stream)
    if "earlyStart" in entry:
        remote = replace(remote, early_start=check.boolean(entry["earlyStart"],
                                                           f"{key}.earlyStart"))  # fmt: skip
    return remote
