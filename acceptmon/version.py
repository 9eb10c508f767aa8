"""The package's version (one place: ``acceptmon --version``, the exporter's build info, the package)."""

__version__ = "0.1.0"
