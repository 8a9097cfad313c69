"""The YAML writers behind host_vars and files/k8s read back as what they were given.

The whole-tree ansible-lint run (tests/test_rendered_tree_tools.py) checks their layout on the
examples; these check the values on inputs the examples do not have: strings YAML would read
as another type, and text whose lines are too long for a literal block.
"""

from __future__ import annotations

import yaml
from hypothesis import given
from hypothesis import strategies as st

from infra.render.ansible_vars import _flat_yaml
from infra.render.k8s_manifests import manifest_yaml

TRICKY = ["yes", "on", "null", "~", "1.5", "010", "0x1F", "2024-01-01", "-r", "a: b", "#x", ""]
_values = st.one_of(st.integers(), st.sampled_from(TRICKY), st.text(max_size=30))


@given(st.dictionaries(st.from_regex(r"[a-z_]{1,12}", fullmatch=True), _values, max_size=8))
def test_host_vars_read_back(values: dict[str, object]) -> None:
    text = _flat_yaml(values)
    assert text.startswith("---\n")
    assert yaml.safe_load(text) == values


def test_host_vars_stay_plain_where_yaml_allows() -> None:
    text = _flat_yaml({"ansible_host": "10.0.0.2", "railplan_rack": "su01-r3", "slot": 2})
    assert text == "---\nansible_host: 10.0.0.2\nrailplan_rack: su01-r3\nslot: 2\n"


def test_long_lines_are_folded_and_read_back() -> None:
    long_line = "FIELD, gauge, " + " ".join(["word"] * 60)
    text = f"# comment\n{long_line}\n\n  indented\nlast\n"
    obj = {"data": {"short.sh": "echo hi\nexit 0\n", "long.csv": text}, "items": ["a", "b"]}
    dumped = manifest_yaml([obj])
    assert max(len(line) for line in dumped.splitlines()) <= 160
    assert "short.sh: |" in dumped and "long.csv: >" in dumped
    assert "items:\n  - a\n" in dumped  # sequences indented under their key
    assert yaml.safe_load(dumped) == obj
