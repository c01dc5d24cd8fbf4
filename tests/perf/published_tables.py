"""The published tables expectations.csv holds: one `PublishedTable` per table id, with what
every row of it shares, and the model ids of the grid tables with their column headers."""

from __future__ import annotations

from dataclasses import dataclass

SCALINGS = ("single", "weak", "strong")
"""What a row measures over ``devices`` devices: ``single`` one device at ``batch_size``;
``weak`` ``batch_size`` on every device; ``strong`` a total of ``batch_size`` split over them."""


@dataclass(frozen=True)
class PublishedTable:
    """One source table: its markdown section title and what every row in it shares.

    A grid table (the MXNet docs') has batch sizes down and models across. A row table (the SSD
    study's) has one row per run, told apart by ``setup`` and ``gpu`` (its Setup and GPU
    columns); its rows may scale (``scalings``) and ``hardware`` may hold ``{devices}``.
    """

    title: str
    hardware: str
    mode: str
    dtype: str
    scalings: tuple[str, ...] = ("single",)
    #: Model ids its rows may name (None: the grid tables' `MODEL_COLUMNS`).
    models: tuple[str, ...] | None = None
    setup: str | None = None
    gpu: str | None = None
    #: Whether several devices are GPUs of one machine (else one machine per GPU).
    one_machine: bool = True

    @property
    def layout(self) -> str:
        return "grid" if self.setup is None else "rows"

    def hardware_for(self, devices: int) -> str:
        return self.hardware.format(devices=devices)

    def check_scaling(self, scaling: str, devices: str, table_id: str) -> tuple[str, int]:
        """A row's (scaling, devices), checked against each other and against this table."""
        if scaling not in SCALINGS:
            raise ValueError(f"scaling must be one of {SCALINGS}, got {scaling!r}")
        if scaling not in self.scalings:
            raise ValueError(
                f"scaling {scaling!r} does not match table {table_id!r}, which has "
                f"{' or '.join(self.scalings)}"
            )
        if not devices.isdigit() or int(devices) < 1:
            raise ValueError(f"devices must be a positive integer, got {devices!r}")
        count = int(devices)
        if (scaling == "single") != (count == 1):
            raise ValueError(
                f"scaling {scaling!r} with {count} devices: single is exactly one device, "
                "weak and strong are more than one"
            )
        return scaling, count


SSD_TITLE = (
    "SSD training (MXNet SSD, PASCAL VOC 2012, 300x300), samples/sec, from a 2017 field study"
)
SSD_MODELS = ("ssd_300_vgg16_atrous_voc",)

TABLES: dict[str, PublishedTable] = {
    "c5.18xlarge-inference-fp32": PublishedTable(
        "CPU inference, AWS EC2 C5.18xlarge", "cpu-*8124m*-72c", "inference", "float32"
    ),
    "c5.9xlarge-inference-fp32": PublishedTable(
        "CPU inference, AWS EC2 C5.9xlarge", "cpu-*8124m*-36c", "inference", "float32"
    ),
    "c5.4xlarge-inference-fp32": PublishedTable(
        "CPU inference, AWS EC2 C5.4xlarge", "cpu-*8124m*-16c", "inference", "float32"
    ),
    "c5.2xlarge-inference-fp32": PublishedTable(
        "CPU inference, AWS EC2 C5.2xlarge", "cpu-*8124m*-8c", "inference", "float32"
    ),
    "c5.xlarge-inference-fp32": PublishedTable(
        "CPU inference, AWS EC2 C5.xlarge", "cpu-*8124m*-4c", "inference", "float32"
    ),
    "k80-inference-fp32": PublishedTable(
        "GPU inference, K80 (EC2 p2.2xlarge), float32", "gpu-*k80*-x1", "inference", "float32"
    ),
    "m60-inference-fp32": PublishedTable(
        "GPU inference, M60 (EC2 g3.4xlarge), float32", "gpu-*m60*-x1", "inference", "float32"
    ),
    "v100-inference-fp32": PublishedTable(
        "GPU inference, V100 (EC2 p3.2xlarge), float32", "gpu-*v100*-x1", "inference", "float32"
    ),
    "v100-inference-fp16": PublishedTable(
        "GPU inference, V100 (EC2 p3.2xlarge), float16", "gpu-*v100*-x1", "inference", "float16"
    ),
    "k80-training-fp32": PublishedTable(
        "GPU training, K80 (single GPU), float32", "gpu-*k80*-x1", "training", "float32"
    ),
    "m60-training-fp32": PublishedTable(
        "GPU training, M60, float32", "gpu-*m60*-x1", "training", "float32"
    ),
    "v100-training-fp32": PublishedTable(
        "GPU training, V100, float32", "gpu-*v100*-x1", "training", "float32"
    ),
    "k520-ssd-training": PublishedTable(
        SSD_TITLE,
        "gpu-*k520-x1",
        "training",
        "float32",
        ("single", "weak"),
        SSD_MODELS,
        "g2.2xlarge, one machine per GPU",
        "K520",
        one_machine=False,
    ),
    "gtx1080-ssd-training": PublishedTable(
        SSD_TITLE,
        "gpu-*gtx-1080-x1",
        "training",
        "float32",
        ("single", "weak"),
        SSD_MODELS,
        "in-house, one machine per GPU",
        "GTX 1080",
        one_machine=False,
    ),
    "titanx-ssd-training": PublishedTable(
        SSD_TITLE,
        "gpu-*titan-x*-x{devices}",
        "training",
        "float32",
        ("single", "weak", "strong"),
        SSD_MODELS,
        "one machine (DevBox)",
        "Titan X",
    ),
}
"""Table ids used in the CSV, with the markdown section each one comes from."""

MODEL_COLUMNS: dict[str, str] = {
    "alexnet": "Alexnet",
    "vgg16": "VGG 16",
    "inception-bn": "Inception-BN",
    "inceptionv3": "Inception-v3",
    "resnet50_v1": "Resnet 50",
    "resnet152_v1": "Resnet 152",
}
"""Model ids used in the CSV, with the column header the published tables give them."""

# The training tables mark AlexNet's column: its real batch is 16 times the one shown.
TRAINING_MODEL_COLUMNS: dict[str, str] = {**MODEL_COLUMNS, "alexnet": "Alexnet(*16)"}
