"""Which scaling a data-parallel case measures, weak or strong, as the marker and the call say.

- ``weak``: every device (or worker) trains ``batch_size`` images a step; N devices train
  N x batch_size. Compared with one device at ``batch_size``.
- ``strong``: ``batch_size`` is the total batch of a step, split over the N devices
  (batch_size / N each). Compared with one device training the whole ``batch_size``.

In both, the efficiency is img/s(N) / (N x img/s(1)) with img/s(1) the one-device figure of
that kind (`pytest_mxperf.measuring.dp_scaling.efficiency`); for strong scaling it is the
speed-up img/s(N) / img/s(1) over N.
"""

from __future__ import annotations

WEAK = "weak"
STRONG = "strong"
SCALING_KINDS = (WEAK, STRONG)
#: What each kind compares, as the data-parallel table's title says it.
KIND_TITLES = {WEAK: "weak: same batch per device", STRONG: "strong: total batch split"}


def check_kind(value: object, where: str = "scaling") -> str:
    """``value`` if it names a scaling kind, else a ValueError saying which ones do."""
    if value not in SCALING_KINDS:
        raise ValueError(
            f"{where} must be one of {', '.join(map(repr, SCALING_KINDS))}, got {value!r}"
        )
    assert isinstance(value, str)
    return value


def resolve_kind(call: str | None, marker: str | None) -> str:
    """The kind a case measures: the call's, else the marker's, else weak. A call and a marker
    that name different kinds are an error (the marker's floors are for the marker's kind)."""
    if call is not None:
        check_kind(call)
    if call is not None and marker is not None and call != marker:
        raise ValueError(
            f"data_parallel(scaling={call!r}) but the test's mxperf marker says "
            f"scaling={marker!r}: its efficiency floors are for {marker} scaling; make them agree"
        )
    return call or marker or WEAK


def split_batch(total: int, devices: int) -> int:
    """Each device's share of a strong-scaling total batch; a ValueError naming the numbers
    when ``devices`` does not divide ``total``."""
    if devices < 1:
        raise ValueError(f"the number of devices must be >= 1, got {devices}")
    if total < devices or total % devices:
        raise ValueError(
            f"strong scaling splits the total batch_size={total} over {devices} devices, but "
            f"{total} is not a multiple of {devices} ({total} / {devices} = "
            f"{total / devices:g}): give a multiple of {devices}"
        )
    return total // devices
