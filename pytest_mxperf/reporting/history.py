"""The stored baselines as a history: per hardware key and case, images/sec over the commits of
the first-parent history of HEAD, with the spread of each commit's runs and the changes marked.

Reading the files and placing the commits happen here (the records are in `historytypes`, git's
answers come from `historygit`); drawing happens in ``htmlreport``.
Commits that git does not know, or that are off the first-parent line (a side branch, another
clone), are kept and placed by the date stored in their file; nothing is dropped silently.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as _dt
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pytest_mxperf.baselines import store as baselines
from pytest_mxperf.baselines.store import StoredCase
from pytest_mxperf.config.floors import Floor, floor_for
from pytest_mxperf.config.options import DEFAULTS
from pytest_mxperf.judging.decisions import stored_noise
from pytest_mxperf.reporting.historygit import GitFacts, git_facts, utc_text
from pytest_mxperf.reporting.historytypes import (
    CaseHistory,
    CommitRef,
    HardwareHistory,
    History,
    Mark,
    Point,
)
from pytest_mxperf.reporting.summary import Row

#: A change is marked only beyond this many times the noise of the two commits compared.
NOISE_FACTOR = 2.0
#: Above this threshold the case is too noisy to call a change either way.
MAX_THRESHOLD = 0.5


def _file_date(f: baselines.BaselineFile) -> tuple[str, str]:
    if f.date:
        return utc_text(f.date), "file"
    mtime = _dt.datetime.fromtimestamp(f.path.stat().st_mtime, tz=_dt.timezone.utc)
    return mtime.strftime("%Y-%m-%d %H:%M:%S"), "file time"


def _commit_ref(f: baselines.BaselineFile, facts: GitFacts, index: dict[str, int]) -> CommitRef:
    sha = f.sha
    on_line = [c for c in facts.first_parent if c.sha.startswith(sha)]
    known = on_line or [c for c in facts.known if c.sha.startswith(sha)]
    branch = str(f.commit.get("branch") or "")
    dirty = bool(f.commit.get("dirty"))
    if known:
        c = known[0]
        return CommitRef(c.sha, c.date, c.subject, branch, dirty, index.get(c.sha), "git")
    date, source = _file_date(f)
    return CommitRef(sha, date, "", branch, dirty, None, source)


def _spread(case: dict[str, Any], rate: float | None) -> tuple[float | None, float | None, str]:
    runs = [float(r) for r in case.get("runs") or [] if isinstance(r, (int, float)) and r]
    if rate is None:
        return None, None, ""
    if len(runs) >= 2:
        return min(runs), max(runs), f"range of {len(runs)} runs"
    iqr = case.get("iqr")
    if not isinstance(iqr, (int, float)):
        iqr = float(case.get("rel_iqr") or 0.0) * rate
    return rate - iqr / 2, rate + iqr / 2, "IQR of the blocks (one run)"


def _point(stored: StoredCase, ref: CommitRef) -> Point:
    case = stored.record
    rate, runs = stored.images_per_sec, stored.runs
    low, high, kind = _spread(case, rate)
    # The same noise the verdict uses: block spread, and half the range of repeated runs.
    noise = stored_noise(stored.rel_iqr, stored)
    return Point(ref, rate, low, high, kind, runs, noise)


def mark_changes(points: Sequence[Point], tolerance: float) -> list[Point]:
    """Each point compared with the previous point that has a figure: the change is marked
    when it exceeds the larger of ``tolerance`` and twice the noise of the two points."""
    marked: list[Point] = []
    previous: Point | None = None
    for p in points:
        if p.images_per_sec is None:
            marked.append(_replace(p, mark=Mark.OOM))
            continue
        if previous is None or previous.images_per_sec is None:
            marked.append(_replace(p, mark=Mark.NEW))
            previous = p
            continue
        change = p.images_per_sec / previous.images_per_sec - 1.0
        threshold = max(tolerance, NOISE_FACTOR * max(p.noise, previous.noise))
        if threshold > MAX_THRESHOLD:
            mark = Mark.UNSTABLE
        elif change < -threshold:
            mark = Mark.REGRESSED
        elif change > threshold:
            mark = Mark.IMPROVED
        else:
            mark = Mark.PASS
        marked.append(_replace(p, change=change, threshold=threshold, mark=mark))
        previous = p
    return marked


def _replace(p: Point, **changes: Any) -> Point:
    return dataclasses.replace(p, **changes)


def _key_parts(key: str, case: dict[str, Any]) -> tuple[str, str, str, int, str]:
    # Case keys are "model/mode/dtype/bsN/device"; stored fields win when present.
    parts = key.split("/")
    parts += [""] * (5 - len(parts))
    batch = case.get("batch_size")
    if not isinstance(batch, int):
        digits = parts[3][2:] if parts[3].startswith("bs") else ""
        batch = int(digits) if digits.isdigit() else 0
    return (
        str(case.get("model") or parts[0]),
        str(case.get("mode") or parts[1]),
        str(case.get("dtype") or parts[2]),
        batch,
        str(case.get("device_kind") or parts[4]),
    )


def _hardware_history(
    root: Path,
    hardware: str,
    files: list[baselines.BaselineFile],
    facts: GitFacts,
    tolerance: float,
    floors: Sequence[Floor],
) -> HardwareHistory:
    index = {c.sha: i for i, c in enumerate(facts.first_parent)}
    refs = {f.path: _commit_ref(f, facts, index) for f in files}

    def order(f: baselines.BaselineFile) -> tuple[int, int, str]:
        ref = refs[f.path]
        if ref.position is not None:
            return (0, ref.position, ref.date)
        return (1, 0, ref.date)

    files = sorted(files, key=order)
    keys = sorted({k for f in files for k in f.cases})
    cases = []
    for key in keys:
        holding = [f for f in files if key in f.cases]
        points = [_point(f.cases[key], refs[f.path]) for f in holding]
        on_line = [p for p in points if p.commit.in_history] or points
        off_line = [p for p in points if p not in on_line]
        model, mode, dtype, batch, device = _key_parts(key, holding[-1].cases[key].record)
        cases.append(
            CaseHistory(
                hardware,
                key,
                model,
                mode,
                dtype,
                batch,
                device,
                tuple(mark_changes(on_line, tolerance) + mark_changes(off_line, tolerance)),
                floor_for(floors, hardware, model, mode, dtype, batch),
            )
        )
    commits = tuple(refs[f.path] for f in files)
    notes = []
    off = [c for c in commits if not c.in_history]
    if facts.first_parent and off and len(off) < len(commits):
        notes.append(
            f"{len(off)} of {len(commits)} stored commits are not in the first-parent history "
            "of HEAD: drawn hollow, placed by their date, and not compared."
        )
    elif facts.first_parent and off:
        notes.append(
            f"None of the {len(commits)} stored commits is in the first-parent history of HEAD: "
            "ordered and compared by the date in their files."
        )
    return HardwareHistory(hardware, tuple(cases), commits, tuple(notes))


def load_history(
    root: Path,
    *,
    tolerance: float = DEFAULTS["unconfirmed_tolerance"],
    floors: Sequence[Floor] = (),
    git: GitFacts | None = None,
) -> History:
    """Read every baseline under ``root`` and place it in the git history of the repository
    holding ``root`` (``git`` overrides what is asked of git, for tests)."""
    errors: list[str] = []
    loaded: dict[str, list[baselines.BaselineFile]] = {}
    for key in baselines.hardware_keys(root):
        for path in baselines.commit_files(root, key).values():
            try:
                loaded.setdefault(key, []).append(baselines.load(path))
            except baselines.BaselineError as exc:
                errors.append(str(exc))
    shas = {f.sha for files in loaded.values() for f in files}
    facts = git if git is not None else git_facts(root, shas)
    shown = shown_root(root, facts.repo_root)
    notes = []
    if facts.repo_root is None:
        notes.append(
            f"No git repository holds {shown}: commits are ordered by the date stored in each "
            "baseline file."
        )
    elif facts.head is None:
        notes.append(f"The repository {facts.name} has no commits: ordered by file dates.")
    hardware = tuple(
        _hardware_history(root, hw, files, facts, tolerance, floors)
        for hw, files in sorted(loaded.items())
    )
    return History(str(root), facts, tolerance, hardware, tuple(notes), tuple(errors), shown)


def shown_root(root: Path, repo_root: str | None) -> str:
    """The baseline directory as a published page names it: its path inside the repository,
    or (outside one) its own name; never this machine's absolute path."""
    where = Path(root).resolve()
    if repo_root is not None:
        with contextlib.suppress(ValueError):
            inside = where.relative_to(Path(repo_root).resolve()).as_posix()
            return inside if inside != "." else where.name
    return where.name or str(root)


def summary_rows(history: History) -> list[Row]:
    """The latest point of every case as a summary :class:`Row` (change vs the previous commit
    on the line)."""
    rows = []
    for hw in history.hardware:
        for case in hw.cases:
            latest = case.latest
            before = None
            if latest.change is not None and latest.images_per_sec is not None:
                before = latest.images_per_sec / (1.0 + latest.change)
            rows.append(
                Row(
                    case=case.key,
                    model=case.model,
                    mode=case.mode,
                    dtype=case.dtype,
                    batch_size=case.batch_size,
                    device=case.device,
                    images_per_sec=latest.images_per_sec,
                    spread=latest.spread,
                    baseline_images_per_sec=before,
                    change=latest.change,
                    verdict=case.verdict.value,
                    hardware=hw.hardware,
                )
            )
    return rows
