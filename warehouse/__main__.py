"""``python -m warehouse`` runs the CLI."""

from warehouse.cli import run

run()
