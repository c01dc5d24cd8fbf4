"""Stored baselines: ``<root>/<hardware key>/<commit sha>.json``, versioned plain JSON.

Writes are atomic (temp file in the same directory, fsync, ``os.replace``) and serialized by a
lock file per hardware directory, so Ctrl-C, a crash or two runs at once never leave a torn or
lost file. A file that cannot be read is reported by name and never overwritten.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import math
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_mxperf.baselines.calibration import Calibration, CalibrationError, first
from pytest_mxperf.baselines.kept_runs import nearest, with_runs
from pytest_mxperf.system import files, fingerprint, locks
from pytest_mxperf.system.gitinfo import SHA

SCHEMA = 1
#: What a stored file records of its commit: no paths, user or host names.
STORED_COMMIT_FIELDS = ("sha", "date", "branch", "dirty", "source", "shallow")
#: The largest baseline file read or written (a case takes about 2 KiB: room for thousands);
#: a bigger one is a named error, so a runaway file never takes gigabytes to load.
MAX_FILE_BYTES = 8 * 2**20


class BaselineError(Exception):
    """A baseline file that cannot be used; the message names the file."""


def _num(value: Any, where: str, *, positive: bool = False, optional: bool = False) -> Any:
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise BaselineError(f"{where} must be a finite number, got {value!r}")
    if value < 0 or (positive and value == 0):
        raise BaselineError(f"{where} must be {'> 0' if positive else '>= 0'}, got {value!r}")
    return float(value)


def _obj(value: Any, where: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise BaselineError(f"{where} must be an object, got {value!r}")
    return dict(value)


def _nums(value: Any, where: str) -> tuple[float, ...]:
    """A list of positive numbers."""
    if not isinstance(value, list):
        raise BaselineError(f"{where} must be a list of numbers, got {value!r}")
    return tuple(float(_num(v, where, positive=True)) for v in value)


def _text(value: Any, where: str) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise BaselineError(f"{where}: 'pytest_mxperf_version' must be a string, got {value!r}")


def _ids(value: Any, where: str) -> tuple[str | None, ...]:
    if not isinstance(value, list) or not all(v is None or isinstance(v, str) for v in value):
        raise BaselineError(f"{where}: 'machine_ids' must be a list of strings, got {value!r}")
    return tuple(value)


@dataclass(frozen=True)
class StoredCase:
    """One case of a baseline file, type-checked at load so a bad field is reported by name
    and never reaches a verdict. ``record`` keeps every stored field for writing back."""

    images_per_sec: float | None
    rel_iqr: float
    runs: tuple[float, ...]
    status: str
    threads: dict[str, Any]
    software: dict[str, Any]
    environment: dict[str, Any]
    dirty: bool
    #: The anonymous ids of the machines that measured the stored runs (None: not recorded).
    machine_ids: tuple[str | None, ...]
    record: dict[str, Any] = field(compare=False, repr=False)
    #: Data-parallel cases: the stored scaling efficiency at the key's world size, the
    #: communication share at N, and the block spread of img/s(1) (None/0 in other cases and
    #: in files written before data-parallel cases existed).
    efficiency: float | None = None
    comm_share: float | None = None
    single_rel_iqr: float = 0.0
    #: Start-up figures and the peak memory of the stored run (None in files written before
    #: they were recorded).
    first_step_seconds: float | None = None
    warmup_seconds: float | None = None
    peak_memory_mb: float | None = None
    #: The peaks of the kept runs (as ``runs`` keeps img/s; empty in older files): one process's
    #: peak moves by about 10% between identical runs, so a run is judged against their range.
    peak_memory_runs: tuple[float, ...] = ()
    #: The pytest-mxperf version that stored the case's last run (None in files written
    #: before it was recorded, by 0.1.0).
    plugin_version: str | None = None

    def memory_reference(self, now: float | None) -> float | None:
        """The stored peak a run's peak ``now`` is judged against: the nearest of the stored
        runs' peaks (their highest when ``now`` is above them all, lowest when below)."""
        peaks = self.peak_memory_runs or (
            () if self.peak_memory_mb is None else (self.peak_memory_mb,)
        )
        return nearest(peaks, now)

    @classmethod
    def from_dict(cls, data: Any, where: str) -> StoredCase:
        if not isinstance(data, dict):
            raise BaselineError(f"{where} is not an object")
        runs = data.get("runs", [])
        if not isinstance(runs, list):
            raise BaselineError(f"{where}: 'runs' must be a list of numbers, got {runs!r}")
        status = data.get("status", "ok")
        if status not in ("ok", "oom"):
            raise BaselineError(f"{where}: 'status' must be 'ok' or 'oom', got {status!r}")
        dirty = data.get("dirty", False)
        if not isinstance(dirty, bool):
            raise BaselineError(f"{where}: 'dirty' must be true or false, got {dirty!r}")
        return cls(
            images_per_sec=_num(
                data.get("images_per_sec"),
                f"{where}: 'images_per_sec'",
                positive=True,
                optional=True,
            ),
            rel_iqr=_num(data.get("rel_iqr", 0.0), f"{where}: 'rel_iqr'"),
            # None and 0 mark runs without a figure (out of memory) in older files: skipped.
            runs=tuple(
                _num(r, f"{where}: 'runs'", positive=True) for r in runs if r not in (None, 0)
            ),
            status=status,
            threads=_obj(data.get("threads"), f"{where}: 'threads'"),
            software=_obj(data.get("software"), f"{where}: 'software'"),
            environment=_obj(data.get("environment"), f"{where}: 'environment'"),
            dirty=dirty,
            machine_ids=_ids(data.get("machine_ids", []), where),
            record=dict(data),
            efficiency=_num(
                data.get("efficiency"), f"{where}: 'efficiency'", positive=True, optional=True
            ),
            comm_share=_num(data.get("comm_share"), f"{where}: 'comm_share'", optional=True),
            single_rel_iqr=_num(data.get("single_rel_iqr", 0.0), f"{where}: 'single_rel_iqr'"),
            first_step_seconds=_num(
                data.get("first_step_seconds"), f"{where}: 'first_step_seconds'", optional=True
            ),
            warmup_seconds=_num(
                data.get("warmup_seconds"), f"{where}: 'warmup_seconds'", optional=True
            ),
            peak_memory_mb=_num(
                data.get("peak_memory_mb"), f"{where}: 'peak_memory_mb'", optional=True
            ),
            peak_memory_runs=_nums(
                data.get("peak_memory_runs", []), f"{where}: 'peak_memory_runs'"
            ),
            plugin_version=_text(data.get("pytest_mxperf_version"), where),
        )

    def as_dict(self) -> dict[str, Any]:
        return dict(self.record)


