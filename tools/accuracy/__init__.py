"""The accuracy report's tooling: `make accuracy` writes docs/accuracy.md and the band table.

Not shipped in the wheel: these modules compare railplan's models with the published rows of
``tests/data/*-measurements.yaml`` and write ``infra/budget/data/bands.json`` (which the
product reads at runtime, `infra.budget.bands`) and docs/accuracy.md. `calibration`
(collectives, with its notes in `calibration_notes`), `train_accuracy` (training) and
`checkpoint_table` (checkpoints) compare; `band_table` writes the bands and their tables;
`accuracy_doc` the training section with the peer models' figures (`train_peer`). They import
`infra`; nothing in `infra` imports them (tests/test_imports.py).
"""
