"""ASGI entry point for uvicorn and container images: ``service.api.asgi:app``."""

from service.api.app import create_app

app = create_app()
