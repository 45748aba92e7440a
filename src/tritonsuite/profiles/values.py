"""The checks a profile's values pass through: each bad value is one :class:`ProfileError` naming where it is, the
value and what is valid."""
from __future__ import annotations

from typing import Any, Mapping, Sequence

from tritonsuite.core.settings import LatencyBound


class ProfileError(ValueError):
    """A profile name or content that cannot be used; the message names the valid choices."""


def _unknown(data: Mapping, valid: Sequence[str], where: str) -> None:
    unknown = [str(k) for k in data if k not in valid]
    if unknown:
        raise ProfileError(f"{where}: unknown key{'s' if len(unknown) > 1 else ''} {', '.join(unknown)}; valid "
                           f"keys: {', '.join(valid)}")


def _mapping(value: Any, where: str) -> Mapping:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ProfileError(f"{where}: expected a mapping of keys, got {value!r}")
    return value


def _int(value: Any, where: str, low: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ProfileError(f"{where} {value!r}: expected an integer >= {low}")
    return value


def _ints(value: Any, where: str, low: int = 1) -> tuple[int, ...]:
    values = value if isinstance(value, (list, tuple)) else [value]
    return tuple(_int(v, where, low) for v in values)


def _rates(value: Any, where: str) -> tuple[float, ...]:
    values = value if isinstance(value, (list, tuple)) else [value]
    bad = [v for v in values if isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0]
    if bad:
        raise ProfileError(f"{where} {bad[0]!r}: expected request rates in requests/s, numbers > 0")
    return tuple(float(v) for v in values)


def _bound(value: Any, where: str) -> LatencyBound | None:
    if value is None:
        return None
    try:
        return LatencyBound.parse(value)
    except ValueError as exc:
        raise ProfileError(f"{where}: {exc}") from None


def _choices(value: Any, where: str, valid: Sequence[str]) -> tuple[str, ...]:
    values = value if isinstance(value, (list, tuple)) else [value]
    bad = [v for v in values if v not in valid]
    if bad or not values:
        raise ProfileError(f"{where} {bad or values!r}: valid choices: {', '.join(valid)}")
    return tuple(values)
