"""The output formats of everything the CLI prints as results (``--format``), in a module that imports
nothing, so that the command line's parser names them without loading the formatter (:mod:`embedlab.results.tables`)."""

FORMATS = ("table", "markdown", "json", "csv")
