"""The results table, the benchmark_score-style grids and the JSON/baseline records."""

from __future__ import annotations

import json
from typing import Any

import pytest

import pytest_mxperf
from pytest_mxperf.baselines.entry import BaselineRecord
from pytest_mxperf.baselines.resolution import Resolution
from pytest_mxperf.baselines.runinfo import RunInfo
from pytest_mxperf.config.casekey import CaseKey
from pytest_mxperf.measuring.records import CaseResult, Outcome, Status, Verdict
from pytest_mxperf.reporting.jsonreport import REPORT_SCHEMA, shown_path, to_json
from pytest_mxperf.reporting.report_sections import verdict_counts
from pytest_mxperf.reporting.tables import render_grids, render_table
from pytest_mxperf.system import codec
from pytest_mxperf.system.gitinfo import CommitInfo
from pytest_mxperf.testing import measurement_of

CPU = "cpu-amd-epyc-7r13-processor-2c"
GPU = "gpu-tesla-v100-sxm2-16gb-x1"


def case(
    model: str = "resnet50_v1",
    batch: int = 32,
    *,
    rate: float | None = 100.0,
    rel_iqr: float = 0.02,
    status: str = "ok",
    mode: str = "inference",
    dtype: str = "float32",
    kind: str = "cpu",
    name: str | None = None,
    verdict: dict[str, Any] | None = None,
) -> CaseResult:
    return CaseResult(
        key=CaseKey(model, mode, dtype, batch, kind, name),
        device=f"{kind}(0)",
        hardware=CPU if kind == "cpu" else GPU,
        status=Status(status),
        measurement=None if rate is None else measurement_of(rate, rel_iqr),
        threads={"omp_threads": 1},
        software={"mxnet": "1.9.1"},
        environment={"OMP_NUM_THREADS": "1"},
        verdict=None if verdict is None else _verdict(verdict),
    )


def _verdict(data: dict[str, Any]) -> Verdict:
    return Verdict(Outcome(data.pop("status")), False, **data)


def results() -> list[CaseResult]:
    return [
        case(
            "resnet50_v1",
            32,
            rate=123.456,
            verdict={"status": "pass", "change": -0.031, "baseline_images_per_sec": 127.4},
        ),
        case(
            "resnet50_v1",
            1,
            rate=20.0,
            verdict={"status": "regressed", "change": -0.25, "baseline_images_per_sec": 26.7},
        ),
        case(
            "vgg16",
            256,
            rate=None,
            status="oom",
            kind="gpu",
            verdict={"status": "oom"},
        ),
        case("alexnet", 8, rate=54321.0, name="nchw", verdict={"status": "new"}),
        case("inception_bn", 16, rate=None, status="nan", verdict={"status": "nan"}),
    ]


def test_render_table_wide() -> None:
    lines = render_table(results(), width=200)
    text = "\n".join(lines)
    header = lines[0].split()
    assert header == [
        "case",
        "device",
        "bs",
        "img/s",
        "baseline",
        "change",
        "verdict",
        "mode",
        "dtype",
    ]
    assert len(lines) == 2 + 5  # header, rule, one row per case
    assert all(len(line) <= 200 for line in lines)
    row = next(line for line in lines if "resnet50_v1" in line and " 32 " in line)
    assert "123.5 ±1.0%" in row  # median ± half the relative IQR
    assert "127.4" in row
    assert "-3.1%" in row
    assert "pass" in row and "infer" in row and "float32" in row
    regressed = next(line for line in lines if "regressed" in line)
    assert "-25.0%" in regressed and "26.7" in regressed
    assert "alexnet [nchw]" in text  # the name= part of the key
    assert "54321 ±1.0%" in text  # big rates without decimals
    oom = next(line for line in lines if "vgg16" in line)
    assert "OOM" in oom and "gpu(0)" in oom
    assert "NAN" in next(line for line in lines if "inception_bn" in line)


def test_render_table_sorted_by_device_mode_dtype_model_batch() -> None:
    lines = render_table(results(), width=200)[2:]
    models = [line.split()[0] for line in lines]
    assert models == ["alexnet", "inception_bn", "resnet50_v1", "resnet50_v1", "vgg16"]
    mixed = render_table([case("aaa", kind="gpu"), case("zzz", mode="training")], width=200)
    assert [line.split()[0] for line in mixed[2:]] == [
        "zzz",
        "aaa",
    ]  # device kind sorts before model
    resnet = [line for line in lines if line.startswith("resnet50_v1")]
    assert resnet[0].split()[2] == "1" and resnet[1].split()[2] == "32"


