"""Entry script of the PyInstaller bundle (packaging/scriba.spec): the same `scriba` command as the console script.

app.cli.main.main() calls multiprocessing.freeze_support() before anything else, so a "spawn" child started by the
queue worker re-enters here and is diverted to its work instead of parsing the command line.
"""

from app.cli.main import main

if __name__ == "__main__":
    raise SystemExit(main())
