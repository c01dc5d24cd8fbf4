"""What a data-parallel case measures (`DataParallelSpec`): the model, the kvstore, the devices
or workers, the batch and whether it is weak or strong scaling (re-exported by
`pytest_mxperf.measuring.dp_scaling`, where the reports and the arithmetic are)."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from pytest_mxperf.config.scaling_kind import SCALING_KINDS, STRONG, WEAK, check_kind, split_batch
from pytest_mxperf.measuring.measure import MeasureConfig

IN_PROCESS_KVSTORES = ("local", "device", "nccl")
DIST_KVSTORES = ("dist_sync", "dist_device_sync", "dist_async")
_CONTEXT = re.compile(r"^\s*(cpu|gpu)\s*[(:]\s*(\d+)\s*\)?\s*$")


@dataclass(frozen=True)
class DataParallelSpec:
    """What to measure: one model, trained data-parallel with one kvstore.

    ``factory`` is an importable ``"package.module:function"`` returning a fresh Gluon block
    (ranks are separate processes: they import it, so it cannot be a lambda or a local).
    ``contexts`` are the devices of one process, as ``"cpu(0)"``/``"gpu(1)"``: for an in-process
    kvstore the N devices compared with the first one alone; for a dist kvstore the devices of
    every worker (default one CPU). ``step_hook`` (optional, ``"module:function"``) is called
    once per process as ``hook(kv, contexts)`` and may return a callable run after every timed
    training step (not in the compute-only step), e.g. an extra exchange.

    ``batch_per_device`` is what each device trains per step at this spec's world size.
    ``scaling`` says what `with_world` keeps: ``"weak"`` the batch per device (one device at 1
    trains ``batch_per_device``), ``"strong"`` the total batch ``total_batch`` (one worker at 1
    trains all of it); build a strong spec from its total with `split`.
    """

    factory: str
    batch_per_device: int
    input_shape: tuple[int, ...] = (3, 32, 32)
    kvstore: str = "dist_sync"
    workers: int = 2
    servers: int = 1
    contexts: tuple[str, ...] = ()
    num_classes: int | None = None
    optimizer: str = "sgd"
    learning_rate: float = 0.01
    step_hook: str | None = None
    threads_per_worker: int | None = None
    timeout: float = 900.0
    measure: MeasureConfig = field(default_factory=MeasureConfig)
    scaling: str = WEAK

    def __post_init__(self) -> None:
        if self.kvstore not in IN_PROCESS_KVSTORES + DIST_KVSTORES:
            known = ", ".join(IN_PROCESS_KVSTORES + DIST_KVSTORES)
            raise ValueError(f"unknown kvstore {self.kvstore!r}; choose from {known}")
        if ":" not in self.factory and not is_symbol_file(self.factory):
            raise ValueError(
                "factory must be 'package.module:function' or an exported "
                f"'PREFIX-symbol.json', got {self.factory!r}"
            )
        if self.batch_per_device < 1:
            raise ValueError(f"batch_per_device must be >= 1, got {self.batch_per_device}")
        if self.distributed and (self.workers < 1 or self.servers < 1):
            raise ValueError(f"{self.kvstore} needs workers >= 1 and servers >= 1")
        if not self.distributed and not self.contexts:
            raise ValueError(f"kvstore {self.kvstore!r} runs in one process: give contexts=")
        if self.timeout <= 0:
            raise ValueError(f"timeout must be > 0 seconds, got {self.timeout}")
        for text in self.contexts:
            parse_context(text)
        check_kind(self.scaling, f"scaling (one of {SCALING_KINDS})")

    @property
    def distributed(self) -> bool:
        """Whether the case runs as separate worker and server processes."""
        return self.kvstore.startswith("dist")

    @property
    def world_size(self) -> int:
        """N: worker processes for a dist kvstore, devices for an in-process one."""
        return self.workers if self.distributed else len(self.contexts)

    @property
    def devices(self) -> int:
        """Devices training together: every worker's contexts (dist), else the contexts."""
        return self.world_size * len(self.worker_contexts) if self.distributed else self.world_size

    @property
    def total_batch(self) -> int:
        """Images of one step over all devices."""
        return self.batch_per_device * self.devices

    @property
    def worker_contexts(self) -> tuple[str, ...]:
        """The devices one process trains on."""
        return self.contexts or ("cpu(0)",)

    @property
    def lockstep(self) -> bool:
        """Sync kvstores keep workers in lock-step: they must all run the same number of steps."""
        return self.distributed and "async" not in self.kvstore

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["input_shape"] = list(self.input_shape)
        data["contexts"] = list(self.contexts)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> DataParallelSpec:
        kwargs = dict(data)
        kwargs["input_shape"] = tuple(kwargs["input_shape"])
        kwargs["contexts"] = tuple(kwargs.get("contexts", ()))
        kwargs["measure"] = MeasureConfig(**kwargs.get("measure", {}))
        return cls(**kwargs)

    def with_world(self, n: int) -> DataParallelSpec:
        """The same case with n workers (dist) or the first n devices (in process); strong
        scaling splits the same total batch over them."""
        if self.distributed:
            spec = replace(self, workers=n)
        else:
            spec = replace(self, contexts=self.contexts[:n])
        return spec.split(self.total_batch) if self.scaling == STRONG else spec

    def split(self, total_batch: int) -> DataParallelSpec:
        """This case as strong scaling: ``total_batch`` split over its devices (a ValueError
        naming the numbers when they do not divide it)."""
        return replace(
            self, scaling=STRONG, batch_per_device=split_batch(total_batch, self.devices)
        )


# devices ----------------------------------------------------------------------------------------


def parse_context(text: str) -> tuple[str, int]:
    """``"gpu(1)"`` or ``"gpu:1"`` -> ("gpu", 1)."""
    found = _CONTEXT.match(text)
    if not found:
        raise ValueError(f"not a device: {text!r} (write cpu(0) or gpu(1))")
    return found.group(1), int(found.group(2))


def is_symbol_file(ref: str) -> bool:
    """Whether a factory names an exported symbol file (``HybridBlock.export``'s JSON)."""
    return ref.endswith(".json")
