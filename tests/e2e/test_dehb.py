#!/usr/bin/env python3
"""search: {algorithm: dehb} end to end, as test_bohb.py runs bohb: to the end in asha's rungs
when no scheduler is named (at concurrency 4) and in hyperband's brackets when named, a run
SIGKILLed at several points resumes into the same trials and decisions, and without a budget
or with a scheduler without rungs it is refused saying what it needs. Of its 24 trials the
first 9 seed the lowest budget's population at random (budget 1..9: N = 9), the other 15 are
DE's."""

import sys

sys.dont_write_bytecode = True  # keep tests/e2e free of __pycache__

import test_bohb  # the module, not its class: only DehbTest runs here
from helpers import main


class DehbTest(test_bohb.BohbTest):
    ALGO = "dehb"


if __name__ == "__main__":
    main()
