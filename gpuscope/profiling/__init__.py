"""Where a model's time goes: every aten op and nn.Module of a step on the roofline, ranked by the
time it loses to its roof, with the step's energy.

``gpuscope.profile`` (:func:`gpuscope.profiling.api.profile`) is the entry point; nothing here imports torch
until a profile runs.
"""
