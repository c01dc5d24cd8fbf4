"""What changed between two records of the software under a figure (software, environment,
threads), and the message lines that name it."""

from __future__ import annotations

from typing import Any, Protocol

from pytest_mxperf.baselines.resolution import BaselineRef
from pytest_mxperf.measuring.records import CaseResult


def diff_stack(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """What changed between two software/environment records, as ``name: old -> new``."""
    lines = []
    for name in sorted(set(old) | set(new)):
        a, b = old.get(name), new.get(name)
        if a != b:
            lines.append(f"{name}: {'unset' if a is None else a} -> {'unset' if b is None else b}")
    return lines


class _Stack(Protocol):
    """What a stored case and a measured one both record of the software under them."""

    @property
    def software(self) -> dict[str, Any]: ...
    @property
    def environment(self) -> dict[str, Any]: ...
    @property
    def threads(self) -> dict[str, Any]: ...


def changes_between(old: _Stack, new: _Stack) -> list[str]:
    """Software, environment and thread differences between two records, ``name: old -> new``."""
    changed = diff_stack(old.software, new.software) + diff_stack(old.environment, new.environment)
    # The usable CPU count is part of the hardware key already, and a paired run's sides are
    # pinned to fewer CPUs on purpose (`system.cpus`: never changing the thread count).
    old_threads = {k: v for k, v in old.threads.items() if k != "usable_cpus"}
    new_threads = {k: v for k, v in new.threads.items() if k != "usable_cpus"}
    if old_threads != new_threads:
        changed += diff_stack(old_threads, new_threads)
    return changed


def what_changed(result: CaseResult, ref: BaselineRef) -> list[str]:
    """Software, environment and thread differences between the baseline and this run."""
    return changes_between(ref.case, result)


def sides_line(rev: _Stack, head: _Stack, rev_label: str, head_name: str = "HEAD") -> str | None:
    """The line of a paired message naming what the two sides ran differently (with
    ``--mxperf-env-command`` REV's side runs in its own environment); None when nothing did."""
    changed = changes_between(rev, head)
    if not changed:
        return None
    return f"the sides ran different software ({rev_label} -> {head_name}): {', '.join(changed)}"


def changed_line(result: CaseResult, ref: BaselineRef) -> str:
    """The message line naming what changed in software, environment and threads."""
    changed = what_changed(result, ref)
    return "changed since the baseline: " + ("; ".join(changed) or "nothing recorded")
