"""Parsers of setting values: the text of a flag, ini key or environment variable to a number,
fraction, on/off, device kinds, size or hardware key, or a `ValueError` saying why not."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from pytest_mxperf.system import fingerprint, mxnet_env

DEVICE_KINDS = ("cpu", "gpu")


def positive_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError("must be a finite number")
    if not value > 0:
        raise ValueError("must be > 0")
    return value


#: The dearest machine a price per hour may name, and the largest epoch: bounds that keep the
#: cost arithmetic finite (1e308 $/h or 10**400 images overflowed it and lost the JSON report).
MAX_PRICE_PER_HOUR = 1e6
MAX_EPOCH_IMAGES = 10**12


def price_per_hour(text: str) -> float:
    """Dollars per hour: > 0 and at most `MAX_PRICE_PER_HOUR`."""
    value = float(text)
    if not math.isfinite(value) or not 0 < value <= MAX_PRICE_PER_HOUR:
        raise ValueError(f"must be > 0 dollars an hour and at most {MAX_PRICE_PER_HOUR:,.0f}")
    return value


def epoch_images(text: str) -> int:
    """Images in an epoch: a whole number from 1 to `MAX_EPOCH_IMAGES`."""
    value = int(text)
    if not 1 <= value <= MAX_EPOCH_IMAGES:
        raise ValueError(f"must be a whole number of images from 1 to {MAX_EPOCH_IMAGES:,}")
    return value


#: The longest time a seconds option takes (a week): timeouts are added to clocks and
#: timestamps, which overflow on inf or 1e12 ("timestamp out of range for platform time_t").
MAX_SECONDS = 7 * 24 * 3600


def positive_seconds(text: str) -> float:
    value = float(text)
    if not math.isfinite(value) or not 0 < value <= MAX_SECONDS:
        raise ValueError(f"must be > 0 seconds, finite and at most {MAX_SECONDS} (a week)")
    return value


def budget_seconds(text: str) -> float | None:
    """``"auto"`` -> None (the paired run sizes it from its own first rounds); else seconds."""
    if text.strip() == "auto":
        return None
    try:
        return positive_seconds(text)
    except ValueError as exc:
        raise ValueError(f"{exc}, or auto") from None


def seed(text: str) -> int | None:
    """``"off"`` -> None (the generators are left alone); else a seed in [0, 2**32)."""
    if text.strip() == "off":
        return None
    try:
        value = int(text)
    except ValueError:
        raise ValueError("must be a whole number, or off") from None
    if not 0 <= value < 2**32:
        raise ValueError("must be in [0, 2**32), or off")
    return value


def fraction(text: str) -> float:
    value = float(text)
    if not 0 <= value < 1:
        raise ValueError("must be a fraction in [0, 1), e.g. 0.15 for 15%")
    return value


def nonneg_int(text: str) -> int:
    value = int(text)
    if value < 0:
        raise ValueError("must be >= 0")
    return value


def rounds(text: str) -> int:
    value = int(text)
    if value < 2:
        raise ValueError("must be >= 2 (an interval needs two paired rounds)")
    return value


def positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise ValueError("must be >= 1")
    return value


def thread_count(text: str) -> int:
    """A thread count for MXNet: 1..4096 (`pytest_mxperf.system.mxnet_env.MAX_THREADS`)."""
    value = int(text)
    if not 1 <= value <= mxnet_env.MAX_THREADS:
        raise ValueError(f"must be a thread count in [1, {mxnet_env.MAX_THREADS}]")
    return value


def parse_ctx(text: str) -> tuple[str, ...]:
    """``"cpu,gpu"`` -> ``("cpu", "gpu")``; ``"auto"`` -> ``()`` (decided when MXNet loads)."""
    text = text.strip().lower()
    if text in ("", "auto"):
        return ()
    kinds: list[str] = []
    for part in text.split(","):
        part = part.strip()
        if part not in DEVICE_KINDS:
            raise ValueError(f"unknown device kind {part!r} (choose from cpu, gpu, auto)")
        if part not in kinds:
            kinds.append(part)
    return tuple(kinds)


_UNITS = {"": 1, "b": 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}


def size(text: str) -> int:
    """``"2GiB"``, ``"2g"``, ``"512M"``, ``"1.5GB"`` or bytes -> bytes (binary units)."""
    match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([kmgt]?)(i?b)?\s*", text.lower())
    if not match:
        raise ValueError("must be a size such as 2GiB, 512MiB or a number of bytes")
    value = int(float(match.group(1)) * _UNITS[match.group(2)])
    if value <= 0:
        raise ValueError("must be > 0")
    return value


def cpu_list(text: str) -> str:
    from pytest_mxperf.system.cpus import parse

    return parse(text)


def any_text(text: str) -> str:
    return text


def revision(text: str) -> str:
    """A git revision as given (resolved later, in the repository): never empty, which would
    silently turn a paired run into a plain one."""
    if not text.strip():
        raise ValueError("an empty revision: name a commit (a sha, branch, tag or HEAD~1)")
    return text


def on_off(text: str) -> bool:
    value = text.strip().lower()
    if value in ("on", "true", "1", "yes"):
        return True
    if value in ("off", "false", "0", "no"):
        return False
    raise ValueError("must be on or off")


def machine(text: str) -> str:
    # Checked with the other options, naming where the value came from, before anything runs.
    return fingerprint.check_hardware_key(text.strip())


def parse_sweep(sweep: Any) -> tuple[str, tuple[Any, ...]] | None:
    """``{"preprocess_threads": [1, 2, 4]}`` -> ``("preprocess_threads", (1, 2, 4))``."""
    if sweep is None:
        return None
    if not isinstance(sweep, Mapping) or len(sweep) != 1:
        raise ValueError(
            f"sweep must map one setting to its values, e.g. {{'num_workers': [0, 2]}}; "
            f"got {sweep!r}"
        )
    ((name, values),) = sweep.items()
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(f"sweep: the setting must be a keyword name, got {name!r}")
    if isinstance(values, (str, bytes)) or not isinstance(values, Sequence) or not values:
        raise ValueError(f"sweep: {name} needs a non-empty list of values, got {values!r}")
    if len(set(map(str, values))) != len(values):
        raise ValueError(f"sweep: {name} lists a value twice: {list(values)!r}")
    return name, tuple(values)
