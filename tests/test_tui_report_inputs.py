"""The TUI's report (key R) gets each results file as written: undeclared fields and explicit
nulls kept (the report's energy section tells "energy_j": null from an absent field)."""

from __future__ import annotations

import json
from pathlib import Path

from support.reports import make_results
from tui_samples import make_app

from gpuscope.results import read_results_file
from gpuscope.tui.report_hook import report_inputs


def test_report_inputs_are_the_files_as_written(tmp_path: Path) -> None:
    document = make_results()
    document["workloads"][0]["energy_j"] = None
    document["site_note"] = "rack 7"  # undeclared: the typed view drops it
    path = tmp_path / "results.json"
    path.write_text(json.dumps(document))
    typed, raw = read_results_file(path)
    app = make_app(persist_settings=False, probe_results=[(typed, raw)])
    (given,) = report_inputs(app)
    assert given == json.loads(raw)
    assert given["site_note"] == "rack 7" and given["workloads"][0]["energy_j"] is None
    bare = make_app(persist_settings=False, probe_results=[typed])  # no bytes: the typed view
    (built,) = report_inputs(bare)
    assert "site_note" not in built and built["workloads"][0]["name"] == document["workloads"][0]["name"]
