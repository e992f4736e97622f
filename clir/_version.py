"""The version of clir: a leaf module, so that any layer can read it without importing the package face."""

__version__ = "0.1.0"
