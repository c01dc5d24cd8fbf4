"""Which values a user may set: every option and switch described once (`SPECS`, `FLAGS`), and
the defaults read from there (`DEFAULTS`). What one option is (its flag, ini key, environment
variable and help) is `pytest_mxperf.config.optionspec`; resolving them into a run's values is
`pytest_mxperf.config.settings`."""

from __future__ import annotations

from typing import Any

from pytest_mxperf.config import parsers
from pytest_mxperf.config.optionspec import Flag, Spec

FLAGS: tuple[Flag, ...] = (
    Flag("enabled", "Run MXNet benchmarks, compare them with stored baselines, print a table."),
    Flag("update", "Store this run's results as the baseline of HEAD for this hardware."),
    Flag("allow_dirty", "Let --mxperf-update store results measured on a dirty working tree."),
    Flag(
        "strict",
        "Fail cases that have no baseline or are too noisy to judge, and cases whose peak "
        "memory grew beyond --mxperf-memory-tolerance.",
    ),
    Flag("memory", "Add each case's peak memory (MiB) as a column of the results table."),
)


SPECS: tuple[Spec, ...] = (
    Spec(
        "ctx",
        parsers.parse_ctx,
        (),
        "Device kinds to benchmark on: cpu, gpu, cpu,gpu or auto "
        "(GPU when MXNet sees one, else CPU). Default: auto.",
        "KINDS",
    ),
    Spec(
        "threads",
        parsers.thread_count,
        None,
        "OpenMP threads for MXNet, 1 to 4096 (sets OMP_NUM_THREADS and "
        "MXNET_OMP_MAX_THREADS before MXNet is imported).",
        "N",
    ),
    Spec("json", parsers.any_text, None, "Write every measured case to this JSON file.", "PATH"),
    Spec(
        "min_time",
        parsers.positive_seconds,
        1.0,
        "Measure each case for at least this many seconds of timed blocks.",
        "SECONDS",
    ),
    Spec(
        "max_time",
        parsers.positive_seconds,
        5.0,
        "Soft time budget for the timed blocks of one case "
        "(at least 5 blocks are always measured).",
        "SECONDS",
    ),
    Spec(
        "warmup_time",
        parsers.positive_seconds,
        10.0,
        "Longest warm-up of one case before measuring "
        "anyway (warm-up stops earlier once throughput is steady).",
        "SECONDS",
    ),
    Spec(
        "tolerance",
        parsers.fraction,
        0.05,
        "Smallest relative throughput drop against the stored baseline that can count as a "
        "regression (twice the case's measured noise widens it); a paired run of the baseline "
        "commit confirms it before the case fails, and judges a case that passed more than half "
        "this below its stored figure (see --mxperf-arbitrate).",
        "FRACTION",
    ),
    Spec(
        "confirm",
        parsers.nonneg_int,
        2,
        "Re-measure a case that looks regressed, or whose blocks spread too far to judge "
        "against its baseline, up to N more times (the best attempt is judged: the fastest "
        "of those whose blocks are steady, of all when none is); a suspected regression a "
        "paired run will arbitrate, no more once a re-measure finds it as slow and not near "
        "passing. --mxperf-update measures every case 1 + N times (a data-parallel case once).",
        "N",
    ),
    Spec(
        "baseline_dir",
        parsers.any_text,
        "baselines",
        "Directory of stored baselines, relative to the rootdir.",
        "DIR",
    ),
    Spec(
        "machine",
        parsers.machine,
        None,
        "Use this hardware key instead of the detected one (for CI "
        "fleets whose runners differ in name only).",
        "NAME",
    ),
    Spec(
        "compare",
        parsers.any_text,
        None,
        "Compare with the baseline stored for this git revision "
        "instead of the nearest ancestor of HEAD.",
        "REV",
    ),
    Spec(
        "ab",
        parsers.revision,
        None,
        "Paired mode: measure every selected case for the code at this git revision and for "
        "the working tree, here, in alternating rounds, each side in its own process, and "
        "judge the pair (no stored baseline involved).",
        "REV",
    ),
    Spec(
        "history",
        parsers.any_text,
        None,
        "Paired mode: at the end of the run, add one history entry per case (its ratio, "
        "interval and runner) to this store: a directory, or git:BRANCH of this repository "
        "(pushed to origin when it exists); see mxperf history.",
        "STORE",
    ),
    Spec(
        "rounds",
        parsers.rounds,
        2,
        "Rounds of a paired run (each round measures both sides once, order alternating); "
        "more are added, up to --mxperf-max-rounds, while a case is undecided (a slower case "
        "needs 3 or more to fail).",
        "N",
    ),
    Spec(
        "max_rounds",
        parsers.rounds,
        10,
        "Most rounds a paired run may take for an undecided case.",
        "N",
    ),
    Spec(
        "pair_budget",
        parsers.budget_seconds,
        None,
        "Seconds a run may spend on paired rounds beyond --mxperf-rounds (all its cases "
        "together; a regression's second run is not counted); each extra round goes to the "
        "undecided cases closest to a decision, and once the budget is spent the rest are "
        "inconclusive with the rounds they would need. "
        "Default auto: as long as its first --mxperf-rounds rounds took, at least 30 s "
        "(so the extra rounds at most about double what pairing costs).",
        "SECONDS|auto",
    ),
    Spec(
        "pair_cpus",
        parsers.cpu_list,
        "auto",
        "CPUs both sides of a paired run are pinned to, the same for both: auto (the upper "
        "half of the CPUs this process may use, where MXNet's OpenMP thread count stays as it "
        "is unpinned), off (not pinned), or a list such as 1 or 0-3.",
        "auto|off|CPUS",
    ),
    Spec(
        "pair_lockstep",
        parsers.on_off,
        True,
        "on: both sides of a paired round run at once and take turns, timing a case's blocks "
        "alternately (ABBA), so the machine's drift over seconds hits both alike; off: one side "
        "after the other.",
        "on|off",
    ),
    Spec(
        "pair_confirm",
        parsers.on_off,
        True,
        "on: a case a paired run finds regressed is paired again on fresh processes (new fork "
        "servers for both sides) and fails only if that second run finds it regressed too; its "
        "verdict is the second run's. off: the first paired run decides.",
        "on|off",
    ),
    Spec(
        "pair_profile",
        parsers.on_off,
        True,
        "on: the cases a paired run finds slower are profiled after its rounds (one more "
        "process per side), for the operator table of their message. off: no profile round "
        "(a pair that only measures the ratio, as a history's pairs do).",
        "on|off",
    ),
    Spec(
        "min_effect",
        parsers.fraction,
        0.05,
        "Paired verdicts: a slowdown is a regression when it is certain (the 99% confidence "
        "interval of the ratio lies below 1) and a drop of at least this much is not ruled out; "
        "a case is the same when its 95% interval (90% for a case alone in its run or timed as "
        "a whole) rules out a change this large either way.",
        "FRACTION",
    ),
    Spec(
        "arbitrate",
        parsers.on_off,
        True,
        "on: a case that looks regressed against its stored baseline is measured again paired "
        "with the baseline commit's code (in a git worktree) before it fails; off: the stored "
        "figure alone decides.",
        "on|off",
    ),
    Spec(
        "unconfirmed_tolerance",
        parsers.fraction,
        0.20,
        "Smallest drop that can fail a case when no paired run can confirm it (arbitration "
        "off, or the baseline commit is not in this clone): sized for noisy shared runners.",
        "FRACTION",
    ),
    Spec(
        "memory_budget",
        parsers.size,
        None,
        "CPU sweeps: the process's peak resident memory a batch size may need (2GiB, 512MiB); "
        "a batch predicted to exceed it is not run and ends the doubling. Default: half the "
        "memory available when the sweep starts.",
        "SIZE",
    ),
    Spec(
        "sweep_time",
        parsers.positive_seconds,
        600.0,
        "Total time budget of one mxperf.sweep; points left when it runs out are listed as "
        "not measured.",
        "SECONDS",
    ),
    Spec(
        "markdown",
        parsers.any_text,
        None,
        "Write the verdict table as GitHub-flavoured Markdown to this file (also appended to "
        "$GITHUB_STEP_SUMMARY when that is set).",
        "PATH",
    ),
    Spec(
        "benchmark_action",
        parsers.any_text,
        None,
        "Write the results as github-action-benchmark's customBiggerIsBetter JSON to this file.",
        "PATH",
    ),
    Spec(
        "price_per_hour",
        parsers.price_per_hour,
        None,
        "Price of this machine in dollars per hour: adds dollars per million images (and, with "
        "--mxperf-epoch-images, time and dollars per epoch) to the table and the JSON report.",
        "USD",
    ),
    Spec(
        "epoch_images",
        parsers.epoch_images,
        None,
        "Images in one epoch for the cost figures (e.g. 1281167 for ImageNet-1k).",
        "N",
    ),
    Spec(
        "env_command",
        parsers.any_text,
        None,
        "Build an environment per revision for paired runs: a command run in a new venv, "
        "with {python}, {venv} and {wt} (the revision's worktree) substituted, e.g. "
        "'{python} -m pip install -r {wt}/requirements.txt'. Without it both sides use this "
        "environment, so a pair compares code only.",
        "COMMAND",
    ),
    Spec(
        "dist_timeout",
        parsers.positive_seconds,
        900.0,
        "Longest a data-parallel case with launched ranks (dist kvstores) may run, per "
        "launch; then every rank is ended and that case alone fails with their output.",
        "SECONDS",
    ),
)
SPECS += (
    Spec(
        "pipeline_timeout",
        parsers.positive_seconds,
        60.0,
        "Longest wait for one batch of a data source (mxperf.pipeline, training with data=); "
        "a source that delivers nothing in this time fails its case instead of hanging the run.",
        "SECONDS",
    ),
)
SPECS += (
    Spec(
        "seed",
        parsers.seed,
        0,
        "Random state each benchmark test starts from: before its setup, Python's random, "
        "numpy's and (once imported) MXNet's generators are seeded from this number and the "
        "test's node id, so random weights, synthetic data and augmentations (crops, "
        "shuffles) are the same in every run and on both sides of a paired run. off: leave "
        "the generators as they are.",
        "N|off",
    ),
    Spec(
        "fixed_malloc",
        parsers.on_off,
        True,
        "on: glibc's allocator is set the same in every process that measures (one arena, "
        "mmap only above 32 MiB, no trimming: GLIBC_TUNABLES for the processes it starts, "
        "mallopt for itself), so an input pipeline's buffers do not run faster or slower with "
        "the process's history; off: glibc's own behaviour. A user's own glibc.malloc "
        "tunables or MALLOC_* variables always stand.",
        "on|off",
    ),
)
SPECS += (
    Spec(
        "profile",
        parsers.any_text,
        None,
        "Write MXNet's Chrome trace (DIR/<case>.trace.json, for chrome://tracing or "
        "ui.perfetto.dev) and aggregate table (DIR/<case>.table.txt) of every case, profiled "
        "after it was measured; the JSON report links them.",
        "DIR",
    ),
    Spec(
        "memory_tolerance",
        parsers.fraction,
        0.10,
        "Growth of a case's peak memory against its baseline that is reported (and fails "
        "with --mxperf-strict); a change must also exceed 16 MiB.",
        "FRACTION",
    ),
)
SPECS_BY_NAME = {spec.name: spec for spec in SPECS}
#: The one place defaults live; `Settings`, `MeasureConfig` and the help text read them here.
DEFAULTS: dict[str, Any] = {spec.name: spec.default for spec in SPECS}
