"""ALIGN-SIM: five task-free semantic-alignment criteria for any embedding method.

Implements Mahajan et al., "ALIGN-SIM: A Task-Free Test Bed for Evaluating and Interpreting Sentence
Embeddings through Semantic Similarity Alignment" (shared/papers/align-sim-task-free-test-bed.md):
§4 (criteria), §5 (datasets, α/β adjustments), Appendix A.2 (sampling) and A.5 (NED, Eq. 2).

Modules: ``sources`` (dataset readers), ``lexicon`` (POS tagging, WordNet, inflection),
``perturb`` (perturbation sets), ``metrics`` (NED, α/β, ε margins), ``task`` (the criteria as a task
of the evaluation harness), and for a user's own texts (``alignsim:@FILE``) ``own_items`` (their items),
``negation`` (the negation check, from spaCy's parse) and ``own_task``. Tables and histograms:
``embedlab.results.alignsim_report``.
"""
