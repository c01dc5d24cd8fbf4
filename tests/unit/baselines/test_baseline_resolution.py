"""Which stored baseline each case is compared with (`pytest_mxperf.baselines.resolution`):
nearest ancestor, ties, non-ancestors, no history, shallow clones, an explicit revision,
corrupt files, per hardware key."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from baseline_data import HW, SHA_A, SHA_B, SHA_C, SHA_D, commit, rec

from pytest_mxperf.baselines.resolution import Resolution, resolve
from pytest_mxperf.baselines.store import store


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A: old, B: newer, C: newest, D: not an ancestor but the newest of all."""
    store(tmp_path, HW, commit(SHA_A, "2024-01-01T00:00:00+00:00"), {"x": rec(1.0), "y": rec(1.0)})
    store(tmp_path, HW, commit(SHA_B, "2024-02-01T00:00:00+00:00"), {"x": rec(2.0)})
    store(tmp_path, HW, commit(SHA_C, "2024-03-01T00:00:00+00:00"), {"z": rec(3.0)})
    store(tmp_path, HW, commit(SHA_D, "2024-09-01T00:00:00+00:00"), {"x": rec(4.0), "w": rec(4.0)})
    return tmp_path


def chosen(res: Resolution, hw: str = HW) -> dict[str, tuple[float | None, str, int | None]]:
    return {
        key: (ref.case.images_per_sec, ref.how, ref.distance) for key, ref in res.refs[hw].items()
    }


def test_resolve_nearest_ancestor(root: Path) -> None:
    res = resolve(root, {SHA_C: 0, SHA_B: 1, SHA_A: 5})
    assert chosen(res) == {
        "x": (2.0, "nearest ancestor", 1),
        "y": (1.0, "nearest ancestor", 5),
        "z": (3.0, "nearest ancestor", 0),
    }
    assert "w" not in res.refs[HW]  # only the non-ancestor D holds it
    assert res.warnings == [] and res.errors == []
    ref = res.refs[HW]["x"]
    assert ref.commit["sha"] == SHA_B
    assert ref.file == f"{HW}/{SHA_B}.json"


def test_resolve_ties_broken_by_newer_date(root: Path) -> None:
    # A and B both 2 commits away (two sides of a merge): B is newer.
    res = resolve(root, {SHA_A: 2, SHA_B: 2})
    assert chosen(res)["x"] == (2.0, "nearest ancestor", 2)
    res = resolve(root, {SHA_A: 1, SHA_B: 2})
    assert chosen(res)["x"] == (1.0, "nearest ancestor", 1)


def test_resolve_ignores_non_ancestors(root: Path) -> None:
    res = resolve(root, {"e" * 40: 0})
    assert res.refs == {HW: {}}
    assert res.warnings == []


def test_resolve_without_history_takes_newest_by_date_with_warning(root: Path) -> None:
    res = resolve(root, None)
    assert chosen(res) == {
        "x": (4.0, "newest by commit date", None),
        "w": (4.0, "newest by commit date", None),
        "y": (1.0, "newest by commit date", None),
        "z": (3.0, "newest by commit date", None),
    }
    assert len(res.warnings) == 1
    assert "no git history" in res.warnings[0] and HW in res.warnings[0]


def test_resolve_shallow_ancestors_first_then_newest_by_date(root: Path) -> None:
    res = resolve(root, {SHA_B: 0}, shallow=True)
    assert chosen(res) == {
        "x": (2.0, "nearest ancestor", 0),
        "w": (4.0, "newest by commit date", None),
        "y": (1.0, "newest by commit date", None),
        "z": (3.0, "newest by commit date", None),
    }
    assert len(res.warnings) == 1 and "shallow clone" in res.warnings[0]


def test_resolve_shallow_without_fallback_has_no_warning(tmp_path: Path) -> None:
    store(tmp_path, HW, commit(SHA_A), {"x": rec(1.0)})
    res = resolve(tmp_path, {SHA_A: 0}, shallow=True)
    assert chosen(res) == {"x": (1.0, "nearest ancestor", 0)}
    assert res.warnings == []


def test_resolve_explicit_sha_prefix(root: Path) -> None:
    res = resolve(root, {SHA_C: 0, SHA_B: 1}, explicit="aaaaaaa", explicit_label="v1.0")
    assert chosen(res) == {
        "x": (1.0, "explicit revision v1.0", None),
        "y": (1.0, "explicit revision v1.0", None),
    }
    res = resolve(root, None, explicit=SHA_D, explicit_label=SHA_D)
    assert set(res.refs[HW]) == {"x", "w"}
    assert res.warnings == []
    assert resolve(root, None, explicit="1234567").refs == {HW: {}}


def test_resolve_reports_corrupt_files_but_goes_on(root: Path) -> None:
    bad = root / HW / f"{'e' * 40}.json"
    bad.write_text("{oops")
    res = resolve(root, {SHA_B: 0, "e" * 40: 0})
    assert chosen(res) == {"x": (2.0, "nearest ancestor", 0)}
    assert len(res.errors) == 1
    assert str(bad) in res.errors[0] and "not valid JSON" in res.errors[0]


def test_resolve_per_hardware_key(root: Path) -> None:
    store(root, "gpu-v100-x1", commit(SHA_A), {"x": rec(900.0)})
    res = resolve(root, {SHA_B: 0, SHA_A: 1})
    assert set(res.refs) == {HW, "gpu-v100-x1"}
    assert chosen(res, "gpu-v100-x1") == {"x": (900.0, "nearest ancestor", 1)}
    assert chosen(res)["x"] == (2.0, "nearest ancestor", 0)


def test_resolve_empty_root(tmp_path: Path) -> None:
    res = resolve(tmp_path / "none", None)
    assert res.refs == {} and res.warnings == [] and res.errors == []


def test_resolution_round_trip(root: Path) -> None:
    res = resolve(root, None)
    back = Resolution.from_dict(json.loads(json.dumps(res.as_dict())))
    assert back == res
