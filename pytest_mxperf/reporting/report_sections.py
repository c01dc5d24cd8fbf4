"""What the terminal shows of a run: the ``mxperf:`` header lines, and the summary's sections
(the table and grids of `tables`, the sweep grids and data-parallel scaling table of
`sweep_scaling`, verdict counts, cost, peaks, missing baselines and a machine the stored figures
do not describe). Pure functions of the results and the width."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pytest_mxperf.baselines.runinfo import RunInfo
from pytest_mxperf.config.scaling_kind import KIND_TITLES, SCALING_KINDS
from pytest_mxperf.config.settings import Settings
from pytest_mxperf.measuring.records import CaseResult, Outcome
from pytest_mxperf.reporting.jsonreport import peaks
from pytest_mxperf.reporting.sweep_scaling import render_scaling, render_sweeps
from pytest_mxperf.reporting.tables import render_grids, render_table
from pytest_mxperf.system import cpus, fingerprint


def verdict_counts(results: Iterable[CaseResult]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for r in results:
        status = "-" if r.verdict is None else r.verdict.status
        counts[status] = counts.get(status, 0) + 1
    return dict(sorted(counts.items()))


def header_lines(
    run: RunInfo, settings: Settings, threads: Mapping[str, Any], workers: int
) -> list[str]:
    """The ``mxperf:`` lines of pytest's report header: hardware, commit, baselines, threads."""
    commit = run.commit
    state = "dirty" if commit.dirty else "clean" if commit.dirty is False else "?"
    lines = [
        f"mxperf: hardware {run.machine or run.cpu_key} (cpu)"
        + "".join(
            f", gpu {i}: {g['name']}"
            + (f" (nvidia-smi index {g['index']})" if g["index"] != str(i) else "")
            for i, g in enumerate(run.gpus)
        ),
        f"mxperf: commit {commit.short} "
        f"({commit.branch or 'detached'}, {state}, from {commit.source})",
        f"mxperf: baselines {run.baseline_root} "
        f"({run.baselines.count()} case(s) resolved"
        + (f", compared with {settings.compare}" if settings.compare else "")
        + ")",
        *(
            [
                f"mxperf: paired mode: {settings.ab} vs the working tree, {settings.rounds}"
                f"-{settings.max_rounds} rounds, minimum effect {settings.min_effect:.0%}, "
                + _pinned(settings.pair_cpus)
            ]
            if settings.ab
            else []
        ),
        f"mxperf: threads {threads['omp_threads']} OpenMP thread(s) ({threads['source']})",
    ]
    if workers and run.gpus:
        mapping = ", ".join(
            f"gw{i} -> GPU {fingerprint.gpu_for_worker(f'gw{i}', len(run.gpus))}"
            for i in range(workers)
        )
        lines.append(f"mxperf: xdist GPU mapping {mapping}")
    if workers:
        lines.append("mxperf: xdist: CPU benchmarks take turns (one cross-process lock)")
    lines += [f"mxperf: warning: {w}" for w in run.baselines.warnings]
    lines += [f"mxperf: error: {e}" for e in run.baselines.errors]
    return lines


def results_sections(
    results: Sequence[CaseResult],
    stored_keys: Sequence[str],
    width: int,
    *,
    price_per_hour: float | None = None,
    epoch_images: int | None = None,
    memory: bool = False,
) -> list[tuple[str | None, list[str]]]:
    """The summary's result sections as ``(separator title or None, lines)``: the table, the
    grids, the verdict counts and hardware keys that have no baselines here."""
    if not results:
        return []
    table = render_table(
        results, width, price_per_hour=price_per_hour, epoch_images=epoch_images, memory=memory
    )
    sections: list[tuple[str | None, list[str]]] = [
        ("mxperf: throughput (images/sec, median ± half IQR)", table)
    ]
    sections += [(f"mxperf grid: {title}", lines) for title, lines in render_grids(results, width)]
    sections += [(f"mxperf sweep: {t}", lines) for t, lines in render_sweeps(results, width)]
    scaling = render_scaling(results, width)
    if scaling:
        kinds = {r.scaling.kind for r in results if r.scaling is not None}
        said = "; ".join(KIND_TITLES[k] for k in SCALING_KINDS if k in kinds)
        sections.append((f"mxperf: data-parallel scaling ({said})", scaling))
    counts = ", ".join(f"{n} {status}" for status, n in verdict_counts(results).items())
    tail = [f"mxperf verdicts: {counts}"]
    tail += machine_lines(results)
    tail += inconclusive_lines(results)
    unchecked = [r for r in results if r.verdict and r.verdict.unconfirmed]
    if unchecked:
        tail.append(
            f"mxperf: {len(unchecked)} case(s) passed below their stored figures by more than "
            "this machine's noise, with no paired run to check them (see each verdict): "
            + ", ".join(f"{r.key} ({r.verdict.change:+.1%})" for r in unchecked if r.verdict)
        )
    if price_per_hour is not None or epoch_images is not None:
        parts = [] if price_per_hour is None else [f"${price_per_hour:g} per hour"]
        parts += [] if epoch_images is None else [f"epoch = {epoch_images:,} images"]
        tail.append(f"mxperf cost: {', '.join(parts)}")
    found = peaks(results)
    if found:
        tail.append(
            "mxperf peak (matrix multiply): "
            + ", ".join(f"{p['device']} {p['dtype']} {p['peak_gflops']:.1f} GFLOP/s" for p in found)
        )
    for hardware in sorted({r.hardware for r in results} - set(stored_keys)):
        if stored_keys:
            tail.append(
                f"mxperf: no baselines for hardware {hardware}; stored for: "
                f"{', '.join(stored_keys)} (see --mxperf-machine)"
            )
    sections.append((None, tail))
    return sections


