"""One colour per framework, everywhere a chart shows it (HTML and PNG alike), and one
line dash / bar pattern per mode of a framework. Colours come from the framework's
registry entry; a mode's look from its place in the framework's list of modes."""

from __future__ import annotations

from fwbench.catalog.frameworks import FRAMEWORKS

FALLBACK = ("#4C72B0", "#55A868", "#8172B2", "#64B5CD", "#CCB974")
DASHES = ("solid", "dash", "dot", "dashdot", "longdash", "longdashdot")
PATTERNS = ("", "/", ".", "x", "\\", "+")


def colour(variant: str) -> str:
    framework = variant.split("/", 1)[0]
    info = FRAMEWORKS.get(framework)
    if info is not None:
        return info.colour
    return FALLBACK[sum(map(ord, framework)) % len(FALLBACK)]


def _mode_index(variant: str) -> int:
    framework, _, rest = variant.partition("/")
    mode = rest.split("/", 1)[0]
    info = FRAMEWORKS.get(framework)
    if info is None or mode not in info.modes:
        return 0
    return info.modes.index(mode)


def dash(variant: str) -> str:
    """Plotly dash of the variant's mode (matplotlib maps the same names)."""
    return DASHES[_mode_index(variant) % len(DASHES)]


def pattern(variant: str) -> str:
    return PATTERNS[_mode_index(variant) % len(PATTERNS)]
