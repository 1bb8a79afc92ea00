"""Hypothesis profiles for the fuzzing campaign.

* ``tether`` (the default, ``make test``): a modest number of examples per property, the
  same examples on every run (derandomized: a red ``make test`` is reproducible), no
  deadline (the machine is shared; no test here asserts on time), no example database
  (nothing is written to the checkout).
* ``tether-fuzz`` (``make fuzz`` without atheris, or ``TETHER_HYPOTHESIS_PROFILE=tether-fuzz``):
  many more examples, random ones, so each run explores new inputs.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

_QUIET = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much]

settings.register_profile("tether", max_examples=40, deadline=None, derandomize=True, database=None,
                          suppress_health_check=_QUIET, print_blob=True)
settings.register_profile("tether-fuzz", max_examples=20_000, deadline=None, database=None,
                          suppress_health_check=_QUIET, print_blob=True)
settings.load_profile(os.environ.get("TETHER_HYPOTHESIS_PROFILE", "tether"))