@dataclass
class BaselineFile:
    path: Path
    hardware: str
    commit: dict[str, Any]
    cases: dict[str, StoredCase]
    #: How fast the storing machine ran the calibration probe (None: not recorded).
    calibration: Calibration | None = None

    @property
    def sha(self) -> str:
        return str(self.commit.get("sha") or self.path.stem)

    @property
    def date(self) -> str:
        return str(self.commit.get("date") or "")


def check_hardware_key(key: str) -> str:
    """`fingerprint.check_hardware_key`, raising `BaselineError` (a key naming a folder here)."""
    try:
        return fingerprint.check_hardware_key(key)
    except ValueError as exc:
        raise BaselineError(str(exc)) from None


def _read(path: Path) -> Any:
    """The JSON a baseline file holds; `BaselineError` for one that is not a regular file, is
    over `MAX_FILE_BYTES`, is not UTF-8 or is not JSON (nested too deeply included)."""
    try:
        info = path.stat()
        if not stat.S_ISREG(info.st_mode):
            raise BaselineError(f"baseline file {path} is not a regular file")
        if info.st_size > MAX_FILE_BYTES:
            raise BaselineError(_too_big(path, info.st_size))
        raw = path.read_bytes()
    except OSError as exc:
        raise BaselineError(f"cannot read baseline file {path}: {exc.strerror}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BaselineError(
            f"baseline file {path} is not UTF-8 text (byte {raw[exc.start]:#04x} at offset "
            f"{exc.start})"
        ) from None
    try:
        return json.loads(text)
    except ValueError as exc:
        raise BaselineError(f"baseline file {path} is not valid JSON ({exc})") from None
    except RecursionError:
        raise BaselineError(f"baseline file {path} is not valid JSON (nested too deeply)") from None


def _too_big(path: Path, size: int) -> str:
    return (
        f"baseline file {path} is {size / 2**20:.1f} MiB, over the {MAX_FILE_BYTES // 2**20} MiB "
        "a baseline file may hold (a few KiB a case): not read, never rewritten"
    )


def _check_date(commit: dict[str, Any], path: Path) -> None:
    date = commit.get("date")
    if date in (None, ""):
        return
    try:
        _dt.datetime.fromisoformat(date.replace("Z", "+00:00"))
    except (AttributeError, ValueError):  # not text, or not an ISO date
        raise BaselineError(
            f"baseline file {path}: 'commit.date' must be an ISO date, got {date!r}"
        ) from None


