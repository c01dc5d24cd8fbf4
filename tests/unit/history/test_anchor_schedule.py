"""scripts/anchor_schedule.py: a recorded history refitted with fewer anchor pairs."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

from history_data import entry

ROOT = Path(__file__).resolve().parents[3]


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "anchor_schedule", ROOT / "scripts" / "anchor_schedule.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_sparser_schedule_keeps_the_chain_and_every_kth_anchor() -> None:
    script = _script()
    order = [f"c{i}" for i in range(7)]
    chain = [entry(order[i], order[i - 1]) for i in range(1, 7)]
    anchors = [entry(order[i], order[0], run=f"a{i}") for i in (2, 4, 6)]
    kept = script.thinned(chain + anchors, order, 4)
    assert kept == [*chain, anchors[1]]  # the anchor of c4 only
    assert script.thinned(chain + anchors, order, 2) == chain + anchors
    lines = script.report(chain + anchors, order, 4)
    assert lines[0] == "anchors every 4: 1 anchored job(s) at [4]"
    assert lines[1].startswith("  alpha/inference/float32/bs8/cpu: at 6 ")
    # A step of 20% at c3 on the chain is marked whatever the schedule.
    stepped = [entry("c3", "c2", 0.8) if e.commit == "c3" else e for e in chain]
    assert script.report(stepped, order, 4)[1].endswith("steps marked at [3]")
    assert script.report(chain, order, None)[0].startswith("chain only")
