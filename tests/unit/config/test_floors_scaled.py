"""Floors from an expectations CSV with scaling columns: figures of several devices set no
floor for a case of one, and a published interval floors at its low end."""

from __future__ import annotations

from pytest_mxperf.config.floors import Floor, floor_for, parse_csv

CSV = """# figures
table,hardware,mode,dtype,model,scaling,devices,batch_size,images_per_sec
t,gpu-*titan-x*-x1,training,float32,ssd,single,1,32,40.2
t,gpu-*titan-x*-x2,training,float32,ssd,strong,2,32,70.8
t,gpu-*titan-x*-x2,training,float32,ssd,weak,2,16,70.8
t,gpu-*k520-x1,training,float32,ssd,single,1,16,9-10
"""


def test_only_single_device_rows_are_floors() -> None:
    found = parse_csv(CSV, "f.csv")
    assert [f.hardware for f in found] == ["gpu-*titan-x*-x1", "gpu-*k520-x1"]
    hw = "gpu-geforce-gtx-titan-x-x1"
    assert floor_for(found, hw, "ssd", "training", "float32", 32) == 40.2
    assert floor_for(found, "gpu-geforce-gtx-titan-x-x2", "ssd", "training", "float32", 32) is None


def test_an_interval_floors_at_its_low_end() -> None:
    (k520,) = [f for f in parse_csv(CSV) if "k520" in f.hardware]
    assert k520 == Floor("ssd", 16, 9.0, "gpu-*k520-x1", "training", "float32", "t")


def test_rows_without_scaling_columns_still_floor() -> None:
    assert parse_csv("model,batch_size,images_per_sec\nm,8,50\n") == [Floor("m", 8, 50.0)]
