"""The package version: a leaf every room may import (logs write it into Darshan logs)."""
__version__ = "0.1.0"
