"""Chrome-trace files of a profile: MXNet's trace events read back, written with their table."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_mxperf.profiles.profile_record import ProfileUnavailable
from pytest_mxperf.system.files import write_text_atomic


@dataclass(frozen=True)
class TraceFiles:
    """Where a case's Chrome trace and aggregate table were written."""

    trace: Path
    table: Path


def read_trace_events(path: Path, offset: int = 0) -> list[dict[str, Any]]:
    """The trace events MXNet wrote to ``path`` after byte ``offset``, as a list."""
    try:
        with path.open("rb") as f:
            f.seek(offset)
            text = f.read().decode("utf-8", errors="replace").strip()
    except OSError as exc:
        raise ProfileUnavailable(f"cannot read MXNet's trace events ({exc})") from None
    # Only the process's first dump carries the header; no dump here ever writes the footer.
    header = re.match(r'\{\s*"traceEvents"\s*:\s*\[', text)
    if header:
        text = text[header.end() :]
    footer = re.search(r'\]\s*,\s*"displayTimeUnit"\s*:\s*"[a-z]+"\s*\}\s*$', text)
    if footer:
        text = text[: footer.start()]
    text = text.strip().lstrip(",").strip().rstrip(",")
    try:
        events = json.loads(f"[{text}]")
    except ValueError as exc:
        raise ProfileUnavailable(f"MXNet's trace events are not valid JSON ({exc})") from None
    if not all(isinstance(e, dict) for e in events):
        raise ProfileUnavailable("MXNet's trace events are not JSON objects")
    return _with_process_names(events)


def _with_process_names(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    # MXNet names its processes (devices, categories) only in the first dump of a process;
    # name the others after their category so the viewer shows a label, not a big number.
    named = {e.get("pid") for e in events if e.get("ph") == "M" and e.get("name") == "process_name"}
    extra: list[dict[str, Any]] = []
    for event in events:
        pid = event.get("pid")
        if pid is not None and pid not in named:
            named.add(pid)
            label = str(event.get("cat") or f"process {pid}")
            extra.append({"ph": "M", "name": "process_name", "pid": pid, "args": {"name": label}})
    return extra + events


def table_path_for(trace_path: Path) -> Path:
    """The aggregate table beside a trace: ``x.trace.json`` -> ``x.table.txt``."""
    name = trace_path.name
    for suffix in (".trace.json", ".json"):
        if name.endswith(suffix):
            return trace_path.with_name(name[: -len(suffix)] + ".table.txt")
    return trace_path.with_name(name + ".table.txt")


def write_trace(trace_path: Path, events: list[dict[str, Any]], table: str) -> TraceFiles:
    """Write a Chrome trace of ``events`` and the aggregate ``table`` beside it."""
    table_path = table_path_for(trace_path)
    trace_path.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(trace_path, json.dumps({"traceEvents": events, "displayTimeUnit": "ms"}))
    write_text_atomic(table_path, table if table.endswith("\n") else table + "\n")
    return TraceFiles(trace_path, table_path)
