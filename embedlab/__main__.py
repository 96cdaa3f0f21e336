"""``python -m embedlab`` runs the command line."""

from embedlab.cli.app import main

if __name__ == "__main__":
    raise SystemExit(main())