def inconclusive_lines(results: Sequence[CaseResult]) -> list[str]:
    """Said once: which cases paired rounds left undecided, and that they pass (or, with
    ``--mxperf-strict``, fail): a user of the gate should not have to read each message to know
    what "inconclusive" did to the run."""
    cases = [r for r in results if r.verdict and r.verdict.outcome == Outcome.INCONCLUSIVE]
    if not cases:
        return []
    failed = any(r.verdict and r.verdict.failed for r in cases)
    effect = "they fail (--mxperf-strict)" if failed else "they pass (--mxperf-strict fails them)"
    return [
        f"mxperf: {len(cases)} case(s) inconclusive: their paired rounds could not decide "
        f"either way; {effect}; each verdict says about how many rounds would decide: "
        + ", ".join(str(r.key) for r in cases)
    ]


#: The stored figures do not describe this machine when their cases measure, in the median,
#: this far from them (a ratio beyond 1/1.15 .. 1.15) and at least two thirds of them lean the
#: same way: a faster or slower host, never a verdict on the code (pairs judge that).
MACHINE_FACTOR = 1.15


def machine_factor(results: Iterable[CaseResult]) -> tuple[float, float, float, int] | None:
    """This machine's img/s over the stored figures, across the cases compared with a stored
    baseline: (median, lowest, highest, cases), or None when the stored figures describe this
    machine (fewer than 3 cases, a median within `MACHINE_FACTOR`, or cases that disagree)."""
    ratios = sorted(
        r.images_per_sec / r.verdict.baseline_images_per_sec
        for r in results
        if r.verdict is not None
        and r.images_per_sec
        and r.verdict.baseline_images_per_sec
        and r.scaling is None
    )
    if len(ratios) < 3:
        return None
    mid = (
        ratios[len(ratios) // 2]
        if len(ratios) % 2
        else math.sqrt(ratios[len(ratios) // 2 - 1] * ratios[len(ratios) // 2])
    )
    if 1 / MACHINE_FACTOR < mid < MACHINE_FACTOR:
        return None
    leaning = sum(1 for x in ratios if (x < 1) == (mid < 1))
    if 3 * leaning < 2 * len(ratios):
        return None
    return mid, ratios[0], ratios[-1], len(ratios)


def machine_lines(results: Sequence[CaseResult]) -> list[str]:
    """Said once: the stored figures do not hold on this machine (by about what factor), and
    what the pairs found for the cases they judged."""
    machine = sum(1 for r in results if r.verdict and r.verdict.outcome == Outcome.MACHINE)
    factor = machine_factor(results)
    if factor is None and not machine:
        return []
    fix = (
        "store a baseline for this machine with --mxperf-update (or name its hardware key "
        "with --mxperf-machine)"
    )
    if factor is None:
        return [
            f"mxperf: {machine} case(s) below their stored figures are no slower than the "
            f"baseline commit's code on this machine: the baselines do not hold here; {fix}"
        ]
    mid, low, high, n = factor
    line = (
        f"mxperf: the stored figures do not hold on this machine: it measures them at about "
        f"{mid:.2f}x (median of {n} cases, {low:.2f}x .. {high:.2f}x)"
    )
    if machine:
        line += (
            f"; {machine} case(s) that looked slower are no slower than the baseline commit's "
            "code here (machine)"
        )
    return [f"{line}; {fix}"]


def _pinned(setting: str) -> str:
    chosen = cpus.for_sides(setting)
    if chosen is None:
        return "sides not pinned to CPUs"
    return f"both sides pinned to CPU {cpus.describe(chosen)} (--mxperf-pair-cpus {setting})"
