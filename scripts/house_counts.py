"""Print the counts issue 47 names, computed from the code, so a change to the wings' insides
can give them before and after.

    python scripts/house_counts.py             # the counts, one a line
    python scripts/house_counts.py --verbose   # and what each count is made of

Static counts only (ast over pytest_mxperf/ and tests/): the per-case counts of the issue
(``decide()`` calls for one case, modules and returns on a case's way) need a traced run and
are in scripts/case_trace.py; ``decide(`` call sites are counted here.
"""

from __future__ import annotations

import argparse
import ast
import re
from collections import Counter, defaultdict
from collections.abc import Iterator, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "pytest_mxperf"
MAX_MODULE_LINES = 350
MAX_FUNCTION_LINES = 60
#: Wings whose job is setting the run up: a side/pair flag checked there is a role chosen.
SETUP_WINGS = ("run", "plugin")


def wings() -> list[str]:
    return sorted(p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists())


def package_modules() -> dict[str, Path]:
    """Dotted module name -> path, for every module of the package (``__init__`` as the package)."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def wing_of(path: Path) -> str:
    rel = path.relative_to(PACKAGE).parts
    return rel[0] if len(rel) > 1 else ""


def functions(tree: ast.AST) -> Iterator[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    """(qualified name, node) of every function and method, nested ones too."""

    def walk(
        node: ast.AST, prefix: str
    ) -> Iterator[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                yield f"{prefix}{child.name}", child
                yield from walk(child, f"{prefix}{child.name}.")
            elif isinstance(child, ast.ClassDef):
                yield from walk(child, f"{prefix}{child.name}.")
            else:
                yield from walk(child, prefix)

    yield from walk(tree, "")


def flag_checks(path: Path, tree: ast.AST) -> list[str]:
    """``session.side`` / ``settings.ab`` reads (any object whose name ends so)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in ("side", "ab"):
            owner = ast.unparse(node.value)
            if (node.attr == "side" and owner.endswith("session")) or (
                node.attr == "ab" and owner.endswith("settings")
            ):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {ast.unparse(node)}")
    return found


def replace_calls(tree: ast.AST) -> int:
    """Calls of ``dataclasses.replace`` (as ``replace(...)`` imported from dataclasses, too)."""
    imported = any(
        isinstance(n, ast.ImportFrom)
        and n.module == "dataclasses"
        and any(a.name == "replace" and a.asname is None for a in n.names)
        for n in ast.walk(tree)
    )
    count = 0
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        plain = isinstance(node.func, ast.Name) and node.func.id == "replace" and imported
        if plain or ast.unparse(node.func) == "dataclasses.replace":
            count += 1
    return count


def codec_methods(
    path: Path, tree: ast.AST, names: tuple[str, ...] = ("as_dict", "from_dict")
) -> list[str]:
    """Methods of those ``names`` (``edge_out``/``edge_in``: a record's exceptions to the one
    codec, `pytest_mxperf.system.codec`)."""
    return [
        f"{path.relative_to(ROOT)}: {node.name}.{item.name}"
        for node in ast.walk(tree)
        if isinstance(node, ast.ClassDef)
        for item in node.body
        if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and item.name in names
    ]


def str_keys(path: Path, tree: ast.AST) -> tuple[list[str], list[str]]:
    """``str(<...>.key)`` / ``str(key)`` calls: (those used at once as a dict key, a subscript,
    a ``get``/``setdefault``/``pop`` argument or an ``in`` test; the others, mostly a name
    that is then used so, or a line of text)."""
    calls: dict[int, ast.Call] = {}
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "str"
            and len(node.args) == 1
            and ast.unparse(node.args[0]).split(".")[-1] in ("key", "result_key", "case_key")
        ):
            calls[id(node)] = node
    keyed: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript):
            keyed.add(id(node.slice))
        elif isinstance(node, ast.Dict):
            keyed.update(id(k) for k in node.keys if k is not None)
        elif isinstance(node, ast.DictComp):
            keyed.add(id(node.key))
        elif isinstance(node, ast.Compare) and any(
            isinstance(op, (ast.In, ast.NotIn)) for op in node.ops
        ):
            keyed.add(id(node.left))
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("get", "setdefault", "pop")
            and node.args
        ):
            keyed.add(id(node.args[0]))
    where = {i: f"{path.relative_to(ROOT)}:{c.lineno}: {ast.unparse(c)}" for i, c in calls.items()}
    return [w for i, w in where.items() if i in keyed], [
        w for i, w in where.items() if i not in keyed
    ]


