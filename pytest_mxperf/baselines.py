"""Stored baselines: ``<root>/<hardware key>/<commit sha>.json``, versioned plain JSON.

Writes are atomic (temp file in the same directory, fsync, ``os.replace``) and serialized by a
lock file per hardware directory, so Ctrl-C, a crash or two runs at once never leave a torn or
lost file. A file that cannot be read is reported by name and never overwritten.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_mxperf.stats import median

SCHEMA = 1
RUNS_KEPT = 5
_SHA = re.compile(r"^[0-9a-f]{7,64}$")
_HW = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


class BaselineError(Exception):
    """A baseline file that cannot be used; the message names the file."""


@dataclass
class BaselineFile:
    path: Path
    hardware: str
    commit: dict[str, Any]
    cases: dict[str, dict[str, Any]]

    @property
    def sha(self) -> str:
        return str(self.commit.get("sha") or self.path.stem)

    @property
    def date(self) -> str:
        return str(self.commit.get("date") or "")


def check_hardware_key(key: str) -> str:
    if not _HW.match(key):
        raise BaselineError(f"invalid hardware key {key!r}: use letters, digits, '.', '_', '-'")
    return key


def load(path: Path) -> BaselineFile:
    """Read and validate one baseline file."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise BaselineError(f"cannot read baseline file {path}: {exc.strerror}") from None
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise BaselineError(f"baseline file {path} is not valid JSON ({exc})") from None
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
    for key, case in cases.items():
        rate = case.get("images_per_sec") if isinstance(case, dict) else "bad"
        if rate is not None and (
            isinstance(rate, bool)
            or not isinstance(rate, (int, float))
            or not math.isfinite(rate)
            or rate <= 0
        ):
            raise BaselineError(f"baseline file {path}: case {key!r} has a bad images_per_sec")
    return BaselineFile(path, str(data.get("hardware", path.parent.name)), commit, cases)


def hardware_keys(root: Path) -> list[str]:
    if not root.is_dir():
        return []
    return sorted(p.name for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))


def commit_files(root: Path, hardware: str) -> dict[str, Path]:
    """``{sha: path}`` of the baseline files stored for one hardware key."""
    folder = root / hardware
    if not folder.is_dir():
        return {}
    return {p.stem: p for p in sorted(folder.glob("*.json")) if _SHA.match(p.stem)}


@contextlib.contextmanager
def _locked(folder: Path) -> Iterator[None]:
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / ".lock", "a+") as fh:
        try:
            import fcntl
        except ImportError:  # pragma: no cover - Windows: atomic rename still protects files
            yield
            return
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def write_json_atomic(path: Path, data: Any) -> None:
    """Write ``data`` as sorted, indented JSON; readers see the old file or the new, never half."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(data, fh, indent=2, sort_keys=True, allow_nan=False)
            fh.write("\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def store(
    root: Path,
    hardware: str,
    commit: Mapping[str, Any],
    cases: Mapping[str, dict[str, Any]],
) -> Path:
    """Merge ``cases`` into ``<root>/<hardware>/<sha>.json``: re-measured cases are replaced
    (keeping the last few run medians as a noise record, see `_with_runs`), the others stay."""
    check_hardware_key(hardware)
    sha = str(commit.get("sha") or "")
    if not _SHA.match(sha):
        raise BaselineError(f"cannot store a baseline without a git commit sha (got {sha!r})")
    folder = root / hardware
    path = folder / f"{sha}.json"
    with _locked(folder):
        old: dict[str, dict[str, Any]] = {}
        if path.exists():
            old = load(path).cases  # raises for a corrupt file: never overwrite it
        merged = dict(old)
        for key, case in cases.items():
            merged[key] = _with_runs(dict(case), old.get(key, {}))
        data = {
            "schema": SCHEMA,
            "hardware": hardware,
            "commit": dict(commit),
            "cases": merged,
        }
        write_json_atomic(path, data)
    return path


def _with_runs(case: dict[str, Any], previous: dict[str, Any]) -> dict[str, Any]:
    """Keep the last few run medians of a case re-measured at the same commit on the same
    software, environment and threads; the stored images/sec is their median (repeated
    updates sample the same quantity), and their spread is the case's between-run noise."""
    same_setup = all(previous.get(k) == case.get(k) for k in ("software", "environment", "threads"))
    runs = [r for r in previous.get("runs", []) if r is not None] if same_setup else []
    latest = case.get("images_per_sec")
    if latest is not None:
        runs.append(latest)
    case["runs"] = runs[-RUNS_KEPT:]
    if latest is not None and len(case["runs"]) > 1:
        case["last_images_per_sec"] = latest
        case["images_per_sec"] = median(case["runs"])
    return case


