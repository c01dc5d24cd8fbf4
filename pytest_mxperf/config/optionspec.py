"""What one user-settable value is: a `Spec` (an option with its flag, ini key, environment
variable, parser, default and help) or a `Flag` (a command-line switch); the names of each are
derived here from the option's name, once."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable


@dataclass(frozen=True)
class Spec:
    """One user-settable value: its flag, ini key, env variable, parser, default and help."""

    name: str
    parse: Callable[[str], Any]
    default: Any
    help: str
    metavar: str

    @property
    def flag(self) -> str:
        return "--mxperf-" + self.name.replace("_", "-")

    @property
    def ini(self) -> str:
        return "mxperf_" + self.name

    @property
    def env(self) -> str:
        return "PYTEST_MXPERF_" + self.name.upper()

    @property
    def full_help(self) -> str:
        """The help text with the default written from the spec itself."""
        default = self.default
        if default in (None, ()):
            return self.help
        shown = ",".join(default) if isinstance(default, tuple) else default
        if isinstance(default, bool):
            shown = "on" if default else "off"
        return f"{self.help} Default: {shown}."


@dataclass(frozen=True)
class Flag:
    """A boolean command-line switch (no ini/env: a run's mode is chosen per invocation)."""

    name: str
    help: str

    @property
    def flag(self) -> str:
        return "--mxperf" if self.name == "enabled" else "--mxperf-" + self.name.replace("_", "-")
