"""The run's state while pytest runs: settings, run facts, results collected from every test
report (with or without xdist), and what happens at the end (store, JSON, summary)."""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pytest_mxperf.baselines.runinfo import RunInfo
from pytest_mxperf.config.casekey import CaseKey
from pytest_mxperf.config.settings import Settings
from pytest_mxperf.config.sideorders import SideOrders
from pytest_mxperf.history import fromrun
from pytest_mxperf.judging.decisions import stored_threshold
from pytest_mxperf.measuring.protocol import Backend
from pytest_mxperf.measuring.records import CaseResult, by_key
from pytest_mxperf.paired import pairjson
from pytest_mxperf.paired.more_rounds import Clears
from pytest_mxperf.paired.pairdata import PairedData
from pytest_mxperf.paired.pairing import Pairer
from pytest_mxperf.paired.sides import read_plan, read_reuse
from pytest_mxperf.paired.turns import Baton
from pytest_mxperf.reporting import jsonreport, report_sections, summary
from pytest_mxperf.run import outputs
from pytest_mxperf.run.collected import Collected, collect_error_text
from pytest_mxperf.run.preflight import Preflight
from pytest_mxperf.run.updating import StoreReport, store_results
from pytest_mxperf.system import codec, fingerprint, gitinfo, locks

#: The name results travel under on ``report.user_properties``.
PROPERTY = "mxperf"


def _to_stderr(text: str) -> None:
    print(text, file=sys.__stderr__, flush=True)


