"""clir: cross-lingual information retrieval for low-resource languages."""

__version__ = "0.1.0"
