"""Server logging: one handler on the root logger, as text or as one JSON object per line.

``gpucost serve --log-format json`` routes uvicorn's own loggers, the scheduler's and every
refresh outcome through it; each record carries the ``request_id`` of the request it was
written for (``-`` outside requests) and any ``extra`` fields its caller gave.
"""

from __future__ import annotations

import contextvars
import json
import logging
import logging.config
from datetime import UTC, datetime
from typing import Any, Literal

LogFormat = Literal["text", "json"]

request_id_var: contextvars.ContextVar[str] = contextvars.ContextVar("gpucost_request_id", default="-")

# Attributes every LogRecord has; anything else on a record came from ``extra=``.
_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime", "request_id", "color_message"}


class RequestIdFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        if not hasattr(record, "request_id"):
            record.request_id = request_id_var.get()
        return True


class JsonFormatter(logging.Formatter):
    """``{"ts", "level", "logger", "message", "request_id", ...extra}`` on one line."""

    def format(self, record: logging.LogRecord) -> str:
        doc: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
            "request_id": getattr(record, "request_id", "-"),
        }
        for key, value in vars(record).items():
            if key not in _STANDARD and not key.startswith("_") and key not in doc:
                doc[key] = value
        if record.exc_info:
            doc["exception"] = self.formatException(record.exc_info)
        return json.dumps(doc, default=str)


def logging_config(fmt: LogFormat = "text", level: str = "INFO") -> dict[str, Any]:
    """A ``dictConfig`` for the server (also handed to uvicorn as its ``log_config``)."""
    formatter: dict[str, Any] = (
        {"()": JsonFormatter}
        if fmt == "json"
        else {"format": "%(asctime)s %(levelname)s %(name)s [%(request_id)s] %(message)s"}
    )
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "filters": {"request_id": {"()": RequestIdFilter}},
        "formatters": {"default": formatter},
        "handlers": {
            "default": {
                "class": "logging.StreamHandler", "stream": "ext://sys.stderr",
                "formatter": "default", "filters": ["request_id"],
            }
        },
        "root": {"handlers": ["default"], "level": level},
        # uvicorn's loggers hand their records to the root handler instead of their own.
        "loggers": {
            name: {"handlers": [], "propagate": True, "level": level}
            for name in ("uvicorn", "uvicorn.error", "uvicorn.access", "apscheduler")
        } | {
            # Migrations announce every plugin at INFO; only their problems belong in a server log.
            "alembic": {"handlers": [], "propagate": True, "level": "WARNING"},
        },
    }


def configure_logging(fmt: LogFormat = "text", level: str = "INFO") -> None:
    logging.config.dictConfig(logging_config(fmt, level))
