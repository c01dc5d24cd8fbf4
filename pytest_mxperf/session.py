"""Run facts computed once per run (on the xdist controller) and the results collected from it."""

from __future__ import annotations

import datetime as _dt
import os
import tempfile
import uuid
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from pytest_mxperf import baselines, fingerprint, gitinfo
from pytest_mxperf.options import Settings
from pytest_mxperf.verdict import CaseResult


@dataclass
class RunInfo:
    """What every process of a run must agree on: commit, hardware, baselines in use."""

    run_id: str
    started: str
    rootdir: str
    baseline_root: str
    commit: dict[str, Any]
    cpu_key: str
    gpus: list[dict[str, str]]
    baselines: dict[str, Any]
    lock_dir: str

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RunInfo:
        return cls(**{k: data[k] for k in cls.__dataclass_fields__})

    @classmethod
    def detect(cls, settings: Settings, rootdir: Path, env: Mapping[str, str]) -> RunInfo:
        root = Path(settings.baseline_dir)
        if not root.is_absolute():
            root = rootdir / root
        commit = gitinfo.detect(rootdir, env, exclude=(str(root),))
        explicit = None
        if settings.compare:
            explicit = gitinfo.rev_parse(commit.repo_root, settings.compare) or settings.compare
        ancestors = gitinfo.ancestry(commit.repo_root, commit.sha)
        resolution = baselines.resolve(
            root,
            ancestors,
            shallow=commit.shallow,
            explicit=explicit,
            explicit_label=settings.compare,
        )
        run_id = uuid.uuid4().hex[:12]
        lock_dir = os.path.join(tempfile.gettempdir(), f"pytest-mxperf-{run_id}")
        return cls(
            run_id=run_id,
            started=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            rootdir=str(rootdir),
            baseline_root=str(root),
            commit=commit.as_dict(),
            cpu_key=fingerprint.cpu_key(),
            gpus=fingerprint.visible_gpus(env),
            baselines=resolution.as_dict(),
            lock_dir=lock_dir,
        )

    def hardware_for(self, kind: str, gpu_index: int, machine: str | None) -> str:
        name = None
        if kind == "gpu" and self.gpus:
            name = self.gpus[gpu_index % len(self.gpus)]["name"]
        return fingerprint.hardware_key(kind, machine=machine, cpu=self.cpu_key, gpu_name=name)

    def baseline_for(self, hardware: str, key: str) -> dict[str, Any] | None:
        ref = self.baselines["refs"].get(hardware, {}).get(key)
        return dict(ref) if ref else None


@dataclass
class Collected:
    """Results gathered on the controller from every test report (with or without xdist)."""

    results: list[CaseResult] = field(default_factory=list)
    duplicates: list[str] = field(default_factory=list)
    crashed: list[str] = field(default_factory=list)

    def add(self, data: dict[str, Any]) -> CaseResult:
        result = CaseResult.from_dict(data)
        for other in self.results:
            if other.key == result.key:
                self.duplicates.append(
                    f"case key {result.key!r} measured twice: {other.nodeid} and {result.nodeid}"
                )
        self.results.append(result)
        return result
