"""Sizes and times as people write them: ``64KiB``, ``1MB``, ``50ms``, ``2.5s``.

Binary prefixes (KiB, MiB, GiB) are powers of 1024; decimal ones (kB, MB, GB) are powers of
1000; a bare number is bytes (sizes) or seconds (times). Parsers raise ``ValueError`` with a
message that says what was expected.
"""

from __future__ import annotations

import math
import numbers
import re

_SIZE_UNITS = {
    "": 1, "b": 1,
    "k": 1024, "kib": 1024, "ki": 1024,
    "m": 1024**2, "mib": 1024**2, "mi": 1024**2,
    "g": 1024**3, "gib": 1024**3, "gi": 1024**3,
    "kb": 1000, "mb": 1000**2, "gb": 1000**3,
}
_TIME_UNITS = {
    "": 1.0, "s": 1.0, "sec": 1.0,
    "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9,
    "min": 60.0, "m": 60.0, "h": 3600.0,
}
_NUMBER = re.compile(r"\s*(-?)\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*([a-zA-Zµ]*)\s*")


def parse_size(text: str | int) -> int:
    """Bytes in ``text`` (``"64KiB"`` -> 65536). Must be a whole, non-negative number of bytes."""
    if isinstance(text, bool):
        raise ValueError(f"expected a size such as 64KiB or 1MiB, got {text!r}")
    if isinstance(text, int):
        if text < 0:
            raise ValueError(f"expected a non-negative size, got {text}")
        return text
    m = _NUMBER.fullmatch(str(text))
    unit = m.group(3).lower() if m else None
    if not m or unit not in _SIZE_UNITS:
        raise ValueError(f"expected a size such as 64KiB, 1MiB or 4096, got {text!r}")
    if m.group(1):
        raise ValueError(f"expected a non-negative size, got {text!r}")
    value = float(m.group(2)) * _SIZE_UNITS[unit]
    if value != int(value):
        raise ValueError(f"expected a whole number of bytes, got {text!r}")
    return int(value)


def parse_time(text: str | float | int) -> float:
    """Seconds in ``text`` (``"50ms"`` -> 0.05). Negative times are rejected."""
    if isinstance(text, bool):
        raise ValueError(f"expected a time such as 50ms or 2s, got {text!r}")
    if isinstance(text, (int, float)):
        if text < 0:
            raise ValueError(f"expected a non-negative time, got {text}")
        return float(text)
    m = _NUMBER.fullmatch(str(text))
    unit = m.group(3) if m else None
    if unit is not None and unit not in _TIME_UNITS:
        unit = unit.lower() if unit.lower() in _TIME_UNITS else None
    if not m or unit is None:
        raise ValueError(f"expected a time such as 50ms, 200us or 2s, got {text!r}")
    if m.group(1):
        raise ValueError(f"expected a non-negative time, got {text!r}")
    return float(m.group(2)) * _TIME_UNITS[unit]


_BITS = {"bit": 1 / 8, "kbit": 1e3 / 8, "mbit": 1e6 / 8, "gbit": 1e9 / 8, "tbit": 1e12 / 8}
_RATE = re.compile(r"\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*([a-zA-Z]*)\s*(?:/\s*s|ps)?\s*")


def parse_rate(text: str | float | int) -> float:
    """Bytes per second in ``text``: a size per second (``"12.5GB/s"``, ``"10GiB/s"``), bits
    per second (``"100Gbit/s"``, ``"100Gbps"``) or a bare number of bytes/s. Must be > 0."""
    if isinstance(text, bool):
        raise ValueError(f"expected a rate such as 12.5GB/s or 100Gbit/s, got {text!r}")
    if isinstance(text, (int, float)):
        if not text > 0:
            raise ValueError(f"expected a rate > 0, got {text}")
        return float(text)
    m = _RATE.fullmatch(str(text))
    unit = m.group(2).lower() if m else None
    if unit is not None and unit.endswith("bps"):
        unit = unit[:-3] + "bit"
    scale = _BITS.get(unit, _SIZE_UNITS.get(unit)) if unit is not None else None
    if not m or scale is None or not float(m.group(1)) > 0:
        raise ValueError(f"expected a rate > 0 such as 12.5GB/s, 10GiB/s or 100Gbit/s, "
                         f"got {text!r}")
    return float(m.group(1)) * scale


def format_rate(bytes_per_s: float) -> str:
    """``12.5 GB/s`` (decimal prefixes, three significant digits)."""
    for unit, scale in (("TB/s", 1e12), ("GB/s", 1e9), ("MB/s", 1e6), ("kB/s", 1e3)):
        if bytes_per_s >= scale:
            return f"{bytes_per_s / scale:.3g} {unit}"
    return f"{bytes_per_s:.3g} B/s"


def format_size(nbytes) -> str:
    """``65536`` -> ``"64KiB"``; exact binary multiples get a prefix, others stay in bytes
    (a float or NumPy number of bytes, as a summary column holds, is taken as a whole)."""
    n = int(nbytes)
    for unit, factor in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if n >= factor and n % factor == 0:
            return f"{n // factor}{unit}"
    return f"{n}B"


def format_time(seconds: float) -> str:
    """A duration with a unit that reads naturally: ``1.234 ms``, ``56.7 us``, ``2.00 s``."""
    if seconds != seconds:  # NaN
        return "n/a"
    a = abs(seconds)
    if a >= 1:
        return f"{seconds:.3g} s" if a < 100 else f"{seconds:.0f} s"
    if a >= 1e-3:
        return f"{seconds * 1e3:.4g} ms"
    if a >= 1e-6 or a == 0:
        return f"{seconds * 1e6:.4g} us"
    return f"{seconds * 1e9:.4g} ns"


def format_number(value, spec: str = ".2f", scale: float = 1.0) -> str:
    """``value`` times ``scale`` as ``format`` with ``spec`` (``.2f``, ``.3g``, ``.0f`` ...);
    ``""`` when it is no finite number (None, NaN, a string, a boolean): the tables' cells."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
        return ""
    return format(value * scale, spec)
