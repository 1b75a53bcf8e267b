"""Confidence of a piece of knowledge: grows with independent support, fades without it.

Pure functions, no I/O. ``support`` is ``1 - (1 - gain) ** evidence`` (each independent
supporting memory closes a share ``gain`` of the remaining doubt); ``freshness`` halves every
``half_life_days`` since the knowledge was last supported.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True, slots=True)
class Confidence:
    """A confidence and the two factors it is made of."""

    value: float
    support: float
    freshness: float
    age_days: float


def confidence(
    evidence: int,
    last_supported: datetime,
    now: datetime,
    *,
    gain: float = 0.5,
    half_life_days: float = 60.0,
) -> Confidence:
    """How far to trust knowledge with ``evidence`` supporting memories, last seen then.

    >>> from datetime import UTC, datetime, timedelta
    >>> t = datetime(2026, 1, 1, tzinfo=UTC)
    >>> confidence(1, t, t).value, confidence(2, t, t).value
    (0.5, 0.75)
    >>> round(confidence(2, t, t + timedelta(days=60)).value, 3)
    0.375
    """
    support = 1.0 - (1.0 - gain) ** max(0, evidence)
    age_days = max(0.0, (now - last_supported).total_seconds() / 86_400)
    freshness: float = 0.5 ** (age_days / half_life_days)
    return Confidence(support * freshness, support, freshness, age_days)