def load(path: Path) -> BaselineFile:
    """Read and validate one baseline file."""
    data = _read(path)
    if not isinstance(data, dict) or "schema" not in data:
        raise BaselineError(f"baseline file {path} has no 'schema' field: not an mxperf baseline")
    schema = data["schema"]
    if not isinstance(schema, int) or schema < 1:
        raise BaselineError(f"baseline file {path} has an invalid schema {schema!r}")
    if schema > SCHEMA:
        raise BaselineError(
            f"baseline file {path} uses schema {schema}, newer than this pytest-mxperf "
            f"understands ({SCHEMA}); upgrade pytest-mxperf to read it"
        )
    cases = data.get("cases")
    commit = data.get("commit")
    if not isinstance(cases, dict) or not isinstance(commit, dict):
        raise BaselineError(f"baseline file {path} lacks 'cases' or 'commit' objects")
    _check_date(commit, path)
    typed = {
        str(key): StoredCase.from_dict(case, f"baseline file {path}: case {key!r}")
        for key, case in cases.items()
    }
    try:
        calibration = Calibration.from_dict(data.get("calibration"), f"baseline file {path}")
    except CalibrationError as exc:
        raise BaselineError(str(exc)) from None
    hardware = str(data.get("hardware", path.parent.name))
    return BaselineFile(path, hardware, commit, typed, calibration)


def hardware_keys(root: Path) -> list[str]:
    if not root.is_dir():
        return []
    return sorted(p.name for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))


def commit_files(root: Path, hardware: str) -> dict[str, Path]:
    """``{sha: path}`` of the baseline files stored for one hardware key."""
    folder = root / hardware
    if not folder.is_dir():
        return {}
    return {p.stem: p for p in sorted(folder.glob("*.json")) if SHA.fullmatch(p.stem)}


#: How many write-lock files baseline directories share: a directory's lock is one of these,
#: chosen by its path, so the lock directory holds at most this many however many checkouts
#: (or test repositories) ever stored a baseline. Two directories on one lock only take turns
#: for the milliseconds a write takes. (A lock file is never removed: removing one another run
#: may be about to lock is a race.)
LOCK_SLOTS = 64


def _lock_path(folder: Path) -> Path:
    """The write lock of a hardware directory lives in the user's lock directory, never in the
    baseline directory (whose files get committed)."""
    digest = hashlib.sha1(str(folder.resolve()).encode()).digest()
    return locks.machine_lock_dir() / f"baselines-{digest[0] % LOCK_SLOTS:02d}.lock"


def store(
    root: Path,
    hardware: str,
    commit: Mapping[str, Any],
    cases: Mapping[str, dict[str, Any]],
    calibration: float | None = None,
) -> Path:
    """Merge ``cases`` into ``<root>/<hardware>/<sha>.json``: re-measured cases are replaced
    (keeping the last few run medians as a noise record, see `kept_runs.with_runs`), the others
    stay; ``calibration`` (the probe's images/sec in this run) joins the file's calibration runs."""
    check_hardware_key(hardware)
    sha = str(commit.get("sha") or "")
    if not SHA.fullmatch(sha):
        raise BaselineError(f"cannot store a baseline without a git commit sha (got {sha!r})")
    folder = root / hardware
    path = folder / f"{sha}.json"
    folder.mkdir(parents=True, exist_ok=True)
    with locks.exclusive(_lock_path(folder)):
        old: dict[str, dict[str, Any]] = {}
        kept: Calibration | None = None
        if path.exists():
            # raises for a corrupt file: never overwrite it
            before = load(path)
            old = {k: c.as_dict() for k, c in before.cases.items()}
            kept = before.calibration
        merged = dict(old)
        for key, case in cases.items():
            merged[key] = with_runs(dict(case), old.get(key, {}))
        if calibration is not None:
            kept = first(calibration) if kept is None else kept.with_run(calibration)
        data: dict[str, Any] = {
            "schema": SCHEMA,
            "hardware": hardware,
            "commit": {k: v for k, v in commit.items() if k in STORED_COMMIT_FIELDS},
            "cases": merged,
        }
        if kept is not None:
            data["calibration"] = kept.as_dict()
        text = json.dumps(data, indent=2, sort_keys=True, allow_nan=False) + "\n"
        if len(text.encode()) > MAX_FILE_BYTES:
            raise BaselineError(_too_big(path, len(text.encode())).replace(" is ", " would be ", 1))
        files.write_text_atomic(path, text)
    return path
