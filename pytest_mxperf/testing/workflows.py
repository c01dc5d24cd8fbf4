"""GitHub Actions workflows read for the tests that run them here (`workflow_steps`): the file,
its triggers, and the ``${{ }}`` expressions its steps use, evaluated by a small evaluator.

The evaluator knows what the example workflows use, and refuses the rest: contexts (``github``,
``env``, ``steps``, ``runner``, ``vars``, ``secrets``), ``'strings'``, numbers, ``true``/
``false``/``null``, ``==``, ``!=``, ``!``, ``&&``, ``||``, parentheses, and the functions
``always()``, ``success()``, ``failure()``, ``cancelled()``, ``hashFiles(...)``. An expression
outside that is a `WorkflowError`: a workflow edited beyond what the harness can check fails the
test rather than being run wrongly.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CONTEXTS = ("github", "env", "steps", "runner", "vars", "secrets", "job")
STATUS_FUNCTIONS = ("always", "success", "failure", "cancelled")

_TOKEN = re.compile(
    r"\s*(?:(?P<str>'(?:[^']|'')*')|(?P<num>\d+(?:\.\d+)?)"
    r"|(?P<op>==|!=|&&|\|\||!|\(|\)|,)"
    r"|(?P<name>[A-Za-z_][A-Za-z0-9_-]*(?:\.[A-Za-z_*][A-Za-z0-9_-]*)*))"
)
_WRAPPED = re.compile(r"\$\{\{(.*?)\}\}", re.S)


class WorkflowError(Exception):
    """A workflow the harness cannot run as written (unknown expression, action, trigger)."""


@dataclass
class Status:
    """The job's state that the status functions read."""

    failed: bool = False


def tokens(text: str) -> list[tuple[str, str]]:
    found, pos, text = [], 0, text.strip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            raise WorkflowError(f"cannot read the expression {text!r} at {text[pos:]!r}")
        kind = m.lastgroup or ""
        found.append((kind, m.group(kind)))
        pos = m.end()
        while pos < len(text) and text[pos].isspace():
            pos += 1
    return found


class Evaluator:
    """Evaluates one expression against ``context`` (``hash_files`` for ``hashFiles``)."""

    def __init__(
        self,
        context: Mapping[str, Any],
        status: Status | None = None,
        hash_files: Callable[[list[str]], str] | None = None,
    ) -> None:
        self.context, self.status = context, status or Status()
        self.hash_files = hash_files
        self.items: list[tuple[str, str]] = []
        self.pos = 0

    def evaluate(self, text: str) -> Any:
        self.items, self.pos = tokens(text), 0
        value = self._or()
        if self.pos != len(self.items):
            raise WorkflowError(f"unexpected {self.items[self.pos][1]!r} in {text!r}")
        return value

    def _peek(self) -> str | None:
        return self.items[self.pos][1] if self.pos < len(self.items) else None

    def _take(self) -> tuple[str, str]:
        if self.pos >= len(self.items):
            raise WorkflowError("the expression ends too early")
        self.pos += 1
        return self.items[self.pos - 1]

    def _or(self) -> Any:
        value = self._and()
        while self._peek() == "||":
            self._take()
            right = self._and()
            value = value if truthy(value) else right
        return value

    def _and(self) -> Any:
        value = self._compare()
        while self._peek() == "&&":
            self._take()
            right = self._compare()
            value = right if truthy(value) else value
        return value

    def _compare(self) -> Any:
        value = self._unary()
        if self._peek() in ("==", "!="):
            op = self._take()[1]
            same = equal(value, self._unary())
            return same if op == "==" else not same
        return value

    def _unary(self) -> Any:
        if self._peek() == "!":
            self._take()
            return not truthy(self._unary())
        return self._primary()

    def _primary(self) -> Any:
        kind, text = self._take()
        if kind == "str":
            return text[1:-1].replace("''", "'")
        if kind == "num":
            return float(text) if "." in text else int(text)
        if text == "(":
            value = self._or()
            if self._take()[1] != ")":
                raise WorkflowError("a '(' is not closed")
            return value
        if kind != "name":
            raise WorkflowError(f"unexpected {text!r}")
        if self._peek() == "(":
            return self._call(text)
        return self._lookup(text)

    def _call(self, name: str) -> Any:
        self._take()
        args = []
        while self._peek() != ")":
            args.append(self._or())
            if self._peek() == ",":
                self._take()
        self._take()
        if name in STATUS_FUNCTIONS and not args:
            failed = self.status.failed
            return {"always": True, "success": not failed, "failure": failed}.get(name, False)
        if name == "hashFiles" and self.hash_files is not None:
            return self.hash_files([str(a) for a in args])
        raise WorkflowError(f"the harness does not know the function {name}()")

    def _lookup(self, path: str) -> Any:
        if path in ("true", "false", "null"):
            return {"true": True, "false": False, "null": None}[path]
        root, *rest = path.split(".")
        if root not in CONTEXTS:
            raise WorkflowError(f"the harness does not know the context {root!r} ({path})")
        value: Any = self.context.get(root, {})
        for part in rest:
            value = value.get(part) if isinstance(value, Mapping) else None
        return value