class MxperfSession:
    """One per run, in ``config.stash``; the plugin's hooks delegate to it."""

    def __init__(
        self, settings: Settings, run: RunInfo, *, is_worker: bool, side: SideOrders | None = None
    ) -> None:
        self.settings = settings
        #: What this process was told as a side of a paired run (None: it is no side).
        self.side = side
        self.run = run
        self.is_worker = is_worker
        self.collected = Collected()
        #: case key -> node id of the test that measured it (duplicate keys are an error).
        self.seen: dict[CaseKey, str] = {}
        self.errors: list[str] = []
        #: A lock-step side's end of the controller's socket (`turns`); it holds the baton
        #: from here on, so nothing this process does runs beside the other side's timed work.
        self.baton: Baton | None = None
        if side is not None and side.turns is not None:
            self.baton = Baton(side.turns, side.spread)
        #: A paired run's side after its first round: steps per block by case key.
        self.block_plan: dict[CaseKey, int] = {}
        #: A paired run's side in a later round: its earlier result of each case the round
        #: does not measure again, by case key (`roles.Side` hands it back unmeasured).
        self.reused: dict[CaseKey, CaseResult] = {}
        try:
            if side is not None and side.plan is not None:
                self.block_plan = read_plan(side.plan)
            if side is not None and side.reuse is not None:
                self.reused = read_reuse(side.reuse)
        except ValueError as exc:
            raise pytest.UsageError(f"mxperf: {exc}") from None
        self.stored = StoreReport()
        #: Where the JSON report was written (None: not written).
        self.report_path: Path | None = None
        #: The CI summaries written (``--mxperf-markdown``, ``--mxperf-benchmark-action``).
        self.summaries: list[str] = []
        #: What ``--mxperf-history`` added to its store ('' when nothing).
        self.history_added = ""
        #: ``(node id, last lines of the error)`` of files or tests that could not be collected.
        self.collect_errors: list[tuple[str, str]] = []
        #: The rounds of ``--mxperf-ab``, run once the tests are collected.
        self.paired: PairedData | None = None
        self._pairer: Pairer | None = None
        self._same_code: dict[str, bool] = {}
        #: One line on the terminal now, whatever the capture (the plugin's hooks set it).
        self.tell: Callable[[str], None] = _to_stderr
        #: The calibration against the stored baselines, and the joint pair it may have run.
        self.preflight = Preflight()
        #: Matrix-multiply peak per (device kind, index, dtype), probed once per process.
        self.peaks: dict[tuple[str, int, str], float | None] = {}

    @property
    def pairer(self) -> Pairer:
        """Paired runs of this session (worktrees made on first use, removed by `close`)."""
        if self._pairer is None:
            root = Path(self.run.commit.repo_root or self.run.rootdir)
            self._pairer = Pairer(
                self.settings,
                root,
                Path(self.run.rootdir),
                hold=functools.partial(
                    locks.all_devices,
                    self.run.lock_dir,
                    self.run.device_lock_names(),
                    self._waiting,
                ),
                # Not on a GPU: cuDNN's autotune times algorithms in a side's first steps.
                overlap=self.run.device_lock_names() == ["cpu"],
                tell=lambda text: self.tell(text),
            )
        return self._pairer

    def _waiting(self, device: str, holder: str) -> None:
        """A paired round waits for a device lock: said as a plain run's case says it."""
        what = f"paired run vs {self.settings.ab}" if self.settings.ab else "paired run"
        self.tell(
            f"mxperf: {what}: waiting for the {device} lock: another pytest --mxperf run on "
            f"this machine is measuring ({holder}); runs take turns"
        )

    def peak_gflops(
        self, backend: Backend, ctx: Any, device: tuple[str, int], dtype: str
    ) -> float | None:
        """The device's peak for ``dtype``, probed on first use in this process (the one that
        measures: a worker or the controller) and kept for the run (a paired run's side probes
        none: `case.roles.Side`)."""
        key = (*device, dtype)
        if key not in self.peaks:
            try:
                self.peaks[key] = backend.peak_gflops(ctx, dtype)
            except Exception:
                self.peaks[key] = None  # no % of peak rather than a lost case
        return self.peaks[key]

    def why_no_pair(self, sha: str | None) -> str | None:
        """None when a case may be arbitrated against commit ``sha``; else why not."""
        if not self.settings.arbitrate:
            return "--mxperf-arbitrate is off"
        if self.settings.update:
            return "not in update mode"
        if not sha:
            return "the baseline names no commit"
        if not self.run.commit.repo_root:
            return "no git repository here"
        if gitinfo.rev_parse(self.run.commit.repo_root, sha) is None:
            if gitinfo.is_shallow(self.run.commit.repo_root):
                why = f"the baseline commit {sha[:10]} is not in this shallow clone"
                return f"{why}: {gitinfo.DEEPEN}"
            return f"the baseline commit {sha[:10]} is not in this clone"
        return None

    def clears(self, hardware: str) -> Clears:
        """For a pair that arbitrates cases on ``hardware`` (a run's joint pair, or one case's):
        the loss each case's arbitration must rule out to clear it, where its stored baseline
        makes that wider than the minimum effect (`decisions.stored_threshold`; None: no stored
        throughput, or a data-parallel case, judged on its scaling efficiency)."""
        tolerance = self.settings.tolerance

        def threshold(key: CaseKey) -> float | None:
            ref = self.run.baseline_for(hardware, key)
            if ref is None or ref.case.images_per_sec is None or ref.case.efficiency is not None:
                return None
            return stored_threshold(ref.case, tolerance)

        return threshold

    def nothing_to_pair(self, sha: str, software_changed: bool) -> bool:
        """A pair of ``sha`` and the working tree could only measure the same code twice: git
        finds no difference outside the baseline directory (asked once per sha), and no pair
        in ``sha``'s own environment (--mxperf-env-command) would judge a software change."""
        if software_changed and self.settings.env_command:
            return False
        if sha not in self._same_code:
            found = gitinfo.differs_from(self.run.commit.repo_root, sha, (self.run.baseline_root,))
            self._same_code[sha] = found == []
        return self._same_code[sha]

    def run_ab(self, nodeids: list[str], progress: Callable[[str], None]) -> None:
        """Measure ``--mxperf-ab``'s revision and the working tree, paired, before the tests."""
        rev = self.settings.ab
        assert rev is not None and self.run.commit.repo_root
        sha = gitinfo.rev_parse(self.run.commit.repo_root, rev)
        assert sha is not None  # checked when the run was configured
        # A dirty tree is measured as it is: say so, not "HEAD" (which may be REV itself).
        head = "the working tree" if self.run.commit.dirty else "HEAD"
        self.paired = self.pairer.run(rev, sha, nodeids, progress, head_name=head)

    def close(self) -> None:
        if self._pairer is not None:
            self._pairer.close()
        if self.baton is not None:
            self.baton.close()

    def collect_error(self, nodeid: str, text: str) -> None:
        self.collect_errors.append((nodeid, collect_error_text(text)))

    def failures(
        self, results: list[CaseResult], properties: list[tuple[str, object]]
    ) -> list[str]:
        """Put each case on the test's ``user_properties``; return the failure messages."""
        failures = []
        for result in results:
            properties.append((PROPERTY, codec.to_dict(result)))
            if result.verdict is not None and result.verdict.failed:
                failures.append("mxperf: " + result.verdict.message)
        return failures

    def collect(self, properties: list[tuple[str, object]]) -> None:
        for name, value in properties:
            if name == PROPERTY and isinstance(value, dict):
                self.collected.add(value)

    def header(self, workers: int) -> list[str]:
        threads = fingerprint.threads_in_force(os.environ)
        return report_sections.header_lines(self.run, self.settings, threads, workers)

    def finish(self, interrupted: bool) -> bool:
        """Store baselines and write the JSON report; True when the run must fail."""
        s = self.settings
        self.errors += self.collected.duplicates
        if s.strict:
            self.errors += self.run.baselines.errors
        if s.update and interrupted:
            self.errors.append("run interrupted: baselines not updated (stored files unchanged)")
        elif s.update:
            self.stored = store_results(
                self.collected.results,
                self.run.commit,
                Path(self.run.baseline_root),
                self.run.machine_id,
                self.run.plugin_version,
            )
            self.errors += self.stored.errors
        if s.json or s.history or self.stored.write_failed:
            # A file that could not be written never loses the measured results: the report
            # then goes to a temporary file, named in the errors.
            extra: dict[str, Any] = {
                "errors": self.errors,
                "crashed": self.collected.crashed,
                "baseline_errors": self.run.baselines.errors,
                "baseline_warnings": self.run.baselines.warnings,
            }
            if self.paired is not None:
                extra["paired"] = pairjson.as_dict(self.paired)
            calibration = self.preflight.as_dict()
            if calibration is not None:
                extra["calibration"] = calibration
            if self.preflight.data is not None:
                extra["joint_pair"] = pairjson.as_dict(self.preflight.data)
            if self._pairer is not None and not s.ab:
                # Every pair of a stored-baseline run (the cases' own, the joint one): where
                # its time went, per round and per case.
                extra["pair_runs"] = [pairjson.as_dict(d) for d in self._pairer.runs()]
            data = jsonreport.to_json(self.collected.results, self.run, codec.to_dict(s), extra)
            if s.json or self.stored.write_failed:
                wanted = Path(s.json) if s.json else None
                self.report_path, problem = outputs.write_report(wanted, data, self.run.run_id)
                if problem:
                    self.errors.append(problem)
            if s.history and not interrupted:
                repo = self.run.commit.repo_root
                self.history_added, problem = fromrun.add_from_run(data, s.history, repo)
                self.errors += [problem] if problem else []
        self.summaries, problems = self.write_summaries(os.environ.get("GITHUB_STEP_SUMMARY"))
        self.errors += problems
        return bool(self.errors)

    def write_summaries(self, step_summary: str | None) -> tuple[list[str], list[str]]:
        """``--mxperf-markdown`` (also appended to GitHub's job summary file when one is set)
        and ``--mxperf-benchmark-action``: ``(what was written, errors of writes that failed)``."""
        s = self.settings
        if not s.markdown and not s.benchmark_action:
            return [], []
        rows = [jsonreport.summary_row(r) for r in sorted(self.collected.results, key=by_key)]
        return outputs.write_summaries(
            s.markdown,
            s.benchmark_action,
            summary.to_markdown(rows),
            summary.to_benchmark_action(rows),
            step_summary,
        )

    def summary(
        self, width: int, errors_only: bool = False
    ) -> list[tuple[str, str | None, dict[str, bool]]]:
        """What the terminal summary prints: ``(kind, text, markup)`` with kind ``sep`` (a
        separator line titled ``text``) or ``line``; ``errors_only`` for ``-qq``."""
        red = {"red": True}
        alerts: list[tuple[str, str | None, dict[str, bool]]] = [
            ("line", f"mxperf: worker crashed: {c}", red) for c in self.collected.crashed
        ]
        # Unreadable baseline files are in the header too, which -q hides: repeat them here.
        alerts += [
            ("line", f"mxperf: error: {e}", red)
            for e in self.run.baselines.errors
            if e not in self.errors
        ]
        if self.errors:
            alerts.append(
                ("sep", f"mxperf: {len(self.errors)} error(s)", {"red": True, "bold": True})
            )
            alerts += [("line", e, red) for e in self.errors]
        if errors_only:
            return alerts
        out: list[tuple[str, str | None, dict[str, bool]]] = []
        stored = self.run.baselines.stored_keys()
        sections = report_sections.results_sections(
            self.collected.results,
            stored,
            width,
            price_per_hour=self.settings.price_per_hour,
            epoch_images=self.settings.epoch_images,
            memory=self.settings.memory,
        )
        for title, lines in sections:
            if title is not None:
                out.append(("sep", title, {}))
            out += [("line", line, {}) for line in lines]
        calibration = self.preflight.describe()
        if calibration is not None:
            out.append(("line", calibration, {}))
        out += [("line", line, {}) for line in self.preflight.describe_hour()]
        out += [("line", f"mxperf: baseline written: {w}", {}) for w in self.stored.written]
        out += [("line", f"mxperf: not stored as baseline: {w}", {}) for w in self.stored.skipped]
        if self.settings.json and self.report_path == Path(self.settings.json):
            out.append(("line", f"mxperf: JSON report written to {self.settings.json}", {}))
        out += [("line", f"mxperf: summary written to {w}", {}) for w in self.summaries]
        if self.history_added:
            out.append(("line", f"mxperf: {self.history_added}", {}))
        # Which baselines were passed over is in the header too, which -q hides: repeat it.
        yellow = {"yellow": True}
        out += [("line", f"mxperf: warning: {w}", yellow) for w in self.run.baselines.warnings]
        return out + alerts
