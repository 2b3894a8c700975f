"""`python -m tfdarshan`: the same command as `tfdarshan`."""
import sys

from tfdarshan.cli import main

sys.exit(main())
