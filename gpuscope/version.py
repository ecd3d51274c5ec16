"""gpuscope's version: a leaf module, so that writers stamping files need not import the package's
public API (``gpuscope/__init__``, which names ``measure`` and ``profile``)."""

__version__ = "0.1.0"
