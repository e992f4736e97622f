"""The version of clir: a leaf module, so that any layer can read it without importing the package face."""

__version__ = "0.1.0"

DISTRIBUTION = "clir-lowres"
"""The name clir is installed by (``pip install 'clir-lowres[data]'``): ``clir`` on PyPI is an
unrelated command-history tool. The import package and the command stay ``clir``."""
