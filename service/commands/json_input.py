"""Reading a request file (or standard input) the way untrusted input must be read.

A request file may be anything: bytes that are not UTF-8, 100,000 nested brackets (a
``RecursionError`` in the decoder), a 5,000-digit number (CPython refuses to convert integers
over 4,300 digits) or a megabyte of garbage. Each is bad input: one line naming the flag and the
file, exit 2, never a traceback or exit 1.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from optimizer.errors import InvalidInput

# Request files are a few kB; a plan of 300 jobs with configs is well under this.
MAX_REQUEST_BYTES = 16_000_000
# Deeper than any request the schemas accept (an hf_config is at most 8 deep inside its workload).
MAX_NESTING = 64


def _nesting(text: str) -> int:
    """The deepest bracket nesting outside strings, counted without recursion."""
    depth = deepest = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > MAX_NESTING:
                    return deepest
        elif ch in "]}":
            depth -= 1
    return deepest


def read_json(path: Path | str, flag: str = "--request") -> Any:
    """The JSON document in ``path`` (``-`` reads standard input)."""
    name = "standard input" if str(path) == "-" else str(path)
    try:
        if str(path) == "-":
            data = sys.stdin.buffer.read(MAX_REQUEST_BYTES + 1)
        else:
            with Path(path).open("rb") as fh:
                data = fh.read(MAX_REQUEST_BYTES + 1)
    except OSError as exc:
        raise InvalidInput(flag, f"cannot read {name}: {exc.strerror or exc}") from None
    if len(data) > MAX_REQUEST_BYTES:
        raise InvalidInput(flag, f"{name} is over {MAX_REQUEST_BYTES:,} bytes")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InvalidInput(flag, f"{name} is not UTF-8 text (byte {exc.start}): is it a JSON file?") from None
    # Cheap to count, and it keeps the decoder out of a RecursionError.
    if _nesting(text) > MAX_NESTING:
        raise InvalidInput(flag, f"{name} is nested more than {MAX_NESTING} levels deep")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidInput(flag, f"{name} is not valid JSON: {exc.msg} at line {exc.lineno}") from None
    except (ValueError, RecursionError) as exc:
        if "digits" in str(exc):  # CPython's guard against quadratic int parsing
            raise InvalidInput(flag, f"{name} holds a number of over {sys.get_int_max_str_digits():,} digits") from None
        raise InvalidInput(flag, f"{name} holds a value that cannot be read: {str(exc)[:120]}") from None
