"""CLI commands, one module per resource; each exposes ``register(app)``."""
