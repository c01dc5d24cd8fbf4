"""Run facts computed once per run (on the xdist controller) and shipped to every worker."""

from __future__ import annotations

import datetime as _dt
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from pytest_mxperf import __version__
from pytest_mxperf.baselines.resolution import (
    BaselineRef,
    CompareError,
    Resolution,
    explicit_problem,
    resolve,
)
from pytest_mxperf.config.casekey import CaseKey
from pytest_mxperf.config.settings import Settings
from pytest_mxperf.system import fingerprint, gitinfo, locks, nvml
from pytest_mxperf.system.gitinfo import CommitInfo


@dataclass
class RunInfo:
    """What every process of a run must agree on: commit, hardware, baselines in use."""

    run_id: str
    started: str
    rootdir: str
    baseline_root: str
    commit: CommitInfo
    cpu_key: str
    #: The machine name in force (``--mxperf-machine``, or a ``pytest_mxperf_hardware_key``
    #: hook), replacing the detected CPU key; None to use detection.
    machine: str | None
    gpus: list[dict[str, str]]
    baselines: Resolution
    #: The machine-wide lock directory of this user (`locks.machine_lock_dir`): runs take turns.
    lock_dir: str
    #: Anonymous id of this machine (`fingerprint.machine_id`), stored with every run.
    machine_id: str | None = None
    #: The version of pytest-mxperf that runs (`pytest_mxperf.__version__`), recorded in the
    #: JSON report and with every case a baseline file stores.
    plugin_version: str = __version__

    @classmethod
    def detect(
        cls,
        settings: Settings,
        rootdir: Path,
        env: Mapping[str, str],
        machine: str | None = None,
    ) -> RunInfo:
        """Work out the run facts; `CompareError` when ``--mxperf-compare`` names nothing
        usable for this hardware."""
        root = Path(settings.baseline_dir)
        if not root.is_absolute():
            root = rootdir / root
        commit = gitinfo.detect(rootdir, env, exclude=(str(root),))
        explicit = None
        # NVML (nvidia-ml-py, in [cu112]) first: more facts, no subprocess; else nvidia-smi.
        gpus = nvml.visible_gpus(env)
        cpu = fingerprint.cpu_key()
        keys = [fingerprint.hardware_key("cpu", machine=machine, cpu=cpu, gpu_name=None)]
        keys += [
            fingerprint.hardware_key("gpu", machine=machine, cpu=cpu, gpu_name=g["name"])
            for g in gpus
        ]
        if settings.compare:
            sha = gitinfo.rev_parse(commit.repo_root, settings.compare)
            problem = explicit_problem(root, settings.compare, sha, keys, commit.repo_root)
            if problem:
                raise CompareError(problem)
            explicit = sha or settings.compare
        ancestors = gitinfo.ancestry(commit.repo_root, commit.sha)
        resolution = resolve(
            root,
            ancestors,
            shallow=commit.shallow,
            explicit=explicit,
            explicit_label=settings.compare,
            this_machine=keys,
        )
        run_id = uuid.uuid4().hex[:12]
        return cls(
            run_id=run_id,
            started=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            rootdir=str(rootdir),
            baseline_root=str(root),
            commit=commit,
            cpu_key=cpu,
            machine=machine,
            gpus=gpus,
            baselines=resolution,
            lock_dir=str(locks.machine_lock_dir()),
            machine_id=fingerprint.machine_id(),
        )

    def hardware_for(self, kind: str, gpu_index: int) -> str:
        name = None
        if kind == "gpu" and self.gpus:
            name = self.gpus[gpu_index % len(self.gpus)]["name"]
        return fingerprint.hardware_key(kind, machine=self.machine, cpu=self.cpu_key, gpu_name=name)

    def device_lock_name(self, kind: str, index: int) -> str:
        """The lock of a device, the same in every run on this machine: ``cpu``, or a GPU by its
        UUID (an index depends on each process's CUDA_VISIBLE_DEVICES)."""
        if kind != "gpu":
            return "cpu"
        if self.gpus:
            return "gpu-" + fingerprint.slug(self.gpus[index % len(self.gpus)]["uuid"])
        return f"gpu{index}"

    def device_lock_names(self) -> list[str]:
        """Every device lock of this machine that the run's cases could measure on: the CPU's
        and each visible GPU's, in one order for every run (lock-step rounds hold them all)."""
        return ["cpu", *sorted({self.device_lock_name("gpu", i) for i in range(len(self.gpus))})]

    def baseline_for(self, hardware: str, key: CaseKey) -> BaselineRef | None:
        return self.baselines.get(hardware, key)
