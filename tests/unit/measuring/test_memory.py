"""Peak memory of a step: the /proc methods (real and faked), GPU arithmetic, the verdict."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from memory_steps import measure_peak_memory

from pytest_mxperf.measuring.memory import (
    MemoryMethod,
    MemoryProbe,
    MemoryRecord,
    MemoryTrend,
    memory_change,
    read_status_kb,
    release_free_memory,
    reset_peak,
)
from pytest_mxperf.system import codec

linux_only = pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs /proc")


def status(rss_kb: int, hwm_kb: int) -> str:
    return f"Name:\tpython\nVmPeak:\t 9 kB\nVmHWM:\t{hwm_kb:8d} kB\nVmRSS:\t{rss_kb:8d} kB\n"


def fake_proc(tmp_path: Path, rss_kb: int, hwm_kb: int, resettable: bool) -> Path:
    (tmp_path / "status").write_text(status(rss_kb, hwm_kb))
    if resettable:
        (tmp_path / "clear_refs").write_text("")
    else:
        (tmp_path / "clear_refs").mkdir()  # writing to it fails like a refused reset
    return tmp_path


def test_vmhwm_method(tmp_path: Path) -> None:
    proc = fake_proc(tmp_path, rss_kb=100_000, hwm_kb=100_000, resettable=True)

    def step() -> None:  # the window's peak is 150 MiB above the start, freed again
        (proc / "status").write_text(status(rss_kb=100_000, hwm_kb=100_000 + 150 * 1024))

    record = measure_peak_memory(step, lambda: None, steps=1, proc=proc)
    assert record == MemoryRecord(150.0, MemoryMethod.VMHWM, "cpu", (100_000 + 150 * 1024) / 1024)
    assert (proc / "clear_refs").read_text() == "5"


def test_refused_reset_but_mark_rose(tmp_path: Path) -> None:
    proc = fake_proc(tmp_path, rss_kb=100_000, hwm_kb=120_000, resettable=False)

    def step() -> None:
        (proc / "status").write_text(status(rss_kb=100_000, hwm_kb=100_000 + 40 * 1024))

    record = measure_peak_memory(step, lambda: None, steps=1, proc=proc)
    assert (record.method, record.peak_mb) == (MemoryMethod.VMHWM_RISE, 40.0)


def test_refused_reset_and_old_mark_falls_back_to_rss(tmp_path: Path) -> None:
    proc = fake_proc(tmp_path, rss_kb=100_000, hwm_kb=900_000, resettable=False)

    def step() -> None:
        (proc / "status").write_text(status(rss_kb=110_240, hwm_kb=900_000))

    record = measure_peak_memory(step, lambda: None, steps=1, proc=proc)
    assert (record.method, record.peak_mb, record.process_peak_mb) == (
        MemoryMethod.RSS,
        10.0,
        None,
    )


def test_no_proc_is_a_clear_error(tmp_path: Path) -> None:
    probe = MemoryProbe(proc=tmp_path / "missing").start()
    with pytest.raises(RuntimeError, match="needs Linux /proc"):
        probe.stop()


@linux_only
def test_this_machine_resets_vmhwm() -> None:
    # Records what this machine allows; the other methods are tested with a fake /proc.
    if not reset_peak():
        pytest.skip("this kernel/container refuses /proc/self/clear_refs")
    before = read_status_kb()["VmHWM"]
    block = bytearray(64 * 1024 * 1024)
    block[::4096] = b"\1" * len(block[::4096])  # touch every page
    del block
    assert read_status_kb()["VmHWM"] >= before + 60 * 1024
    assert reset_peak()
    assert read_status_kb()["VmHWM"] < before + 60 * 1024


@linux_only
def test_a_case_counts_memory_an_earlier_case_freed() -> None:
    # 1000 blocks of 96 KiB (under glibc's mmap threshold: on the heap), every other one freed:
    # 48 MiB lying between live blocks, which free() cannot hand back to the system.
    blocks = [bytearray(96 * 1024) for _ in range(1000)]
    del blocks[::2]
    probe = MemoryProbe("cpu").start()
    again = [bytearray(96 * 1024) for _ in range(500)]  # what a next case allocates
    record = probe.stop()
    del again, blocks
    if not release_free_memory():
        pytest.skip("no malloc_trim here (not glibc): freed heap pages are reused unseen")
    # Unreleased, the new blocks fit in the freed ones and the peak reads about 0.
    assert record.peak_mb >= 32


@pytest.mark.parametrize("failure", [AttributeError, OSError, TypeError])
def test_no_malloc_trim_is_no_error(monkeypatch: pytest.MonkeyPatch, failure: type) -> None:
    # musl and macOS have no malloc_trim (AttributeError); Windows refuses CDLL(None).
    def cdll(name: object) -> object:
        raise failure("no C library here")

    monkeypatch.setattr("pytest_mxperf.measuring.memory.ctypes.CDLL", cdll)
    assert release_free_memory() is False


@linux_only
def test_transient_peak_is_seen() -> None:
    def step() -> None:
        block = bytearray(64 * 1024 * 1024)
        block[::4096] = b"\1" * len(block[::4096])

    record = measure_peak_memory(step, lambda: None, steps=1)
    if record.method != MemoryMethod.VMHWM:
        pytest.skip(f"VmHWM cannot be reset here ({record.method.value}): transient peaks hide")
    assert record.peak_mb >= 60


@linux_only
def test_large_ndarray_step_needs_more_memory() -> None:
    mx = pytest.importorskip("mxnet")
    kept: list[Any] = []

    def small() -> None:
        kept.append(mx.nd.ones((4, 8)))

    def large() -> None:  # 64 MiB of float32, written (so resident)
        kept.append(mx.nd.ones((16, 1024, 1024)))

    small_record = measure_peak_memory(small, mx.nd.waitall, steps=2)
    large_record = measure_peak_memory(large, mx.nd.waitall, steps=1)
    kept.clear()
    assert large_record.peak_mb > small_record.peak_mb + 48
    assert large_record.method in (MemoryMethod.VMHWM, MemoryMethod.VMHWM_RISE, MemoryMethod.RSS)
    assert large_record.device == "cpu"
    print(small_record, large_record, file=sys.stderr)


def test_gpu_arithmetic_with_fake_mx() -> None:
    free = iter([10 * 2**30, 7 * 2**30])  # 3 GiB more in use after the steps
    mx = SimpleNamespace(
        context=SimpleNamespace(gpu_memory_info=lambda device_id: (next(free), 16 * 2**30))
    )
    record = measure_peak_memory(lambda: None, lambda: None, device="gpu", device_id=1, mx=mx)
    assert record == MemoryRecord(3072.0, MemoryMethod.GPU_MEMORY_INFO, "gpu:1")


def test_gpu_on_a_real_gpu() -> None:
    mx = pytest.importorskip("mxnet")
    if mx.context.num_gpus() == 0:
        pytest.skip("no GPU here")
    kept: list[Any] = []
    record = measure_peak_memory(
        lambda: kept.append(mx.nd.ones((64, 1024, 1024), ctx=mx.gpu(0))),
        mx.nd.waitall,
        steps=1,
        device="gpu",
        mx=mx,
    )
    assert record.peak_mb >= 200


def test_record_round_trip() -> None:
    record = MemoryRecord(12.5, MemoryMethod.VMHWM, "cpu", 812.0)
    assert codec.from_dict(MemoryRecord, codec.to_dict(record)) == record
    with pytest.raises(ValueError):
        codec.from_dict(MemoryRecord, {**codec.to_dict(record), "method": "guess"})


@pytest.mark.parametrize(
    ("base", "now", "trend"),
    [
        (500.0, 600.0, MemoryTrend.GREW),  # +20% and +100 MiB
        (500.0, 540.0, MemoryTrend.SAME),  # +8%: under the tolerance
        (20.0, 30.0, MemoryTrend.SAME),  # +50% but only 10 MiB: under the floor
        (500.0, 300.0, MemoryTrend.SHRANK),
        (0.0, 100.0, MemoryTrend.GREW),
    ],
)
def test_memory_change(base: float, now: float, trend: MemoryTrend) -> None:
    assert memory_change(base, now, tolerance=0.10, floor_mb=16.0).trend == trend


def test_memory_change_message() -> None:
    change = memory_change(500.0, 650.0)
    assert change.change == pytest.approx(0.30)
    assert change.message == (
        "peak memory grew: 500.0 -> 650.0 MiB (+30%), tolerance 10% and at least 16 MiB"
    )
    with pytest.raises(ValueError):
        memory_change(1.0, 2.0, tolerance=-0.1)
