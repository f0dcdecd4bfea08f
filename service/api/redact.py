"""Answers to anonymous callers say what is wrong, not where the server keeps its files.

A store error reads "cannot open /var/lib/gpucost/prices.sqlite: ..."; the path tells an
outsider the server's layout and user name, and the operator, who has the logs and the settings,
does not need it in the answer. Absolute paths become their last part (``prices.sqlite``).
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath

# An absolute POSIX path not inside a URL or a word ("https://x/y", "and/or", "1/2" stay).
_PATH = re.compile(r"(?<![\w.:/~-])(?:~)?/(?:[^\s'\"`,;()<>\[\]]+)")


# SQLite URLs carry the file's path after the scheme.
_SQLITE_URL = re.compile(r"\b(sqlite(?:\+\w+)?:///)(/?[^\s'\"`,;()<>]+)")


def without_paths(text: str) -> str:
    def last_part(match: re.Match[str]) -> str:
        name = PurePosixPath(match.group(0).rstrip(".:")).name
        trailing = match.group(0)[len(match.group(0).rstrip(".:")):]
        return (name or "/") + trailing

    text = _SQLITE_URL.sub(lambda m: m.group(1) + PurePosixPath(m.group(2)).name, text)
    return _PATH.sub(last_part, text)
