"""``gpuscope topo``: how the GPUs, CPUs, NUMA nodes and NICs of this node are wired, as
``nvidia-smi topo -m`` shows it (GPU x GPU and GPU x NIC, CPU and NUMA affinity), with each
link's expected and present rate; ``--json`` prints the topology record
(:class:`gpuscope.telemetry.topology.Topology`). ``--sysfs PATH`` reads NUMA nodes and NICs
under another sysfs root. Exit codes: 0 (also without GPUs: the host side is still shown),
2 for a bad option. Never imports Textual or torch.
"""

from __future__ import annotations

import argparse
import os
import shutil
from pathlib import Path

from gpuscope.errors import UsageError
from gpuscope.schema.core import encode_json
from gpuscope.telemetry.topology import Topology
from gpuscope.telemetry.topology_health import link_findings
from gpuscope.telemetry.topology_read import read_topology
from gpuscope.telemetry.topology_render import render_topology
from gpuscope.testing.scenarios import ENV_VAR, install_from_environment
from gpuscope.textsafe import safe_text

__all__ = ["run", "topology_for"]


def topology_for(sysfs: str) -> Topology:
    """The node's topology with ``sysfs`` as the sysfs root. Raises UsageError when it is not a folder."""
    if not Path(sysfs).is_dir():
        raise UsageError(f"--sysfs {safe_text(sysfs)}: not a folder (give the root of a sysfs tree, e.g. /sys)")
    scenario = install_from_environment()  # test hook: a no-op unless GPUSCOPE_FAKE_NVML is set
    simulated = f"{ENV_VAR}={os.environ.get(ENV_VAR)}" if scenario is not None else None
    return read_topology(sysfs, simulated=simulated)


def run(args: argparse.Namespace) -> int:
    """Print the topology; 0 when it was printed."""
    topology = topology_for(args.sysfs)
    if args.json:
        print(encode_json({"schema": "gpuscope.topology", "topology": topology}).decode())
        return 0
    width = max(40, shutil.get_terminal_size((80, 24)).columns)
    print(render_topology(topology, width=width, findings=link_findings(topology)))
    return 0
