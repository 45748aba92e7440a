"""The field table (tritonsuite.judge.conformance.fields) is kept true: every field of Triton's ModelConfig protobuf
has a row, every row names a check that exists or says why none can show it, every check is named by a row, and
docs/conformance.md prints the same table."""
from __future__ import annotations

import re
from pathlib import Path

from tritonsuite.judge.conformance import CHECKS
from tritonsuite.judge.conformance.fields import FIELDS, SYSTEM, checklist, declared_fields, proto_fields

DOC = Path(__file__).resolve().parents[2] / "docs" / "conformance.md"


def test_every_field_of_the_proto_has_a_row_and_no_row_is_of_another_proto():
    assert sorted(proto_fields()) == sorted(FIELDS)


def test_every_row_names_an_existing_check_or_says_why_none_can():
    for field, (check, why) in FIELDS.items():
        assert why.strip(), field
        assert not check or check in CHECKS, f"{field}: check {check!r} is not one of {CHECKS}"


def test_every_check_is_named_by_a_field_row_or_a_system_row():
    named = {check for check, _ in FIELDS.values() if check} | set(SYSTEM)
    assert set(CHECKS) == named, f"checks without a row: {set(CHECKS) - named}; rows without a check: " \
                                 f"{named - set(CHECKS)}"


def test_the_docs_print_the_same_table():
    text = DOC.read_text()
    rows = dict(re.findall(r"^\| `([a-z_.0-9]+)` \| ([a-z_0-9]+|-) \|", text, re.M))
    assert rows == {f: check or "-" for f, (check, _) in FIELDS.items()}


def test_a_configuration_lists_the_fields_it_sets_and_not_the_keys_of_its_maps():
    config = {"name": "m", "max_batch_size": 8, "input": [{"name": "x", "dims": [4], "optional": True}],
              "dynamic_batching": {"default_queue_policy": {"max_queue_size": 4}},
              "parameters": {"intra_op_thread_count": {"string_value": "1"}}}
    assert declared_fields(config) == ["name", "max_batch_size", "input", "input.name", "input.dims",
                                       "input.optional", "dynamic_batching", "dynamic_batching.default_queue_policy",
                                       "dynamic_batching.default_queue_policy.max_queue_size", "parameters"]
    assert ("input.optional", "tensors", FIELDS["input.optional"][1]) in checklist(config)


def test_server_flags_reach_a_server_the_suite_starts_and_are_refused_for_a_remote_one():
    import pytest

    from tritonsuite.run.checks import OptionError, server_flags
    from tritonsuite.server import EmbeddedServer, RemoteServer

    assert server_flags(["rate-limit=execution_count", "--rate-limit-resource=R:2"], "embedded") == (
        "--rate-limit=execution_count", "--rate-limit-resource=R:2")
    with pytest.raises(OptionError, match="'rate-limit': expected NAME=VALUE"):
        server_flags(["rate-limit"], "embedded")
    with pytest.raises(OptionError, match="applies to --server embedded or container"):
        server_flags(["rate-limit=execution_count"], "remote")
    started = EmbeddedServer("/nonexistent", "/tmp", extra_args=("--rate-limit=execution_count",
                                                                 "--rate-limit-resource", "R:2"))
    assert started.started_with("--rate-limit") == ["execution_count"]
    assert started.started_with("--rate-limit-resource") == ["R:2"]
    assert EmbeddedServer("/nonexistent", "/tmp").started_with("--rate-limit") == []
    assert RemoteServer("127.0.0.1:1").started_with("--rate-limit") is None


def test_a_field_the_table_does_not_know_hides_none_after_it():
    config = {"name": "m", "a_field_of_a_newer_triton": {"max_batch_size": 4}, "max_batch_size": 8}
    assert declared_fields(config) == ["name", "max_batch_size"]
