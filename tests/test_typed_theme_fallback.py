"""Issue 16 class 7: themes that passed the old check and then broke the TUI (a CSS variable holding
`}`; an ANSI colour name). Each gets one line, the default theme, and is never remembered."""

from __future__ import annotations

from pathlib import Path

import pytest
from tui_samples import make_app, run_async, tui_env, wait_for_sample  # noqa: F401

from gpuscope.tui import config

pytestmark = pytest.mark.slow

BAD_THEMES = {
    "css-brace": (
        '[theme]\nname = "evil"\nprimary = "#ffffff"\n'
        '[theme.variables]\nfooter-key-foreground = "red } Screen { display: none"\n',
        "$.theme.variables",
    ),
    "ansi-name": ('[theme]\nname = "evil"\nprimary = "ansi_red"\n', "is an ANSI colour name"),
}


@pytest.mark.parametrize("case", sorted(BAD_THEMES))
@run_async
async def test_bad_theme_falls_back_in_one_line_and_is_not_remembered(tui_env: Path, case: str) -> None:
    text, fragment = BAD_THEMES[case]
    themes = tui_env / "themes"
    themes.mkdir(parents=True)
    (themes / "evil.toml").write_text(text)
    app = make_app(theme="evil")
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for_sample(pilot, app)
        messages = [n.message for n in app._notifications]
        assert app.theme == "gpuscope-dark"
    problems = [m for m in messages if "evil.toml" in m]
    assert len(problems) == 1 and fragment in problems[0] and "\n" not in problems[0], messages
    assert any("No usable theme named 'evil'" in m for m in messages)
    assert config.load_settings()[0].theme is None
