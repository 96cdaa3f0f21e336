"""``python -m embedlab`` runs the command line."""

from embedlab.cli.app import run

if __name__ == "__main__":
    raise SystemExit(run())
