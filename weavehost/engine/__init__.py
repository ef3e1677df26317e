"""The llama.cpp engine: parallel KV sequences, counted passes, tokenizer."""

from weavehost.engine.engine import (
    DEFAULT_N_CTX,
    DEFAULT_N_SEQ_MAX,
    Engine,
    default_threads,
)
from weavehost.engine.passes import EngineStats, Row
from weavehost.engine.segment import Segment

__all__ = [
    "DEFAULT_N_CTX",
    "DEFAULT_N_SEQ_MAX",
    "Engine",
    "EngineStats",
    "Row",
    "Segment",
    "default_threads",
]