def truthy(value: Any) -> bool:
    return value not in (None, False, "", 0)


def equal(a: Any, b: Any) -> bool:
    """GitHub's ``==``: strings without regard to case; values of two types compared as numbers
    (null and '' are 0, so the output of a skipped step equals ''), a text that is not one
    equal to nothing."""
    if isinstance(a, str) and isinstance(b, str):
        return a.lower() == b.lower()
    if type(a) is not type(b):
        x, y = _number(a), _number(b)
        return x is not None and x == y
    return bool(a == b)


def _number(value: Any) -> float | None:
    if value is None or value == "":
        return 0.0
    if isinstance(value, (bool, int, float)):
        return float(value)
    try:
        return float(str(value).strip())
    except ValueError:
        return None  # NaN: equal to nothing


def as_text(value: Any) -> str:
    """A value as GitHub pastes it into a string."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def substitute(text: str, evaluator: Evaluator) -> str:
    """``text`` with each ``${{ expression }}`` replaced by its value."""
    return _WRAPPED.sub(lambda m: as_text(evaluator.evaluate(m.group(1))), text)


def condition(text: Any, evaluator: Evaluator) -> bool:
    """An ``if:``: without a status function GitHub reads it as ``success() && (...)``."""
    if text is None or text == "":
        return not evaluator.status.failed
    if isinstance(text, bool):
        return text and not evaluator.status.failed
    inner = str(text).strip()
    wrapped = _WRAPPED.fullmatch(inner)
    if wrapped:
        inner = wrapped.group(1)
    value = truthy(evaluator.evaluate(inner))
    if not any(re.search(rf"\b{f}\s*\(", inner) for f in STATUS_FUNCTIONS):
        value = value and not evaluator.status.failed
    return value


def hash_files(workspace: Path) -> Callable[[list[str]], str]:
    """``hashFiles(...)`` over files of ``workspace`` (plain names; no globs needed here): as
    GitHub's, the empty string when no file matches."""

    def do(patterns: list[str]) -> str:
        digest, found = hashlib.sha256(), False
        for pattern in patterns:
            path = workspace / pattern
            if not path.is_file():
                continue
            found = True
            digest.update(hashlib.sha256(path.read_bytes()).digest())
        return digest.hexdigest() if found else ""

    return do


def load(path: Path) -> dict[str, Any]:
    """A workflow file; its triggers under ``"on"`` (YAML 1.1 reads a bare ``on`` as True)."""
    import yaml  # the [dev] extra: only the tests that run workflows need it

    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    if not isinstance(data, dict) or "jobs" not in data:
        raise WorkflowError(f"{path}: not a workflow (no jobs)")
    if True in data:
        data["on"] = data.pop(True)
    return data


def triggered(workflow: Mapping[str, Any], event: str, ref: str, source: str = "") -> bool:
    """Whether ``event`` on ``ref`` (``source``: the finished workflow of a workflow_run)
    starts ``workflow``: the branch and workflow filters the examples use."""
    on = workflow.get("on") or {}
    if isinstance(on, (str, list)):
        on = {name: None for name in ([on] if isinstance(on, str) else on)}
    if event not in on:
        return False
    spec = on[event] or {}
    branches = spec.get("branches")
    if branches is not None and ref.removeprefix("refs/heads/") not in branches:
        return False
    workflows = spec.get("workflows")
    if workflows is not None and source not in workflows:
        return False
    types = spec.get("types")
    return types is None or "completed" in types or event != "workflow_run"
