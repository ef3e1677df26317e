"""The one error tree of weavehost.

Every failure a user can cause or meet (bad config, a dying server, a broken schema, a model
file that is not there, a full KV cache) is raised as a subclass of :class:`WeavehostError`,
so the CLI maps them to a clear message and an exit code, and an embedding program can catch
one class. Errors from llama.cpp, the MCP SDK, jsonschema and the OS are converted once, at the
boundary of the stage that meets them, and chained (``raise ... from exc``).

Expected outcomes are *not* errors: a tool result with ``isError`` stays a result the model
reads, and a value sequence that fails to decode is a state of that sequence.

Hierarchy::

    WeavehostError                      exit code 1 unless stated
    ├── ConfigError                     malformed config file, flag or environment (exit 2)
    ├── ModelError                      choosing and loading a GGUF model
    │   ├── ModelNotFoundError          no model could be found; says what to install (exit 3)
    │   └── ModelLoadError              the file exists but llama.cpp cannot load it (exit 3)
    ├── EngineError                     running the llama.cpp context
    │   ├── ContextOverflowError        a sequence would pass n_ctx
    │   ├── KVCacheFullError            llama_decode found no KV slot (returned 1)
    │   ├── DecodeFailedError           llama_decode returned another error code
    │   └── AbortedError                decoding was stopped (Ctrl-C) between or inside passes
    ├── FormatError                     model formats: rendering prompts, parsing calls
    │   └── UnknownFormatError          no format with that name, or none detected
    ├── ServerError                     MCP servers
    │   ├── ServerStartError            the server could not be started or initialised
    │   ├── ServerDiedError             the connection closed or the process exited
    │   ├── ServerTimeoutError          a request passed its named timeout
    │   └── MessageTooLargeError        one message from a server passed the byte cap
    ├── CatalogError                    tools and their schemas
    │   ├── SchemaError                 a tool's schema is invalid, recursive or too large
    │   ├── UnknownToolError            the model or user named a tool the catalog lacks
    │   └── ArgumentValidationError     arguments do not validate against the tool's schema
    ├── ExecutionError                  running calls
    │   └── ApprovalDeniedError         the approval policy refused a call
    ├── ConstraintError                 building a value or call constraint (grammar) failed
    └── BenchError                      benchmark inputs (case files, answers) are unusable
"""

from __future__ import annotations

__all__ = [
    "AbortedError",
    "ApprovalDeniedError",
    "ArgumentValidationError",
    "BenchError",
    "CatalogError",
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
    "SchemaError",
    "ServerDiedError",
    "ServerError",
    "ServerStartError",
    "ServerTimeoutError",
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
    """No model format has the requested name, or none could be detected."""


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


class BenchError(WeavehostError):
    """A benchmark input (case file, answer file, strategy list) is unusable."""

    exit_code = 2
