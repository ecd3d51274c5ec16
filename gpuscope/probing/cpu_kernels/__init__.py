"""Compiled CPU kernels (numba, through :mod:`gpuscope.probing.jit`). Importing a module here
imports numba: import them inside the probe functions, after :func:`~gpuscope.probing.jit.load_numba`
said numba is usable."""
