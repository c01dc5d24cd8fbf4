"""Which stored baseline each case is compared with: the nearest ancestor of HEAD holding it,
an explicit revision, or (without history) the newest by commit date, said out loud."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_mxperf.baselines.store import (
    BaselineError,
    BaselineFile,
    StoredCase,
    commit_files,
    hardware_keys,
    load,
)
from pytest_mxperf.config.casekey import CaseKey


@dataclass
class Resolution:
    """Per hardware key, the baseline chosen for every case key, and what went wrong."""

    refs: dict[str, dict[CaseKey, BaselineRef]] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def get(self, hardware: str, key: CaseKey) -> BaselineRef | None:
        return self.refs.get(hardware, {}).get(key)

    def elsewhere(self, hardware: str, key: CaseKey) -> list[str]:
        """Other hardware keys that hold a baseline of this case."""
        return sorted(hw for hw, refs in self.refs.items() if key in refs and hw != hardware)

    def stored_keys(self) -> list[str]:
        """Hardware keys with at least one case resolved."""
        return sorted(hw for hw, refs in self.refs.items() if refs)

    def count(self) -> int:
        return sum(len(v) for v in self.refs.values())

    def as_dict(self) -> dict[str, Any]:
        return {
            "refs": {
                hw: {str(key): ref.as_dict() for key, ref in refs.items()}
                for hw, refs in self.refs.items()
            },
            "warnings": list(self.warnings),
            "errors": list(self.errors),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Resolution:
        refs = {
            hw: {CaseKey.parse(key): BaselineRef.from_dict(ref) for key, ref in cases.items()}
            for hw, cases in data["refs"].items()
        }
        return cls(refs, list(data["warnings"]), list(data["errors"]))


@dataclass(frozen=True)
class BaselineRef:
    """The baseline chosen for one case: the stored case, its commit, and how it was chosen."""

    case: StoredCase
    commit: dict[str, Any]
    file: str
    how: str
    distance: int | None
    #: The file's calibration probe figure (`baselines.calibration`; None: not recorded, or
    #: by another probe).
    calibration: float | None = None

    @property
    def sha(self) -> str:
        """The commit whose figures these are ("" when the file recorded none)."""
        return str(self.commit.get("sha") or "")

    def as_dict(self) -> dict[str, Any]:
        return {
            "case": self.case.as_dict(),
            "commit": dict(self.commit),
            "file": self.file,
            "how": self.how,
            "distance": self.distance,
            "calibration": self.calibration,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> BaselineRef:
        file = str(data.get("file", "?"))
        return cls(
            case=StoredCase.from_dict(data["case"], f"baseline {file}"),
            commit=dict(data.get("commit") or {}),
            file=file,
            how=str(data.get("how", "")),
            distance=data.get("distance"),
            calibration=data.get("calibration"),
        )


def _ref(
    f: BaselineFile, root: Path, case: StoredCase, how: str, distance: int | None
) -> BaselineRef:
    try:
        rel = str(f.path.relative_to(root))
    except ValueError:
        rel = str(f.path)
    calib = f.calibration
    figure = calib.images_per_sec if calib is not None and calib.comparable() else None
    return BaselineRef(case, dict(f.commit), rel, how, distance, figure)


def resolve(
    root: Path,
    ancestors: dict[str, int] | None,
    *,
    shallow: bool = False,
    explicit: str | None = None,
    explicit_label: str | None = None,
    this_machine: Sequence[str] = (),
) -> Resolution:
    """Choose each case's baseline, for every hardware key stored under ``root``.

    - ``explicit`` (a full or abbreviated sha): that commit's file, for every case it holds.
    - with git history: the nearest ancestor of HEAD holding the case (ties: newer date, then
      the later commit in topological order);
      files of commits that are not ancestors are ignored.
    - without history (no repository), or for cases no ancestor holds in a shallow clone: the
      newest file by commit date holding the case, with a warning.
    - a hardware key of ``this_machine`` whose stored commits are none of them an ancestor (a
      rewritten history): a warning naming them, as its cases are judged as new; one whose
      newest stored commit is not an ancestor while older ones are: a warning naming it and
      the ancestor used instead.
    """
    res = Resolution()
    for hardware in hardware_keys(root):
        files = _load_files(root, hardware, res)
        if explicit is not None:
            res.refs[hardware] = _explicit_refs(root, files, explicit, explicit_label)
            continue
        refs: dict[CaseKey, BaselineRef] = {}
        if ancestors is not None:
            used = _nearest_ancestors(root, files, ancestors, refs)
            if used and not shallow and hardware in this_machine:
                passed_over = _newest_passed_over(hardware, files, ancestors, used)
                res.warnings += [passed_over] if passed_over else []
        fallback_used = (ancestors is None or shallow) and _newest_by_date(root, files, refs)
        rewritten = ancestors is not None and not shallow and files and not refs
        if rewritten and hardware in this_machine:
            res.warnings.append(_none_an_ancestor(hardware, files))
        if fallback_used:
            why = "no git history" if ancestors is None else "shallow clone"
            res.warnings.append(
                f"{why}: baselines for {hardware} chosen as the newest by commit date, "
                "not the nearest ancestor"
            )
        res.refs[hardware] = refs
    return res


def _load_files(root: Path, hardware: str, res: Resolution) -> list[BaselineFile]:
    """The files of ``hardware`` that load; each that does not is one of ``res``'s errors."""
    files: list[BaselineFile] = []
    for _sha, path in commit_files(root, hardware).items():
        try:
            files.append(load(path))
        except BaselineError as exc:
            res.errors.append(str(exc))
    return files


