"""Where the tests and the checkout are, for tests that read files of the project."""

from pathlib import Path

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
