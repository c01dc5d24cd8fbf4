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
from pytest_mxperf.config.casekey import CaseKey

#: Four stored cases (the resolution keys them by `CaseKey`; a text that is none is left out).
X, Y, Z, W = (f"{m}/inference/float32/bs1/cpu" for m in "xyzw")


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A: old, B: newer, C: newest, D: not an ancestor but the newest of all."""
    store(tmp_path, HW, commit(SHA_A, "2024-01-01T00:00:00+00:00"), {X: rec(1.0), Y: rec(1.0)})
    store(tmp_path, HW, commit(SHA_B, "2024-02-01T00:00:00+00:00"), {X: rec(2.0)})
    store(tmp_path, HW, commit(SHA_C, "2024-03-01T00:00:00+00:00"), {Z: rec(3.0)})
    store(tmp_path, HW, commit(SHA_D, "2024-09-01T00:00:00+00:00"), {X: rec(4.0), W: rec(4.0)})
    return tmp_path


def chosen(res: Resolution, hw: str = HW) -> dict[str, tuple[float | None, str, int | None]]:
    return {
        str(key): (ref.case.images_per_sec, ref.how, ref.distance)
        for key, ref in res.refs[hw].items()
    }


def test_resolve_nearest_ancestor(root: Path) -> None:
    res = resolve(root, {SHA_C: 0, SHA_B: 1, SHA_A: 5})
    assert chosen(res) == {
        X: (2.0, "nearest ancestor", 1),
        Y: (1.0, "nearest ancestor", 5),
        Z: (3.0, "nearest ancestor", 0),
    }
    assert CaseKey.parse(W) not in res.refs[HW]  # only the non-ancestor D holds it
    assert res.warnings == [] and res.errors == []
    ref = res.refs[HW][CaseKey.parse(X)]
    assert ref.commit["sha"] == SHA_B
    assert ref.file == f"{HW}/{SHA_B}.json"


def test_resolve_ties_broken_by_newer_date(root: Path) -> None:
    # A and B both 2 commits away (two sides of a merge): B is newer.
    res = resolve(root, {SHA_A: 2, SHA_B: 2})
    assert chosen(res)[X] == (2.0, "nearest ancestor", 2)
    res = resolve(root, {SHA_A: 1, SHA_B: 2})
    assert chosen(res)[X] == (1.0, "nearest ancestor", 1)


def test_resolve_ignores_non_ancestors(root: Path) -> None:
    res = resolve(root, {"e" * 40: 0})
    assert res.refs == {HW: {}}
    assert res.warnings == []


def test_resolve_without_history_takes_newest_by_date_with_warning(root: Path) -> None:
    res = resolve(root, None)
    assert chosen(res) == {
        X: (4.0, "newest by commit date", None),
        W: (4.0, "newest by commit date", None),
        Y: (1.0, "newest by commit date", None),
        Z: (3.0, "newest by commit date", None),
    }
    assert len(res.warnings) == 1
    assert "no git history" in res.warnings[0] and HW in res.warnings[0]


def test_resolve_shallow_ancestors_first_then_newest_by_date(root: Path) -> None:
    res = resolve(root, {SHA_B: 0}, shallow=True)
    assert chosen(res) == {
        X: (2.0, "nearest ancestor", 0),
        W: (4.0, "newest by commit date", None),
        Y: (1.0, "newest by commit date", None),
        Z: (3.0, "newest by commit date", None),
    }
    assert len(res.warnings) == 1 and "shallow clone" in res.warnings[0]


def test_resolve_shallow_without_fallback_has_no_warning(tmp_path: Path) -> None:
    store(tmp_path, HW, commit(SHA_A), {X: rec(1.0)})
    res = resolve(tmp_path, {SHA_A: 0}, shallow=True)
    assert chosen(res) == {X: (1.0, "nearest ancestor", 0)}
    assert res.warnings == []


def test_resolve_explicit_sha_prefix(root: Path) -> None:
    res = resolve(root, {SHA_C: 0, SHA_B: 1}, explicit="aaaaaaa", explicit_label="v1.0")
    assert chosen(res) == {
        X: (1.0, "explicit revision v1.0", None),
        Y: (1.0, "explicit revision v1.0", None),
    }
    res = resolve(root, None, explicit=SHA_D, explicit_label=SHA_D)
    assert {str(key) for key in res.refs[HW]} == {X, W}
    assert res.warnings == []
    assert resolve(root, None, explicit="1234567").refs == {HW: {}}


def test_resolve_reports_corrupt_files_but_goes_on(root: Path) -> None:
    bad = root / HW / f"{'e' * 40}.json"
    bad.write_text("{oops")
    res = resolve(root, {SHA_B: 0, "e" * 40: 0})
    assert chosen(res) == {X: (2.0, "nearest ancestor", 0)}
    assert len(res.errors) == 1
    assert str(bad) in res.errors[0] and "not valid JSON" in res.errors[0]


def test_resolve_per_hardware_key(root: Path) -> None:
    store(root, "gpu-v100-x1", commit(SHA_A), {X: rec(900.0)})
    res = resolve(root, {SHA_B: 0, SHA_A: 1})
    assert set(res.refs) == {HW, "gpu-v100-x1"}
    assert chosen(res, "gpu-v100-x1") == {X: (900.0, "nearest ancestor", 1)}
    assert chosen(res)[X] == (2.0, "nearest ancestor", 0)


def test_resolve_empty_root(tmp_path: Path) -> None:
    res = resolve(tmp_path / "none", None)
    assert res.refs == {} and res.warnings == [] and res.errors == []


def test_resolution_round_trip(root: Path) -> None:
    res = resolve(root, None)
    back = Resolution.from_dict(json.loads(json.dumps(res.as_dict())))
    assert back == res


def test_a_stored_text_that_is_no_case_key_is_left_out(tmp_path: Path) -> None:
    store(tmp_path, HW, commit(SHA_A), {X: rec(1.0), "not a case key": rec(1.0)})
    assert chosen(resolve(tmp_path, {SHA_A: 0})) == {X: (1.0, "nearest ancestor", 0)}