def test_render_table_narrow_drops_the_least_important_columns() -> None:
    wide = render_table(results(), width=200)
    full = max(map(len, wide))
    assert render_table(results(), width=full) == wide
    lines = render_table(results(), width=full - 1)
    assert lines[0].split() == [
        "case",
        "device",
        "bs",
        "img/s",
        "baseline",
        "change",
        "verdict",
        "mode",
    ]
    lines = render_table(results(), width=60)
    assert all(len(line) <= 60 for line in lines)
    assert lines[0].split() == ["case", "img/s", "baseline", "change", "verdict"]
    assert len(lines) == len(wide)  # every row still there, never wrapped
    assert any("regressed" in line for line in lines)


def test_render_table_too_narrow_keeps_the_verdict_columns() -> None:
    lines = render_table(results(), width=10)
    assert lines[0].split() == ["case", "img/s", "baseline", "change", "verdict"]
    assert max(len(line) for line in lines) > 10


def test_render_table_without_verdicts() -> None:
    lines = render_table([case(verdict=None)], width=200)
    assert lines[2].split()[-5:] == ["-", "-", "-", "infer", "float32"]


def test_render_grids() -> None:
    cases = [
        case("resnet50_v1", 1, rate=50.0),
        case("resnet50_v1", 32, rate=200.0),
        case("vgg16", 32, rate=None, status="oom"),
        case("vgg16", 1, rate=10.0),
        case("resnet50_v1", 1, rate=40.0, mode="training"),  # alone in its group: no grid
        case("resnet50_v1", 64, rate=900.0, kind="gpu"),
        case("resnet50_v1", 128, rate=1000.0, kind="gpu"),
    ]
    grids = dict(render_grids(cases))
    assert set(grids) == {
        f"inference, float32, cpu ({CPU}), images/sec",
        f"inference, float32, gpu ({GPU}), images/sec",
    }
    cpu = grids[f"inference, float32, cpu ({CPU}), images/sec"]
    assert cpu[0].split() == ["batch", "resnet50_v1", "vgg16"]
    assert cpu[2].split() == ["1", "50.0", "10.0"]
    assert cpu[3].split() == ["32", "200.0", "OOM"]
    assert "±" not in "\n".join(cpu)
    gpu = grids[f"inference, float32, gpu ({GPU}), images/sec"]
    assert [line.split() for line in gpu[2:]] == [["64", "900.0"], ["128", "1000.0"]]


def test_render_grids_missing_cell_is_blank() -> None:
    cases = [case("a", 1), case("b", 2)]
    ((_, lines),) = render_grids(cases)
    assert lines[0].split() == ["batch", "a", "b"]
    assert lines[2].split() == ["1", "100.0"]
    assert lines[3].split() == ["2", "100.0"]


def test_render_grids_one_case_per_group_gives_nothing() -> None:
    assert (
        render_grids([case("a", 1), case("a", 1, kind="gpu"), case("a", 1, dtype="float16")]) == []
    )


def test_verdict_counts() -> None:
    counts = verdict_counts([*results(), case(verdict={"status": "pass"}), case(verdict=None)])
    assert counts == {"-": 1, "nan": 1, "new": 1, "oom": 1, "pass": 2, "regressed": 1}
    assert list(counts) == sorted(counts)


def test_to_json_contains_every_case() -> None:
    rs = results()
    commit = CommitInfo("a" * 40, None, None, None, "git")
    run = RunInfo(
        run_id="r",
        started="2024-01-01T00:00:00+00:00",
        rootdir=".",
        baseline_root="baselines",
        commit=commit,
        cpu_key=CPU,
        machine=None,
        gpus=[],
        baselines=Resolution(),
        lock_dir="/tmp/x",
    )
    data = to_json(rs, run, {"tolerance": 0.15}, {"warnings": ["w"]})
    assert data["schema"] == REPORT_SCHEMA
    assert data["run"] == {
        "commit": codec.to_dict(commit),
        "cpu_hardware": CPU,
        "gpus": [],
        "started": "2024-01-01T00:00:00+00:00",
        "baseline_root": "baselines",
        "pytest_mxperf_version": pytest_mxperf.__version__,
    }
    assert data["settings"] == {"tolerance": 0.15}
    assert data["warnings"] == ["w"]
    keys = [c["key"] for c in data["cases"]]
    assert keys == sorted(str(r.key) for r in rs)
    by_key = {c["key"]: c for c in data["cases"]}
    assert by_key["vgg16/inference/float32/bs256/gpu"]["status"] == "oom"
    assert by_key["resnet50_v1/inference/float32/bs32/cpu"]["verdict"]["change"] == -0.031
    # Plain JSON, and CaseResult comes back from it.
    again = json.loads(json.dumps(data, allow_nan=False))
    assert [codec.from_dict(CaseResult, c) for c in again["cases"]] == sorted(
        rs, key=lambda r: str(r.key)
    )


