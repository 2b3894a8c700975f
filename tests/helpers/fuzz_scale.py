"""How hard the fuzzed tests try: TFDARSHAN_FUZZ_SCALE=20 tries twenty
times as many examples, random ones (benchmarks/reliability.py); unset,
`make test` tries the same few on every run."""
import os

SCALE = max(1, int(os.environ.get("TFDARSHAN_FUZZ_SCALE", "1") or 1))
