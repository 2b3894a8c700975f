"""Where the tests' own files are, for tests in any folder under tests/:
the checkout, the C sources of the test programs (native/) and the
scripts tests run as processes (workers/)."""
import pathlib

TESTS = pathlib.Path(__file__).resolve().parent.parent
ROOT = TESTS.parent
NATIVE = TESTS / "native"
WORKERS = TESTS / "workers"
