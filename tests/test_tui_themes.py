"""Theme files and persisted settings (no app running)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuscope.resources import themes_dir
from gpuscope.tui import config
from gpuscope.tui.themes import DEFAULT_THEME, ThemeError, discover_themes, load_theme_file


def test_shipped_themes_load_and_cover_dark_light_high_contrast() -> None:
    themes, problems = discover_themes([themes_dir()])
    assert problems == []
    assert {"gpuscope-dark", "gpuscope-light", "gpuscope-high-contrast"} <= set(themes)
    assert DEFAULT_THEME == "gpuscope-dark"
    assert themes["gpuscope-dark"].theme.dark is True
    assert themes["gpuscope-light"].theme.dark is False
    contrast = themes["gpuscope-high-contrast"]
    assert contrast.theme.background == "#000000" and contrast.theme.foreground == "#FFFFFF"
    # Okabe-Ito colours only in the high-contrast chart palette
    okabe_ito = {"#E69F00", "#56B4E9", "#009E73", "#F0E442", "#0072B2", "#D55E00", "#CC79A7", "#FFFFFF", "#000000"}
    assert set(contrast.palette.series) <= okabe_ito


def test_palette_converts_to_roofline_palette() -> None:
    themes, _ = discover_themes([themes_dir()])
    palette = themes["gpuscope-light"].palette.roofline_palette()
    assert palette.highlight == (0xC2, 0x18, 0x5B)
    assert all(isinstance(c, tuple) and len(c) == 3 for c in palette.gpu_roofs)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("not toml [", "not valid TOML"),
        ('[theme]\nname = "x"\n', "missing required field `primary` - at `$.theme`"),
        ('[theme]\nname = "x"\nprimary = "blurple"\n', "[theme] primary: 'blurple' is not a colour"),
        ('[theme]\nname = "x"\nprimary = "#fff"\nsparkle = 1\n', "unknown field `sparkle` - at `$.theme`"),
        ('[theme]\nname = "../evil"\nprimary = "#fff"\n', "at `$.theme.name`"),
        (
            '[theme]\nname = "x"\nprimary = "#fff"\n[chart]\nseries = []\n',
            "expected `array` of length >= 1 - at `$.chart.series`",
        ),
        ('[theme]\nname = "x"\nprimary = "#fff"\n[chart]\npoint = 3\n', "got `int` - at `$.chart.point`"),
        ('[theme]\nname = "x"\nprimary = "#fff"\n[plugins]\ncode = "import os"\n', "unknown field `plugins`"),
        # class 7 of issue 16: themes that passed the old check and then broke the TUI
        (
            '[theme]\nname = "x"\nprimary = "#fff"\n[theme.variables]\n'
            'footer-key-foreground = "red } Screen { display: none"\n',
            "at `$.theme.variables[...]`",
        ),
        ('[theme]\nname = "x"\nprimary = "ansi_red"\n', "[theme] primary: 'ansi_red' is an ANSI colour name"),
        (
            '[theme]\nname = "x"\nprimary = "#fff"\n[chart]\npoint = "ansi_bright_blue"\n',
            "[chart] point: 'ansi_bright_blue' is an ANSI colour name",
        ),
        ('[theme]\nname = "x"\nprimary = "#fff"\ntext_alpha = nan\n', "at `$.theme.text_alpha`"),
    ],
)
def test_bad_theme_file_gives_one_line_naming_file_and_field(tmp_path: Path, text: str, expected: str) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(ThemeError) as info:
        load_theme_file(path)
    message = str(info.value)
    assert str(path) in message and expected in message and "\n" not in message


def test_user_theme_overrides_and_bad_files_are_reported(tmp_path: Path) -> None:
    user = tmp_path / "themes"
    user.mkdir()
    (user / "mine.toml").write_text(
        '[theme]\nname = "gpuscope-dark"\nprimary = "#123456"\n[chart]\npoint = "#abcdef"\n'
    )
    (user / "broken.toml").write_text("[theme\n")
    themes, problems = discover_themes([themes_dir(), user])
    assert themes["gpuscope-dark"].theme.primary == "#123456"
    assert themes["gpuscope-dark"].palette.point == "#ABCDEF"
    assert len(problems) == 1 and "broken.toml" in problems[0]


def test_a_theme_with_retired_datasheet_keys_still_loads_and_says_they_are_ignored(tmp_path: Path) -> None:
    # 0.1.0's shipped themes had gpu_datasheet / cpu_datasheet; a user's copy must keep working.
    path = tmp_path / "old.toml"
    path.write_text(
        '[theme]\nname = "old"\nprimary = "#123456"\n[chart]\ngpu_roofs = ["#00ff00"]\n'
        'gpu_datasheet = "#4f7a5a"\ncpu_datasheet = "#8a7350"\n'
    )
    loaded = load_theme_file(path)
    assert loaded.palette.gpu_roofs == ("#00FF00",)
    assert len(loaded.notes) == 2 and all(str(path) in note and "no longer used" in note for note in loaded.notes)
    assert "gpu_datasheet" in loaded.notes[0] and "cpu_datasheet" in loaded.notes[1]
    themes, problems = discover_themes([tmp_path])
    assert "old" in themes and problems == []


def test_config_dir_env_override_and_xdg(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("GPUSCOPE_CONFIG_DIR", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    assert config.config_dir() == tmp_path / "xdg" / "gpuscope"
    assert config.user_themes_dir() == tmp_path / "xdg" / "gpuscope" / "themes"
    monkeypatch.setenv("GPUSCOPE_CONFIG_DIR", str(tmp_path / "over"))
    assert config.config_path() == tmp_path / "over" / "config.toml"


def test_settings_round_trip_and_bad_file(tmp_path: Path) -> None:
    path = tmp_path / "c" / "config.toml"
    config.save_settings(config.Settings(theme="gpuscope-light", hidden_panels=["cpu"]), path)
    settings, problem = config.load_settings(path)
    assert problem is None and settings.theme == "gpuscope-light" and settings.hidden_panels == ["cpu"]
    path.write_text("theme = 5\n")
    settings, problem = config.load_settings(path)
    assert settings.theme is None and problem is not None and "theme" in problem
    path.write_text("= nope")
    settings, problem = config.load_settings(path)
    assert settings.theme is None and "not valid TOML" in (problem or "")
