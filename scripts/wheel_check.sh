#!/usr/bin/env bash
# The release check: the plugin as a user gets it, from its wheel, in a project of their own.
#
#   scripts/wheel_check.sh PROJECT_DIR [WHEEL]
#
# 1. Builds the sdist and the wheel of this checkout (python -m build; or takes WHEEL, built
#    before), and checks them: twine check --strict, check-wheel-contents (the wheel holds
#    exactly the files of pytest_mxperf/ here), the sdist holds README.md, LICENSE,
#    CHANGELOG.md and pyproject.toml.
# 2. Makes a fresh virtualenv outside the checkout (mktemp -d) and installs the wheel there with
#    the [cpu] extra, plus the project's requirements.txt without its pytest-mxperf line (the
#    wheel under test stands in for it).
# 3. Copies PROJECT_DIR to a scratch git repository outside the checkout and, from there with the
#    venv's pytest, runs its benchmarks (its benchmarks/ folder, if it has one) three times:
#    --mxperf --mxperf-update (store baselines), --mxperf (compare with them) and
#    --mxperf --mxperf-ab HEAD (a paired run); each must exit 0.
#
# The venv must not see the checkout: the commands run from the scratch directory, PYTHONPATH
# and PYTEST_* variables are dropped, and pytest_mxperf.__file__ must lie inside the venv. So a
# module missing from the wheel fails here. The build tools come from the interpreter $PYTHON
# (default: python3), e.g. the one of a venv with the [dev] extra.
set -euo pipefail

usage() { echo "usage: $0 PROJECT_DIR [WHEEL]" >&2; exit 2; }
[ $# -ge 1 ] && [ $# -le 2 ] || usage
project=$(cd "$1" && pwd) || usage
checkout=$(cd "$(dirname "$0")/.." && pwd)
python=${PYTHON:-python3}
[ -d "$project" ] || { echo "wheel_check: no project directory $1" >&2; exit 2; }

work=$(mktemp -d "${TMPDIR:-/tmp}/mxperf-wheel-check.XXXXXX")
trap 'rm -rf "$work"' EXIT
say() { echo "wheel_check: $*"; }

# 1. Build and check ------------------------------------------------------------------------
if [ $# -eq 2 ]; then
  wheel=$(cd "$(dirname "$2")" && pwd)/$(basename "$2")
  [ -f "$wheel" ] || { echo "wheel_check: no wheel $2" >&2; exit 2; }
  dists=("$wheel")
else
  say "building the sdist and the wheel of $checkout"
  "$python" -m build --outdir "$work/dist" "$checkout" >"$work/build.log" 2>&1 \
    || { cat "$work/build.log" >&2; exit 1; }
  wheel=$(echo "$work"/dist/*.whl)
  sdist=$(echo "$work"/dist/*.tar.gz)
  dists=("$wheel" "$sdist")
  listing=$(tar -tzf "$sdist")
  for name in README.md LICENSE CHANGELOG.md pyproject.toml; do
    grep -qx "[^/]*/$name" <<<"$listing" \
      || { echo "wheel_check: the sdist has no $name" >&2; exit 1; }
  done
fi
version=$(basename "$wheel" | cut -d- -f2)
"$python" -m twine check --strict "${dists[@]}"
"$python" -m check_wheel_contents --package "$checkout/pytest_mxperf" "$wheel"

# 2. A fresh virtualenv outside the checkout --------------------------------------------------
say "installing $(basename "$wheel")[cpu] into a new virtualenv"
unset PYTHONPATH PYTHONHOME VIRTUAL_ENV
for name in $(compgen -e | grep '^PYTEST_' || true); do unset "$name"; done
"$python" -m venv "$work/venv"
venv_python="$work/venv/bin/python"
"$venv_python" -m pip install --quiet "$wheel[cpu]"
if [ -f "$project/requirements.txt" ]; then
  grep -viE '^[[:space:]]*pytest[-_]mxperf([^a-z0-9_-]|$)' "$project/requirements.txt" \
    >"$work/requirements.txt" || true
  "$venv_python" -m pip install --quiet -r "$work/requirements.txt"
fi

# 3. The project in a scratch git repository --------------------------------------------------
scratch="$work/project"
cp -R "$project" "$scratch"
rm -rf "$scratch/.git" "$scratch/baselines"
cd "$scratch"
git init -q -b main .
git add -A
git -c user.name=wheel-check -c user.email=wheel-check@mxperf.invalid \
  commit -q -m "the user's project"

where=$("$venv_python" -c 'import pytest_mxperf; print(pytest_mxperf.__file__)')
case "$where" in
  "$work/venv/"*) ;;
  *) echo "wheel_check: pytest_mxperf imported from $where, not from the venv" >&2; exit 1 ;;
esac
shown=$("$work/venv/bin/mxperf" --version)
[ "$shown" = "mxperf $version" ] \
  || { echo "wheel_check: mxperf --version says '$shown', the wheel is $version" >&2; exit 1; }
say "pytest_mxperf $version from ${where#"$work"/}"

# The project's benchmarks folder when it has one, else what its pytest configuration collects.
where_tests=()
[ -d benchmarks ] && where_tests=(benchmarks)
run() {
  say "pytest $* ${where_tests[*]-}"
  local code=0
  "$work/venv/bin/pytest" -p no:cacheprovider "$@" ${where_tests[@]+"${where_tests[@]}"} || code=$?
  [ "$code" -eq 0 ] || { echo "wheel_check: 'pytest $*' exited $code" >&2; exit 1; }
}
run --mxperf --mxperf-update --mxperf-json "$work/update.json"
ls baselines/*/*.json >/dev/null
run --mxperf --mxperf-json "$work/compare.json"
run --mxperf --mxperf-ab HEAD --mxperf-json "$work/ab.json"
"$venv_python" - "$work" "$version" <<'EOF'
import json, sys
from pathlib import Path

work, version = Path(sys.argv[1]), sys.argv[2]
for name in ("update", "compare", "ab"):
    report = json.loads((work / f"{name}.json").read_text())
    assert report["run"]["pytest_mxperf_version"] == version, (name, report["run"])
    assert report["cases"], f"{name}: no case measured"
stored = [json.loads(p.read_text()) for p in Path("baselines").glob("*/*.json")]
assert stored and all(
    c["pytest_mxperf_version"] == version for f in stored for c in f["cases"].values()
), "a stored case lacks the version"
print(f"wheel_check: ok: pytest-mxperf {version} from its wheel ran the project's benchmarks")
EOF

# 4. The example's workflows, run by the harness the suite uses (pytest_mxperf.testing, from the
#    wheel) with this venv's interpreter standing in for setup-python: the PR (a fork's, one case
#    10% slower, then fixed: the sticky comment updated), the comment job and a push to main
#    that keeps the history, each job's outcome checked (the fake back end; real MXNet ran above).
if [ -d "$project/.github/workflows" ]; then
  say "the example's workflows from the wheel (scripts/workflow_demo.py --no-real)"
  # The main workflow installs the [report] extra for its history page (the harness stands in
  # for that pip line, so it is installed here), and the harness reads the workflow files with
  # PyYAML, which only the tests need.
  "$venv_python" -m pip install --quiet "$wheel[report]" "pyyaml>=6.0,<7"
  "$venv_python" "$checkout/scripts/workflow_demo.py" --no-real --example "$project" \
    >"$work/workflows.log" 2>&1 || { cat "$work/workflows.log" >&2; exit 1; }
  grep -E "^    mxperf-|^=== " "$work/workflows.log"
  say "ok: the example's PR, comment and main workflows ran green from the wheel"
fi
