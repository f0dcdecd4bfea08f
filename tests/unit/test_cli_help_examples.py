"""The examples at the end of each command's help fit its 80 columns and still paste as one command."""

from __future__ import annotations

import pytest

from service.cli_help import _HELP_WIDTH, EXAMPLES, _wrapped


@pytest.mark.parametrize("example", [e for lines in EXAMPLES.values() for e in lines])
def test_a_wrapped_example_fits_and_joins_back_to_the_command(example: str) -> None:
    lines = _wrapped(example)
    # As click prints them: the epilog indented by 2, each example line by 2 more.
    assert all(len("    " + line) <= _HELP_WIDTH for line in lines), lines
    assert all(line.endswith(" \\") for line in lines[:-1]) and not lines[-1].endswith("\\")
    # What a shell reads: continuations removed, the words of the example in order.
    assert " ".join(line.removesuffix(" \\").strip() for line in lines) == " ".join(example.split())


def test_a_long_example_breaks_before_a_flag_never_between_a_flag_and_its_value() -> None:
    lines = _wrapped("gpucost quote --model llama-3-8b --method qlora --tokens 1e8 --deadline-hours 24")
    assert lines == ["gpucost quote --model llama-3-8b --method qlora --tokens 1e8 \\", "    --deadline-hours 24"]
    assert _wrapped("cat job.json | gpucost quote --request - --json") == [
        "cat job.json | gpucost quote --request - --json"]
