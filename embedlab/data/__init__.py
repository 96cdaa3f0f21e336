"""Data in: the shared evaluation datasets, WikiText-2, user files, and sentence splitting."""


class DataFormatError(ValueError):
    """A data file whose content does not have the expected format (the message names file and line).

    Defined here, at the bottom of the package, so that every reader (:mod:`embedlab.data.datasets`,
    :mod:`embedlab.data.wikitext`) raises the same error without importing one another.
    """