@dataclass
class Resolution:
    """Per hardware key, the baseline chosen for every case key, and what went wrong."""

    refs: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"refs": self.refs, "warnings": self.warnings, "errors": self.errors}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Resolution:
        return cls(dict(data["refs"]), list(data["warnings"]), list(data["errors"]))


def _ref(
    f: BaselineFile, root: Path, case: dict[str, Any], how: str, distance: int | None
) -> dict[str, Any]:
    try:
        rel = str(f.path.relative_to(root))
    except ValueError:
        rel = str(f.path)
    return {"case": case, "commit": f.commit, "file": rel, "how": how, "distance": distance}


def resolve(
    root: Path,
    ancestors: dict[str, int] | None,
    *,
    shallow: bool = False,
    explicit: str | None = None,
    explicit_label: str | None = None,
) -> Resolution:
    """Choose each case's baseline, for every hardware key stored under ``root``.

    - ``explicit`` (a full or abbreviated sha): that commit's file, for every case it holds.
    - with git history: the nearest ancestor of HEAD holding the case (ties: newer date, then
      the later commit in topological order);
      files of commits that are not ancestors are ignored.
    - without history (no repository), or for cases no ancestor holds in a shallow clone: the
      newest file by commit date holding the case, with a warning.
    """
    res = Resolution()
    for hardware in hardware_keys(root):
        files: list[BaselineFile] = []
        for _sha, path in commit_files(root, hardware).items():
            try:
                files.append(load(path))
            except BaselineError as exc:
                res.errors.append(str(exc))
        refs: dict[str, dict[str, Any]] = {}
        if explicit is not None:
            chosen = [f for f in files if f.sha.startswith(explicit) or explicit.startswith(f.sha)]
            for f in chosen[:1]:
                for key, case in f.cases.items():
                    refs[key] = _ref(f, root, case, f"explicit revision {explicit_label}", None)
            res.refs[hardware] = refs
            continue
        fallback_used = False
        if ancestors is not None:
            topo = {sha: i for i, sha in enumerate(ancestors)}
            ranked = sorted(
                (f for f in files if f.sha in ancestors),
                key=lambda f: (ancestors[f.sha], _neg_date(f.date), topo[f.sha]),
            )
            for f in ranked:
                for key, case in f.cases.items():
                    refs.setdefault(key, _ref(f, root, case, "nearest ancestor", ancestors[f.sha]))
        if ancestors is None or shallow:
            for f in sorted(files, key=lambda f: _neg_date(f.date)):
                for key, case in f.cases.items():
                    if key not in refs:
                        refs[key] = _ref(f, root, case, "newest by commit date", None)
                        fallback_used = True
        if fallback_used:
            why = "no git history" if ancestors is None else "shallow clone"
            res.warnings.append(
                f"{why}: baselines for {hardware} chosen as the newest by commit date, "
                "not the nearest ancestor"
            )
        res.refs[hardware] = refs
    return res


def _neg_date(date: str) -> tuple[int, str]:
    # Sort newest first without parsing: ISO dates in UTC compare as strings.
    return (0, "".join(chr(0x10FFFF - ord(c)) for c in date)) if date else (1, "")