def _explicit_refs(
    root: Path, files: Sequence[BaselineFile], explicit: str, label: str | None
) -> dict[CaseKey, BaselineRef]:
    """Every case of the file of the commit asked for (a full or abbreviated sha)."""
    refs: dict[CaseKey, BaselineRef] = {}
    chosen = [f for f in files if f.sha.startswith(explicit) or explicit.startswith(f.sha)]
    for f in chosen[:1]:
        for key, case in _cases(f).items():
            refs[key] = _ref(f, root, case, f"explicit revision {label}", None)
    return refs


def _nearest_ancestors(
    root: Path,
    files: Sequence[BaselineFile],
    ancestors: dict[str, int],
    refs: dict[CaseKey, BaselineRef],
) -> list[BaselineFile]:
    """Fill ``refs`` from the nearest ancestor holding each case (ties: newer date, then the
    later commit in topological order); returns the files that gave a case."""
    topo = {sha: i for i, sha in enumerate(ancestors)}
    ranked = sorted(
        (f for f in files if f.sha in ancestors),
        key=lambda f: (ancestors[f.sha], _neg_date(f.date), topo[f.sha]),
    )
    used: list[BaselineFile] = []
    for f in ranked:
        cases = _cases(f)
        fresh = [key for key in cases if key not in refs]
        for key in fresh:
            refs[key] = _ref(f, root, cases[key], "nearest ancestor", ancestors[f.sha])
        used += [f] if fresh else []
    return used


def _newest_by_date(
    root: Path, files: Sequence[BaselineFile], refs: dict[CaseKey, BaselineRef]
) -> bool:
    """Fill the cases ``refs`` lacks from the newest file by commit date holding each; True
    when one was."""
    filled = False
    for f in sorted(files, key=lambda f: _neg_date(f.date)):
        for key, case in _cases(f).items():
            if key not in refs:
                refs[key] = _ref(f, root, case, "newest by commit date", None)
                filled = True
    return filled


def _cases(f: BaselineFile) -> dict[CaseKey, StoredCase]:
    """The cases of a baseline file by case key, their text in the file parsed once here (a
    text that is no case key could never be a case's: it is left out)."""
    cases: dict[CaseKey, StoredCase] = {}
    for text, case in f.cases.items():
        try:
            cases[CaseKey.parse(text)] = case
        except ValueError:
            continue
    return cases


#: How many stored commits a warning names before "and N more".
NAMED_COMMITS = 3


