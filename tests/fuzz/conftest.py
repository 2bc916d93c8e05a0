"""The fuzz suite: Hypothesis feeds the parsers users feed. Derandomized (the same examples every run, so CI
is stable) and bounded (few examples, no deadline: the machine may be busy); the whole suite takes well under
a minute on 2 cores. Every test's promise: a correct result or a one-line UserError-style error, never another
exception."""

from __future__ import annotations

from hypothesis import HealthCheck, settings

settings.register_profile("clearformer-fuzz", max_examples=60, deadline=None, derandomize=True, database=None,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                                 HealthCheck.data_too_large])
settings.load_profile("clearformer-fuzz")

