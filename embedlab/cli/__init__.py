"""The ``embedlab`` command line: one module per command group."""
