"""What every CLI command shares: reading requests, printing answers, mapping errors."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel, ValidationError

from optimizer.errors import InvalidInput
from optimizer.estimator.workload import Workload

if TYPE_CHECKING:
    from rich.console import Console

    from pricing.price_view import PriceView
    from pricing.store.repository import PriceStore
    from service.prepared import PreparedReader

    console: Console
    err_console: Console

M = TypeVar("M", bound=BaseModel)

# Piped or captured output gets a width that keeps the quote tables readable (rich's default is 80).
_WIDTH = None if sys.stdout.isatty() else 150


_CONSOLES: dict[str, Callable[[], Console]] = {
    "console": lambda: _console(width=_WIDTH),
    "err_console": lambda: _console(stderr=True),
}


def _console(**options: Any) -> Console:
    from rich.console import Console

    return Console(**options)


def __getattr__(name: str) -> Any:
    # ``console`` and ``err_console`` are made on first use: an answer printed as JSON (a quote's
    # command imports them where it draws a table) never loads rich.
    make = _CONSOLES.get(name)
    if make is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = made = make()
    return made


def invalid_from_validation(exc: ValidationError, prefix: str = "") -> InvalidInput:
    """The first pydantic error as an ``InvalidInput`` naming the field (dotted path)."""
    first = exc.errors()[0]
    loc = ".".join(str(p) for p in first.get("loc", ()) if p not in ("body",))
    field = ".".join(p for p in (prefix, loc) if p) or "request"
    return InvalidInput(field, str(first.get("msg", "invalid value")))


def parse_request(data: Any, model_cls: type[M], prefix: str = "") -> M:
    try:
        return model_cls.model_validate(data)
    except ValidationError as exc:
        raise invalid_from_validation(exc, prefix) from None


def read_json_file(path: Path, field: str = "--request") -> Any:
    """A JSON file (``-``: standard input); anything unreadable is an ``InvalidInput`` naming it."""
    from service.commands.json_input import read_json

    return read_json(path, field)


def load_request(path: Path, model_cls: type[M]) -> M:
    """Read a request file; a bare Workload is accepted where the request wraps one."""
    data = read_json_file(path)
    if (
        isinstance(data, dict)
        and "workload" not in data
        and "workload" in model_cls.model_fields
        and "model" in data
    ):
        data = {"workload": data}
    return parse_request(data, model_cls)


def build_workload(**fields: Any) -> Workload:
    """A Workload from CLI flags; flags left at None take the model's defaults."""
    return parse_request({k: v for k, v in fields.items() if v is not None}, Workload, "workload")


def dump(obj: BaseModel | dict[str, Any] | list[Any]) -> str:
    if isinstance(obj, BaseModel):
        return obj.model_dump_json()
    from fastapi.encoders import jsonable_encoder

    return json.dumps(jsonable_encoder(obj))


def emit(
    obj: BaseModel | dict[str, Any],
    as_json: bool,
    render_table: Callable[[Any], None] | None = None,
) -> None:
    """Exactly one JSON document on stdout with ``--json``; otherwise a human rendering."""
    if as_json or render_table is None:
        sys.stdout.write(dump(obj) + "\n")
        sys.stdout.flush()
        return
    render_table(obj)


def write_charts(draw: Callable[[str], bytes], png: Path | None, svg: Path | None) -> None:
    """Write ``draw(fmt)`` to the paths given for ``--png`` / ``--svg``."""
    for path, fmt in ((png, "png"), (svg, "svg")):
        if path is not None:
            try:
                path.write_bytes(draw(fmt))
            except OSError as exc:
                raise InvalidInput(f"--{fmt}", f"cannot write {path}: {exc.strerror or exc}") from None


def open_store_from_settings(view: PriceView | None = None) -> PriceStore:
    """The store the settings name, answering through their price view (``view``, if already read)."""
    from pricing.store.repository import open_store
    from service.settings import get_settings

    settings = get_settings()
    if view is None:
        view = settings.price_view()  # before opening: a bad price book is an error naming the file
    store = open_store(settings.db_url)
    store.price_view = view
    return store


def open_reader_from_settings() -> PriceStore | PreparedReader:
    """For commands that only read current prices (quote, frontier): the store's current snapshot
    as prepared on an earlier run (``service.prepared``), or the store opened the full way."""
    from service.prepared import open_reader
    from service.settings import get_settings

    settings = get_settings()
    view = settings.price_view()  # read once, for the prepared snapshot's id and the full store alike
    return open_reader(settings.db_url, view, lambda: open_store_from_settings(view))


def keep_prepared_snapshot(store: PriceStore | PreparedReader) -> None:
    """After answering: prepare the current snapshot for the next command, if it is not yet."""
    from service.prepared import keep_prepared
    from service.settings import get_settings

    keep_prepared(store, get_settings().db_url)


def parse_csv_list(value: str | None) -> list[str] | None:
    if value is None:
        return None
    items = [v.strip() for v in value.split(",") if v.strip()]
    return items or None


def output_mode(as_json: bool, markdown: bool) -> str:
    """``json``, ``markdown`` or ``table``; both output flags at once is a usage error."""
    if as_json and markdown:
        raise InvalidInput("--json", "give either --json or --markdown, not both")
    return "json" if as_json else ("markdown" if markdown else "table")
