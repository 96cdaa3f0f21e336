"""The evaluation harness: one :class:`~embedlab.evaluation.base.Task` interface, one module per evaluation
of the four papers.

Every task class declares its datasets, options, headline metric and metric descriptions
(:mod:`embedlab.evaluation.base`); :mod:`embedlab.evaluation.harness` lists them in ``TASKS`` and runs
them (:func:`~embedlab.evaluation.harness.evaluate`). Nothing is re-exported here, so importing one task
module (or the command line's argument parser) does not import every task's libraries.
"""