def _none_an_ancestor(hardware: str, files: Sequence[BaselineFile]) -> str:
    newest = sorted(files, key=lambda f: _neg_date(f.date))
    named = ", ".join(f"{f.sha[:10]} ({str(f.date)[:10]})" for f in newest[:NAMED_COMMITS])
    more = len(newest) - NAMED_COMMITS
    return (
        f"{len(files)} stored baseline(s) for {hardware}, but none is an ancestor of HEAD "
        "(history rewritten, or stored on another branch): its cases are judged as new; "
        f"newest: {named}{f' and {more} more' if more > 0 else ''}; compare with one by "
        "--mxperf-compare SHA"
    )


def _newest_passed_over(
    hardware: str,
    files: Sequence[BaselineFile],
    ancestors: Mapping[str, int],
    used: Sequence[BaselineFile],
) -> str | None:
    """A warning when the newest stored commit is not an ancestor of HEAD (a rewritten history,
    or a baseline stored on another branch) while older ones are: which one is used instead."""
    others = [f for f in files if f.sha not in ancestors]
    if not others:
        return None
    newest = min(others, key=lambda f: _neg_date(f.date))
    if any(_neg_date(f.date) <= _neg_date(newest.date) for f in files if f.sha in ancestors):
        return None  # an ancestor is as new: nothing newer was passed over
    more = len(used) - 1
    return (
        f"the newest stored baseline for {hardware}, {newest.sha[:10]} "
        f"({str(newest.date)[:10]}), is not an ancestor of HEAD (history rewritten, or stored "
        f"on another branch): cases are compared with the nearest ancestor's, "
        f"{used[0].sha[:10]} ({str(used[0].date)[:10]})"
        f"{f' and {more} older' if more > 0 else ''}; compare with another by "
        "--mxperf-compare SHA"
    )


class CompareError(ValueError):
    """``--mxperf-compare REV`` names nothing usable: a usage error that names the revision."""


def explicit_problem(
    root: Path, label: str, sha: str | None, hardware: list[str], repo: str | None
) -> str | None:
    """Why ``--mxperf-compare label`` cannot be compared with on this run's ``hardware`` keys,
    or None. ``sha`` is what git resolved ``label`` to (None: git does not know it, or there is
    no repository); without it ``label`` is matched as a prefix of stored commit shas."""
    wanted = (sha or label).lower()
    stored = {hw: sorted(commit_files(root, hw)) for hw in hardware_keys(root)}

    def matches(hw: str) -> list[str]:
        return [s for s in stored.get(hw, []) if s.startswith(wanted) or wanted.startswith(s)]

    if sha is None and not any(matches(hw) for hw in stored):
        where = f"a commit of {repo}" if repo else "a commit here (no git repository)"
        return (
            f"mxperf: --mxperf-compare {label!r}: unknown revision (not {where}, and no stored "
            f"baseline under {root} has a commit sha starting with it)"
        )
    usable = False
    for hw in hardware:
        found = matches(hw)
        if len(found) > 1:
            return (
                f"mxperf: --mxperf-compare {label!r} is ambiguous on {hw}: it matches "
                f"{', '.join(s[:10] for s in found)}"
            )
        if found:
            # The file asked for must be readable: otherwise nothing would be compared.
            try:
                load(root / hw / f"{found[0]}.json")
            except BaselineError as exc:
                return f"mxperf: --mxperf-compare {label!r}: its baseline cannot be used: {exc}"
            usable = True
    if usable:
        return None
    what = label if sha is None or sha.startswith(label) else f"{label} ({sha[:10]})"
    have = sorted({s[:10] for hw in hardware for s in stored.get(hw, [])})
    listed = f"commits that have one: {', '.join(have)}" if have else "none is stored for it"
    return (
        f"mxperf: --mxperf-compare {what} has no baseline for this hardware "
        f"({', '.join(hardware)}) under {root}; {listed}"
    )


def _neg_date(date: str) -> tuple[int, str]:
    # Sort newest first without parsing: ISO dates in UTC compare as strings.
    return (0, "".join(chr(0x10FFFF - ord(c)) for c in date)) if date else (1, "")
