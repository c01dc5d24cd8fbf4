"""Profile a case's warmed-up steps with MXNet's profiler, and write its trace if asked.

The runner calls :func:`profile_step` after it has measured a case, never inside a timed block:
the profiler with aggregate statistics costs speed. A profile holds, per operator, how often it
ran and how long it took over a known number of steps, so two profiles (baseline and now) can be
compared per step and per image even when they ran a different number of steps. The record is
`profile_record`'s, the trace files `profile_trace`'s; the comparison is `profile_diff` and its
message `profile_render` (all in this wing).

Facts of MXNet 1.9.1 this module is built on (tried on this machine):

- ``dumps()`` writes the pending trace events to the configured trace file before it returns the
  aggregate statistics, and ``reset=True`` clears those statistics (safe only while
  ``aggregate_stats`` is on).
- ``dump(finished=True)`` closes the trace file, and any later ``set_config`` in the process then
  fails inside dmlc's thread group. So this module never calls ``dump``: it reads the events
  MXNet appended to a scratch file and writes the Chrome trace itself.
- The trace file gets its ``{"traceEvents": [`` header only on the first dump of the process;
  later files hold bare ``,``-separated events.
"""

from __future__ import annotations

import contextlib
import re
import tempfile
from hashlib import sha1
from pathlib import Path
from typing import Any, Callable

from pytest_mxperf.profiles.profile_record import (
    OperatorProfile,
    ProfileUnavailable,
    parse_aggregate_json,
)
from pytest_mxperf.profiles.profile_trace import (
    read_trace_events,
    write_trace,
)

Step = Callable[[], object]
Sync = Callable[[], object]


# profiling ------------------------------------------------------------------------------------
def profile_step(
    step: Step,
    sync: Sync,
    steps: int,
    mx: Any,
    trace_path: str | Path | None = None,
    *,
    items_per_step: int = 1,
) -> OperatorProfile:
    """Run ``steps`` already warmed-up steps under MXNet's profiler and return their profile.

    With ``trace_path`` the Chrome trace (``traceEvents``, for chrome://tracing or Perfetto) is
    written there and MXNet's aggregate table beside it (see :func:`table_path_for`).

    The profiler is left stopped with its statistics cleared, also when the step raises. Every
    failure, the step's included, becomes :class:`ProfileUnavailable`: a profile explains a
    regression, so its absence must not hide one.
    """
    if steps < 1:
        raise ValueError("profile_step needs steps >= 1")
    try:
        profiler = mx.profiler
    except AttributeError:
        raise ProfileUnavailable("this MXNet has no profiler module") from None
    with tempfile.TemporaryDirectory(prefix="mxperf-profile-") as scratch:
        # MXNet writes its trace events here; trace_path is written by us from this file,
        # so MXNet's end-of-process dump can never touch the user's trace.
        events_file = Path(scratch) / "events.json"
        started = False
        try:
            _configure(profiler, sync, events_file)
            offset = events_file.stat().st_size if events_file.exists() else 0
            started = True  # from here on, whatever happens, stop and clear on the way out
            _guard(lambda: profiler.set_state("run"), "set_state('run')")
            _run_steps(step, sync, steps)
            _guard(lambda: profiler.set_state("stop"), "set_state('stop')")
            table = ""
            if trace_path is not None:  # the table must be read before the json dump resets
                table = _guard(lambda: str(profiler.dumps(format="table")), "dumps(format='table')")
            text = _guard(
                lambda: str(profiler.dumps(format="json", reset=True)), "dumps(format='json')"
            )
            profile = parse_aggregate_json(text, steps=steps, items_per_step=items_per_step)
            if trace_path is not None:
                events = read_trace_events(events_file, offset)
                write_trace(Path(trace_path), events, table)
            return profile
        finally:
            if started:
                _leave_stopped(profiler)


def _configure(profiler: Any, sync: Sync, events_file: Path) -> None:
    """The profiler stopped, set to aggregate every operator and to write its trace events to
    ``events_file``, with whatever an earlier user left queued or counted dropped."""
    _guard(lambda: sync(), "sync before profiling")
    _guard(lambda: profiler.set_state("stop"), "set_state('stop')")
    _guard(
        lambda: profiler.set_config(
            profile_all=True, aggregate_stats=True, filename=str(events_file)
        ),
        "set_config",
    )
    _guard(lambda: profiler.dumps(reset=True), "dumps(reset=True)")


def _run_steps(step: Step, sync: Sync, steps: int) -> None:
    try:
        for _ in range(steps):
            step()
        sync()
    except Exception as exc:
        # Let work the step already queued finish while we still clear up after it,
        # so none of it lands in the next profile.
        with contextlib.suppress(Exception):
            sync()
        raise ProfileUnavailable(f"the step raised {_short(exc)}") from exc


def _guard(call: Callable[[], Any], what: str) -> Any:
    try:
        return call()
    except ProfileUnavailable:
        raise
    except Exception as exc:
        raise ProfileUnavailable(f"{what} failed: {_short(exc)}") from exc


def _leave_stopped(profiler: Any) -> None:
    # Best effort: an error here must not replace the one being raised (if any), and the
    # next profile clears leftovers itself before it starts.
    with contextlib.suppress(Exception):
        profiler.set_state("stop")
    with contextlib.suppress(Exception):
        profiler.dumps(reset=True)


def _short(exc: BaseException) -> str:
    # MXNetError messages are C++ tracebacks; their last line says what went wrong.
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    text = lines[-1] if lines else ""
    name = type(exc).__name__
    text = text[len(name) + 1 :].strip() if text.startswith(name + ":") else text
    text = text if len(text) <= 200 else text[:197] + "..."
    return f"{name}: {text}" if text else name


def safe_case_name(case_key: str) -> str:
    """A file name for a case key: readable, and unique even when characters were replaced."""
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", case_key).strip("._") or "case"
    if safe != case_key or len(safe) > 120:
        # "a/b" and "a_b" must not share a file: the hash of the real key tells them apart.
        safe = f"{safe[:120]}-{sha1(case_key.encode('utf-8')).hexdigest()[:8]}"
    return safe
