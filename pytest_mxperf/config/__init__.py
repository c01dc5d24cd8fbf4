"""What the user declares: options, settings, markers, floors and the identity of a case.

Imports only ``system``.

- ``options``: every user-settable value described once (`SPECS`); the docs' options page is
  generated from it.
- ``optionspec``: what one option (`Spec`) or switch (`Flag`) is: its flag, ini key, env name.
- ``parsers``: text of a flag, ini key or environment variable to a value, or a ValueError.
- ``settings``: options resolved once into the frozen `Settings` (CLI > env > ini > default).
- ``sideorders``: a paired run's side process's hidden options, parsed once into `SideOrders`.
- ``markers``: the ``mxperf`` marker parsed strictly into `MarkerSpec`.
- ``expectation``: a marker's figures with their scope (`Expectation`, `EfficiencyFloor`).
- ``floors``: expectation floors from a CSV/JSON file.
- ``casekey``: `CaseKey`, a case's stable identity, and the modes and dtypes a case may name.
- ``scaling_kind``: weak or strong scaling of a data-parallel case, and a strong case's split.
"""
