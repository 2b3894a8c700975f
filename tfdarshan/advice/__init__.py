"""Advice: storage tiers and their probes, the cost model and staging
choice, the stager, per-file tables and the report renderers.

May import: tfdarshan.capture, tfdarshan.logs, tfdarshan.errors."""
