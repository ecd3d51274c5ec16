"""What an Xid number means and how loud gpuscope is about it. No NVML, no Textual.

Xid errors are the NVIDIA driver's error reports (NVIDIA's "Xid Errors" catalog). The table
holds the ones a GPU operator meets; any other Xid is reported with an empty meaning and the
``warning`` level (the driver reported a critical error, gpuscope does not know how bad).
"""

from __future__ import annotations

__all__ = ["XID_MEANINGS", "XID_LEVELS", "APPLICATION_XIDS", "xid_meaning", "xid_level"]

#: Xid -> what it means, in a few words.
XID_MEANINGS: dict[int, str] = {
    13: "graphics engine exception (application error)",
    31: "GPU memory page fault (application error)",
    43: "GPU stopped processing (application error)",
    45: "preemptive cleanup (application ended)",
    48: "double-bit ECC error",
    63: "row remapping pending (ECC page retirement recorded)",
    64: "row remapping failed",
    74: "NVLink error",
    79: "GPU has fallen off the bus",
    92: "high single-bit ECC error rate",
    94: "contained ECC error",
    95: "uncontained ECC error",
    119: "GSP RPC timeout",
    120: "GSP error",
}

#: Xids a user program causes (a bad kernel, a killed process): the GPU itself is fine.
APPLICATION_XIDS = frozenset({13, 31, 43, 45})

#: Xid -> alert level (``careful``, ``warning``, ``critical``); others are ``warning``.
XID_LEVELS: dict[int, str] = {
    **{xid: "careful" for xid in APPLICATION_XIDS},
    48: "critical",
    63: "warning",
    64: "warning",
    74: "warning",
    79: "critical",
    92: "warning",
    94: "warning",
    95: "critical",
    119: "critical",
    120: "critical",
}


def xid_meaning(xid: int) -> str:
    """What Xid ``xid`` means ("" when gpuscope does not know it)."""
    return XID_MEANINGS.get(xid, "")


def xid_level(xid: int) -> str:
    """The alert level of Xid ``xid`` (``warning`` for an Xid not in :data:`XID_LEVELS`)."""
    return XID_LEVELS.get(xid, "warning")
