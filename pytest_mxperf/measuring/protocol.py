"""What a measuring back end is: the `Backend` protocol, the `PrepareSpec` it is handed and the
`Prepared` step it returns. The MXNet back end and the fake one both satisfy it (checked by mypy).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, Callable, Protocol

from pytest_mxperf.config.casekey import DTYPES, MODES

if TYPE_CHECKING:
    from pytest_mxperf.measuring.dp_result import DataParallelResult
    from pytest_mxperf.measuring.dp_scaling import DataParallelSpec

_OOM_PATTERNS = (
    "out of memory",
    "bad_alloc",
    "memory allocation failed",
    "cudamalloc",
    "failed to allocate cpu memory",
)

#: What a training step's labels and default loss are made for (``task=``, backend.tasks).
TASKS = ("classification", "segmentation", "detection")


class SpecError(ValueError):
    """What a back end was handed cannot be benchmarked at all (a wrong kind of model, missing
    model files, no such input): a usage error that reaches the test as an exception, unlike
    an exception raised by the model itself, which makes the case an "error" row."""


class ModelTypeError(SpecError, TypeError):
    """The model is of a kind the back end cannot benchmark."""


class ModelFileError(SpecError, FileNotFoundError):
    """Exported model files that do not exist."""


def looks_like_oom(exc: BaseException, error_type: type[BaseException]) -> bool:
    """Whether ``exc`` is an out-of-memory failure (a result, as in the published tables)."""
    if isinstance(exc, MemoryError):
        return True
    text = str(exc).lower()
    return isinstance(exc, error_type) and any(p in text for p in _OOM_PATTERNS)


@dataclass
class Prepared:
    """A ready-to-time step and what the engine needs to know about it."""

    step: Callable[[], object]
    items_per_step: int
    check: Callable[[], str | None] = lambda: None
    info: dict[str, Any] = field(default_factory=dict)
    #: Whether the step produced anything to wait on; False when a plain callable returned
    #: None on every call (then only Python's call overhead may have been timed).
    computed: Callable[[], bool] = lambda: True
    #: Multiply-accumulates per item counted from the model's graph (None: no graph to read).
    macs_per_image: int | None = None


@dataclass(frozen=True)
class PrepareSpec:
    """Everything a back end needs to turn a model into a timed step, besides the model."""

    mode: str
    batch_size: int
    ctx: Any
    dtype: str = "float32"
    #: One input's shape without the batch axis, or a tuple of them for a multi-input network.
    input_shape: tuple[int, ...] | tuple[tuple[int, ...], ...] = (3, 224, 224)
    items_per_call: int | None = None
    loss: Any = None
    optimizer: Any = "sgd"
    optimizer_params: dict[str, Any] | None = None
    num_classes: int | None = None
    data_name: str = "data"
    hybridize: bool = True
    #: Training labels and default loss: classification, segmentation or detection.
    task: str = "classification"
    #: Training labels instead of the task's: an NDArray, a tuple of them, or a callable
    #: ``(batch_size, ctx, dtype) -> labels``.
    labels: Any = None

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"unknown mode {self.mode!r}; choose from {', '.join(MODES)}")
        if self.dtype not in DTYPES:
            raise ValueError(f"dtype must be one of {', '.join(DTYPES)}, got {self.dtype!r}")
        if self.task not in TASKS:
            raise ValueError(f"unknown task {self.task!r}; choose from {', '.join(TASKS)}")

    @classmethod
    def from_options(
        cls, *, mode: str, batch_size: int, ctx: Any, dtype: str, options: dict[str, Any]
    ) -> PrepareSpec:
        """Build a spec from the keyword options of ``mxperf.inference(...)`` and friends;
        an unknown option is a `TypeError` naming it (a typo never passes silently)."""
        names = {f.name for f in fields(cls)} - {"mode", "batch_size", "ctx", "dtype"}
        unknown = sorted(set(options) - names)
        if unknown:
            raise TypeError(
                f"unknown option(s) {', '.join(unknown)}; allowed: "
                f"model, name, ctx, dtype, {', '.join(sorted(names))}"
            )
        values = dict(options)
        if "input_shape" in values:
            shape = values["input_shape"]
            nested = bool(shape) and all(isinstance(s, (tuple, list)) for s in shape)
            values["input_shape"] = tuple(tuple(s) for s in shape) if nested else tuple(shape)
        return cls(mode=mode, batch_size=batch_size, ctx=ctx, dtype=dtype, **values)


class Backend(Protocol):
    """A measuring back end: devices, sync and clock, and models turned into timed steps."""

    def clock(self) -> float:
        """A monotonic clock in seconds."""
        ...

    def sync(self) -> None:
        """Wait until the device has finished all queued work (``mx.nd.waitall``)."""
        ...

    def num_gpus(self) -> int: ...

    def context(self, kind: str, index: int = 0) -> Any: ...

    def describe(self, ctx: Any) -> tuple[str, int]:
        """``(device kind, device index)`` of a context."""
        ...

    def is_oom(self, exc: BaseException) -> bool: ...

    def software(self) -> dict[str, Any]:
        """Versions of the stack the numbers depend on (recorded, not keyed)."""
        ...

    def prepare(self, model: Any, spec: PrepareSpec) -> Prepared:
        """Turn ``model`` into a step on synthetic device-resident data."""
        ...

    def data_parallel(self, model: Any, spec: DataParallelSpec) -> DataParallelResult:
        """Measure data-parallel training at world size 1 and N (`measuring.dp_scaling`).
        ``model`` is a block for in-process kvstores, or None to build it from
        ``spec.factory`` (launched ranks always do). Raises `DataParallelError` (a rank died,
        a timeout) with the message the case fails with."""

    def peak_gflops(self, ctx: Any, dtype: str) -> float | None:
        """A short probe of the device's dense arithmetic in GFLOP/s (None: not measurable)."""
        ...

    def calibration_net(self) -> Any:
        """A fresh network of the calibration probe (`pytest_mxperf.measuring.calibrate`), or
        None for a back end that runs no probe: its baseline files then carry no calibration
        and runs judge their cases one by one, as with files stored before calibrations."""
        ...
