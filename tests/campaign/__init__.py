"""The reliability campaign: crashes, provider faults and hostile input, in figures.

``python -m tests.campaign`` (``make campaign``) runs all three and prints a table for
each; ``tests/campaign/test_campaign.py``, ``tests/unit/test_faults.py`` and ``tests/processes/test_hostile.py``
run the same code (the crash part reduced) under ``make test``.
"""
