"""The fuzzing campaign (issue 28, item 4): property tests of every parser of outside input
(run by ``make test``), and coverage-guided targets of the same parsers (``make fuzz``:
``python -m tests.fuzz --seconds N``). The rule every test and target checks: no input
crashes a process, hangs it, or changes state without a refusal in words."""
