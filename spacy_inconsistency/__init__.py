"""spaCy components that find where texts disagree.

Importing the package registers nothing: spaCy finds the factories and
registered functions through the entry points in `setup.cfg`.
"""
from .about import __version__
from .extensions import finding_spans

__all__ = ["__version__", "finding_spans"]
