"""pytest-mxperf: throughput regression testing of Apache MXNet models inside pytest."""

from __future__ import annotations

__version__ = "0.1.0"
