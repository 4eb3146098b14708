"""Performance models, one module per device family. See ``base.PerfModel``."""
