"""tiermem: a tiered small-model memory engine for LLM agents.

>>> import tiermem
>>> tiermem.__version__
'0.1.0'
"""

from tiermem.async_memory import AsyncMemory
from tiermem.clock import ManualClock, SystemClock
from tiermem.config import TiermemConfig
from tiermem.errors import (
    ClosedError,
    ConfigError,
    EmbedderError,
    EmptyMessagesError,
    InvalidFilterError,
    InvalidInputError,
    InvalidLimitError,
    InvalidMessageError,
    InvalidQueryError,
    InvalidSessionIdError,
    InvalidUserIdError,
    KnowledgeItemError,
    MemoryNotFoundError,
    NaiveTimestampError,
    StoreError,
    TiermemError,
    UnknownRoleError,
    WrongTierError,
)
from tiermem.memory import ForgetReport, Memory
from tiermem.types import (
    AddResult,
    AnswerResult,
    AuditEvent,
    AuditOp,
    KnowledgeFact,
    MemoryEntry,
    MemoryKind,
    Message,
    Role,
    SearchFilters,
    SearchHit,
    Tier,
    Turn,
)

__version__ = "0.1.0"

__all__ = [
    "AddResult",
    "AnswerResult",
    "AsyncMemory",
    "AuditEvent",
    "AuditOp",
    "ClosedError",
    "ConfigError",
    "EmbedderError",
    "EmptyMessagesError",
    "ForgetReport",
    "InvalidFilterError",
    "InvalidInputError",
    "InvalidLimitError",
    "InvalidMessageError",
    "InvalidQueryError",
    "InvalidSessionIdError",
    "InvalidUserIdError",
    "KnowledgeFact",
    "KnowledgeItemError",
    "ManualClock",
    "Memory",
    "MemoryEntry",
    "MemoryKind",
    "MemoryNotFoundError",
    "Message",
    "NaiveTimestampError",
    "Role",
    "SearchFilters",
    "SearchHit",
    "StoreError",
    "SystemClock",
    "Tier",
    "TiermemConfig",
    "TiermemError",
    "Turn",
    "UnknownRoleError",
    "WrongTierError",
]
