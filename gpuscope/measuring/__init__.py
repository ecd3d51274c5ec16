"""The roofline's torch half: ``gpuscope.measure`` times a user's callable, counts its FLOPs and
bytes (:mod:`.counting`), times it with the probe rules (:mod:`.timing`) and reads the DRAM bytes it
moved from GPM telemetry (:mod:`.dram`). The pure half (model, layout, painters, loading) is
:mod:`gpuscope.roofline`, which imports nothing from here. torch is imported only when a
measurement runs, never at import.
"""
