from __future__ import annotations

from typing import Annotated

import typer


def register(app: typer.Typer) -> None:
    @app.command()
    def serve(
        host: Annotated[str, typer.Option(help="interface to bind")] = "127.0.0.1",
        port: Annotated[int, typer.Option(min=1, max=65535)] = 8000,
        workers: Annotated[int, typer.Option(min=1, max=64)] = 1,
    ) -> None:
        """Start the HTTP API."""
        import uvicorn

        uvicorn.run("service.api.asgi:app", host=host, port=port, workers=workers, log_level="info")
