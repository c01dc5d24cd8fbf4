"""Where a run's files go: checking at the start that they can be written, and keeping the
measured results when writing still fails at the end (pure: no pytest)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

from pytest_mxperf.system import files
from pytest_mxperf.system.files import write_json_atomic, write_text_atomic


def unwritable(path: Path, *, directory: bool) -> str | None:
    """Why files cannot be written at ``path`` (a directory to write into, or a file), or None.

    The nearest existing ancestor must be a writable directory: a path under a regular file,
    or in a read-only directory, fails here, before anything is measured.
    """
    if not directory and path.is_dir():
        return f"{path} is a directory"
    if not directory:
        try:
            if files.special(path):  # a FIFO or character device: written in place
                return None if os.access(path, os.W_OK) else f"{path} is not writable"
        except OSError as exc:
            return f"{path} is {exc.strerror}"
        # A symlink is written through: its target's folder takes the new file.
        path = Path(os.path.realpath(path)) if path.is_symlink() else path
    probe = path if directory else path.parent
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    if not probe.is_dir():
        return f"{probe} is not a directory"
    if not os.access(probe, os.W_OK | os.X_OK):
        return f"{probe} is not writable"
    return None


def fallback_report_path(run_id: str) -> Path:
    """Where the JSON report goes when the place asked for cannot be written."""
    return Path(tempfile.gettempdir()) / f"pytest-mxperf-report-{run_id}.json"


def write_report(path: Path | None, data: Any, run_id: str) -> tuple[Path | None, str | None]:
    """Write the JSON report to ``path``; if that fails (or ``path`` is None), to the fallback.

    :returns: ``(where it was written or None, a one-line error or None)``.
    """
    problem = None
    if path is not None:
        try:
            write_json_atomic(path, data)
            return path, None
        except OSError as exc:
            problem = f"cannot write the JSON report to {path}: {exc.strerror or exc}"
    fallback = fallback_report_path(run_id)
    try:
        write_json_atomic(fallback, data)
    except OSError as exc:
        return None, f"{problem + '; ' if problem else ''}results not saved: {fallback}: {exc}"
    saved = f"measured results saved to {fallback}"
    return fallback, f"{problem}; {saved}" if problem else saved


def check_outputs(json_path: str | None, baseline_root: str | None) -> str | None:
    """A usage error for an output the run could not write (checked before measuring)."""
    if json_path:
        why = unwritable(Path(json_path), directory=False)
        if why:
            return f"mxperf: --mxperf-json: cannot write {json_path} ({why})"
    if baseline_root:
        why = unwritable(Path(baseline_root), directory=True)
        if why:
            return (
                f"mxperf: --mxperf-update: cannot write baselines under {baseline_root} ({why}); "
                "see --mxperf-baseline-dir"
            )
    return None


def check_profile(profile: str | None) -> str | None:
    """A usage error for a ``--mxperf-profile`` directory the run could not write its traces
    into (checked before measuring: a profile is written after each case is measured)."""
    if profile:
        why = unwritable(Path(profile), directory=True)
        if why:
            return f"mxperf: --mxperf-profile: cannot write profiles under {profile} ({why})"
    return None


def check_summaries(markdown: str | None, benchmark_action: str | None) -> str | None:
    """A usage error for a CI summary file the run could not write (checked before measuring)."""
    for option, path in (("markdown", markdown), ("benchmark-action", benchmark_action)):
        if path:
            why = unwritable(Path(path), directory=False)
            if why:
                return f"mxperf: --mxperf-{option}: cannot write {path} ({why})"
    return None


def write_summaries(
    markdown: str | None,
    benchmark_action: str | None,
    markdown_text: str,
    action_data: Any,
    step_summary: str | None,
) -> tuple[list[str], list[str]]:
    """Write the Markdown summary (and append it to GitHub's job summary file
    ``step_summary`` when set) and the github-action-benchmark JSON.

    :returns: ``(what was written, one error per failure)``.
    """
    written: list[str] = []
    errors: list[str] = []
    if markdown:
        try:
            write_text_atomic(Path(markdown), markdown_text)
            written.append(markdown)
        except OSError as exc:
            errors.append(f"cannot write the Markdown summary to {markdown}: {exc.strerror or exc}")
        if step_summary:
            # GitHub's file collects every step's summary: appended to, never replaced.
            try:
                with open(step_summary, "a", encoding="utf-8") as fh:
                    fh.write(markdown_text + "\n")
                written.append(f"GITHUB_STEP_SUMMARY ({step_summary})")
            except OSError as exc:
                errors.append(
                    f"cannot append to GITHUB_STEP_SUMMARY {step_summary}: {exc.strerror or exc}"
                )
    if benchmark_action:
        try:
            write_json_atomic(Path(benchmark_action), action_data)
            written.append(benchmark_action)
        except OSError as exc:
            errors.append(
                f"cannot write the benchmark-action JSON to {benchmark_action}: "
                f"{exc.strerror or exc}"
            )
    return written, errors
