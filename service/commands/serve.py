from __future__ import annotations

from typing import Annotated, Literal

import typer

from optimizer.errors import InvalidInput

SHUTDOWN_GRACE_S = 10


def register(app: typer.Typer) -> None:
    @app.command()
    def serve(
        host: Annotated[str, typer.Option(help="interface to bind")] = "127.0.0.1",
        port: Annotated[int, typer.Option(min=1, max=65535)] = 8000,
        workers: Annotated[int, typer.Option(min=1, max=64)] = 1,
        log_format: Annotated[
            str, typer.Option("--log-format", help="text, or json: one JSON object per line")
        ] = "text",
        log_level: Annotated[str, typer.Option("--log-level", help="debug, info, warning, error")] = "info",
    ) -> None:
        """Start the HTTP API."""
        import uvicorn

        from service.api.balance import shared_file
        from service.logs import logging_config
        from service.settings import get_settings

        if log_format not in ("text", "json"):
            raise InvalidInput("log_format", f"must be text or json (got {log_format!r})")
        if log_level.lower() not in ("debug", "info", "warning", "error"):
            raise InvalidInput("log_level", f"must be debug, info, warning or error (got {log_level!r})")
        fmt: Literal["text", "json"] = "json" if log_format == "json" else "text"
        settings = get_settings()
        if settings.refresh_cron:
            from service.scheduler import parse_cron

            parse_cron(settings.refresh_cron)  # fails here, naming GPUCOST_REFRESH_CRON, not in a worker
        # Several processes share their loads, so a busier one hands kept-alive connections on.
        with shared_file(workers if settings.serve_balance == "auto" else 1):
            uvicorn.run(
                "service.api.asgi:app", host=host, port=port, workers=workers,
                log_config=logging_config(fmt, log_level.upper()), log_level=log_level.lower(),
                # Our middleware logs each request with its id and duration; uvicorn's would repeat it.
                access_log=False,
                # On SIGTERM/SIGINT, requests still running get this long; then the app's lifespan
                # ends and stops the solve workers (service.api.lifetime), so none outlives the server.
                timeout_graceful_shutdown=SHUTDOWN_GRACE_S,
            )