def aliases(path: Path, tree: ast.AST, wing_names: set[str]) -> list[str]:
    """Package-module imports renamed to a wing's name (not their own) or to ``fixture_*``."""
    found = []
    own = wing_of(path)
    for node in ast.walk(tree):
        if not (
            isinstance(node, ast.ImportFrom) and (node.module or "").startswith("pytest_mxperf")
        ):
            continue
        source_wing = (node.module or "").split(".")[1] if "." in (node.module or "") else ""
        for alias in node.names:
            name = alias.asname
            if name is None or name == alias.name:
                continue
            shadows = name in wing_names and name not in (own, source_wing)
            if shadows or name.startswith("fixture_"):
                found.append(f"{path.relative_to(ROOT)}: {alias.name} as {name}")
    return found


def long_functions(path: Path, tree: ast.AST, lines: list[str]) -> tuple[list[str], list[str]]:
    """(over the limit without a reason, over it with a ``# long:`` comment saying why)."""
    bare: list[str] = []
    explained: list[str] = []
    for name, node in functions(tree):
        start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
        length = (node.end_lineno or node.lineno) - start + 1
        if length <= MAX_FUNCTION_LINES:
            continue
        around = lines[max(start - 3, 0) : node.body[0].lineno]
        entry = f"{path.relative_to(ROOT)}: {name} ({length} lines)"
        (explained if any("# long:" in line for line in around) else bare).append(entry)
    return bare, explained


