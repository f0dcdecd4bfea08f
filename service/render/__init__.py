"""Presentation only: Markdown tables and charts for the decision answers."""
