"""The `scriba` command, one module per command group; `app.cli.main` parses and dispatches."""