def module_imports(tree: ast.Module, module: str, known: dict[str, Path]) -> set[str]:
    """Package modules a module imports at module level (``if TYPE_CHECKING:`` blocks too)."""
    targets: set[str] = set()
    is_package = known[module].name == "__init__.py"

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, ast.If):
                visit(node.body)
                visit(node.orelse)
            elif isinstance(node, ast.Try):
                visit(node.body)
            elif isinstance(node, ast.Import):
                targets.update(a.name for a in node.names if a.name in known)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = module.split(".")
                    parts = parts if is_package else parts[:-1]
                    parts = parts[: len(parts) - node.level + 1]
                    base = ".".join([*parts, base] if base else parts)
                for alias in node.names:
                    if f"{base}.{alias.name}" in known:
                        targets.add(f"{base}.{alias.name}")
                    elif base in known:
                        targets.add(base)

    visit(tree.body)
    targets.discard(module)
    return targets


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def connect(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                connect(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            connect(node)
    return found


def docstrings(tree: ast.AST) -> set[int]:
    """ids of the docstring constants in ``tree`` (a docstring naming a function is no use)."""
    found = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        first = body[0] if isinstance(body, list) and body else None
        value = first.value if isinstance(first, ast.Expr) else None
        if isinstance(value, ast.Constant) and isinstance(value.value, str):
            found.add(id(value))
    return found


def referenced_names(trees: Sequence[ast.AST]) -> Counter[str]:
    """How often each name is used (as a name, an attribute, an imported name or a string
    that is not a docstring: ``getattr`` and ``monkeypatch.setattr`` take names as text)."""
    used: Counter[str] = Counter()
    for tree in trees:
        skip = docstrings(tree)
        for node in ast.walk(tree):
            if id(node) in skip:
                continue
            if isinstance(node, ast.Name):
                used[node.id] += 1
            elif isinstance(node, ast.Attribute):
                used[node.attr] += 1
            elif isinstance(node, (ast.ImportFrom, ast.Import)):
                used.update(a.asname or a.name.split(".")[-1] for a in node.names)
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                used.update(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", node.value))
    return used


def top_level_functions(
    tree: ast.Module,
) -> Iterator[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    """Module-level functions and the methods of module-level classes."""
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node.name, node
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    yield f"{node.name}.{item.name}", item


def test_only_functions(package: dict[Path, ast.Module], tests: Sequence[ast.AST]) -> list[str]:
    """Public functions/methods of the package (testing/ aside) that only tests use."""
    in_package = referenced_names(list(package.values()))
    in_tests = referenced_names(tests)
    found = []
    for path, tree in package.items():
        if wing_of(path) in ("testing", ""):
            continue
        for name, node in top_level_functions(tree):
            if node.name.startswith("_") or node.name.startswith("pytest_"):
                continue
            if in_package[node.name] == 0 and in_tests[node.name] > 0:
                found.append(f"{path.relative_to(ROOT)}: {name}")
    return found


def flat_test_files() -> list[str]:
    unit = ROOT / "tests" / "unit"
    known = set(wings())
    return sorted(
        str(p.relative_to(ROOT))
        for p in unit.rglob("test_*.py")
        if len(p.relative_to(unit).parts) != 2 or p.relative_to(unit).parts[0] not in known
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--verbose", action="store_true", help="list what each count is made of")
    args = parser.parse_args()

    known = package_modules()
    trees = {path: ast.parse(path.read_text()) for path in known.values()}
    test_trees = [ast.parse(p.read_text()) for p in sorted((ROOT / "tests").rglob("*.py"))]
    wing_names = set(wings())

    flags_outside: list[str] = []
    flags_setup: list[str] = []
    replaces: Counter[str] = Counter()
    codecs: list[str] = []
    hooks: list[str] = []
    shadowing: list[str] = []
    bare: list[str] = []
    explained: list[str] = []
    over: list[str] = []
    decides: list[str] = []
    keys_as_keys: list[str] = []
    keys_other: list[str] = []
    stems: dict[str, set[str]] = defaultdict(set)
    for path, tree in trees.items():
        wing = wing_of(path)
        lines = path.read_text().splitlines()
        for found in flag_checks(path, tree):
            (flags_setup if wing in SETUP_WINGS else flags_outside).append(found)
        replaces[wing or "(top)"] += replace_calls(tree)
        codecs += codec_methods(path, tree)
        hooks += codec_methods(path, tree, ("edge_out", "edge_in"))
        more_keyed, more_other = str_keys(path, tree)
        keys_as_keys += more_keyed
        keys_other += more_other
        shadowing += aliases(path, tree, wing_names)
        more_bare, more_explained = long_functions(path, tree, lines)
        bare += more_bare
        explained += more_explained
        if len(lines) > MAX_MODULE_LINES:
            over.append(f"{path.relative_to(ROOT)} ({len(lines)} lines)")
        if wing and path.name != "__init__.py":
            stems[path.stem.removesuffix("s")].add(wing)
        decides += [
            f"{path.relative_to(ROOT)}:{n.lineno}"
            for n in ast.walk(tree)
            if isinstance(n, ast.Call) and ast.unparse(n.func).split(".")[-1] == "decide"
        ]
    # A plural is the same name (judging/verdict and measuring/verdicts clash too).
    clashes = [
        f"{stem}(s): {', '.join(sorted(w))}" for stem, w in sorted(stems.items()) if len(w) > 1
    ]
    # The top package's imports are its lazy public names (TYPE_CHECKING only): every module
    # may import it (for its path, its version) without that being a circle.
    graph = {
        module: module_imports(trees[path], module, known)
        for module, path in known.items()
        if module != "pytest_mxperf"
    }
    loops = [" <-> ".join(c) for c in circles(graph)]
    dead = test_only_functions(trees, test_trees)
    flat = flat_test_files()

    rows: list[tuple[str, int, list[str]]] = [
        ("modules in pytest_mxperf", len(known), []),
        (
            "lines in pytest_mxperf",
            sum(len(p.read_text().splitlines()) for p in known.values()),
            [],
        ),
        (
            "session.side/settings.ab checks outside run/ and plugin/",
            len(flags_outside),
            flags_outside,
        ),
        ("session.side/settings.ab checks in run/ and plugin/", len(flags_setup), flags_setup),
        (
            "dataclasses.replace calls",
            sum(replaces.values()),
            [f"{w}: {n}" for w, n in sorted(replaces.items()) if n],
        ),
        ("decide() call sites", len(decides), decides),
        ("hand-written as_dict/from_dict methods", len(codecs), codecs),
        ("  in modules", len({c.split(":")[0] for c in codecs}), []),
        ("edge_out/edge_in hooks (a record's exceptions to the one codec)", len(hooks), hooks),
        (
            "str(key) used at once as a dict key, subscript or 'in' test",
            len(keys_as_keys),
            keys_as_keys,
        ),
        ("str(key) elsewhere (names then used as keys, text)", len(keys_other), keys_other),
        ("module names used by two wings", len(clashes), clashes),
        ("aliases shadowing a wing or flat-layout leftovers", len(shadowing), shadowing),
        (f"modules over {MAX_MODULE_LINES} lines", len(over), over),
        (f"functions over {MAX_FUNCTION_LINES} lines without a '# long:' reason", len(bare), bare),
        (
            f"functions over {MAX_FUNCTION_LINES} lines with a '# long:' reason",
            len(explained),
            explained,
        ),
        ("functions only tests use", len(dead), dead),
        ("import circles (module level, TYPE_CHECKING too)", len(loops), loops),
        ("test files in tests/unit not under tests/unit/<wing>/", len(flat), flat),
    ]
    for label, count, detail in rows:
        print(f"{count:6d}  {label}")
        if args.verbose:
            for line in detail:
                print(f"          {line}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