def test_baseline_record() -> None:
    r = case("resnet50_v1", 32, rate=123.0, rel_iqr=0.04)
    rec = BaselineRecord.of(r, dirty=True).as_dict()
    assert rec == {
        "model": "resnet50_v1",
        "mode": "inference",
        "dtype": "float32",
        "batch_size": 32,
        "device_kind": "cpu",
        "status": "ok",
        "images_per_sec": pytest.approx(123.0),
        "iqr": pytest.approx(123.0 * 0.04),
        "rel_iqr": pytest.approx(0.04),
        "block_images_per_sec": pytest.approx([123.0 * 0.96, 123.0, 123.0 * 1.04]),
        "warmup_steps": 12,
        # start-up figures and peak memory, for the start-up and memory verdicts
        "first_step_seconds": 0.1,
        "warmup_seconds": 0.5,
        "peak_memory_mb": None,
        "threads": {"omp_threads": 1},
        "software": {"mxnet": "1.9.1"},
        "environment": {"OMP_NUM_THREADS": "1"},
        "dirty": True,
        "machine_id": None,
        "pytest_mxperf_version": None,
    }


def test_baseline_record_of_oom_case() -> None:
    rec = BaselineRecord.of(case(rate=None, status="oom"), dirty=False).as_dict()
    assert rec["status"] == "oom"
    assert rec["images_per_sec"] is None
    assert rec["rel_iqr"] == 0.0
    assert rec["block_images_per_sec"] == []
    assert rec["dirty"] is False


def test_render_grids_split_to_fit_the_width() -> None:
    models = [f"model_with_a_long_name_{i}" for i in range(6)]
    cases = [case(m, b, rate=100.0 + b) for m in models for b in (1, 8)]
    (whole,) = render_grids(cases, width=1000)
    parts = render_grids(cases, width=80)
    assert len(parts) > 1
    assert all(max(map(len, lines)) <= 80 for _, lines in parts)
    headers = [lines[0].split()[1:] for _, lines in parts]
    assert [m for h in headers for m in h] == models  # every model once, in order
    assert {title for title, _ in parts} == {whole[0]}


def test_change_column_of_paired_and_arbitrated_verdicts() -> None:
    from pytest_mxperf.measuring.records import Outcome, Verdict
    from pytest_mxperf.reporting.tables import _change

    assert _change(Verdict(Outcome.PASS, False, change=-0.031)) == "-3.1%"
    paired = Verdict(Outcome.REGRESSED, True, change=-0.2, interval=(0.78, 0.82), rounds=3)
    assert _change(paired) == "-20.0% ±2.0%"
    # Arbitrated: the stored change, and the pair's own estimate with its interval (a 40%
    # stored drop is not "-28.6% ±2.9%").
    arbitrated = Verdict(
        Outcome.MACHINE, False, change=-0.286, threshold=0.05, interval=(0.971, 1.030), rounds=3
    )
    assert _change(arbitrated) == "-28.6%, pair +0.0% ±3.0%"


def test_report_paths_are_never_absolute() -> None:
    repo, baselines = "/home/alice/proj", "/home/alice/proj/baselines"
    assert shown_path(baselines, repo, repo) == "baselines"
    assert shown_path(repo, repo, repo) == "."
    assert shown_path(repo, f"{repo}/tests", repo) == ".."  # run from inside the repository
    assert shown_path(baselines, f"{repo}/tests", repo) == "<repo>/baselines"
    assert shown_path(repo, "/srv/ci", repo) == "<repo>"
    assert shown_path(baselines, "/srv/ci", repo) == "<repo>/baselines"
    assert shown_path("/mnt/shared/bl", "/srv/ci", repo) == "<path>"
    assert shown_path(None, "/srv/ci", repo) is None


def test_to_json_shows_the_repository_and_baselines_relative() -> None:
    commit = CommitInfo("a" * 40, None, None, None, "git", repo_root="/home/alice/proj")
    run = RunInfo(
        run_id="r",
        started="2024-01-01T00:00:00+00:00",
        rootdir="/home/alice/proj",
        baseline_root="/home/alice/proj/baselines",
        commit=commit,
        cpu_key=CPU,
        machine=None,
        gpus=[],
        baselines=Resolution(),
        lock_dir="/tmp/x",
    )
    data = to_json(results(), run, {}, cwd="/home/alice/proj")
    assert data["run"]["commit"]["repo_root"] == "."
    assert data["run"]["baseline_root"] == "baselines"
    assert "alice" not in json.dumps(data)
