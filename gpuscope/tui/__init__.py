"""The interactive terminal UI (Textual). Only this package imports Textual.

Layout: :mod:`app` (the App, polling, modes), one module per screen in ``screens/``, widgets in
``widgets/``, CSS in ``styles/``, theme files in :mod:`themes`, persisted settings in
:mod:`config`, data sources (live, demo, replay) in :mod:`sources` (no Textual there).
"""
