"""Parsers of setting values: the text of a flag, ini key or environment variable to a number,
fraction, on/off, device kinds, size or hardware key, or a `ValueError` saying why not."""

from __future__ import annotations

DEVICE_KINDS = ("cpu", "gpu")


def positive_float(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise ValueError("must be > 0")
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


def size(text: str) -> int:
    from pytest_mxperf.sweep_memory import parse_size

    return parse_size(text)


def cpu_list(text: str) -> str:
    from pytest_mxperf.cpus import parse

    return parse(text)


def any_text(text: str) -> str:
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
    from pytest_mxperf.baselines import BaselineError, check_hardware_key

    try:
        return check_hardware_key(text.strip())
    except BaselineError as exc:
        raise ValueError(str(exc)) from None
