"""One colour per framework, everywhere a chart shows it (HTML and PNG alike)."""

from __future__ import annotations

FRAMEWORK_COLOURS = {
    "torch": "#EE4C2C",  # PyTorch orange-red
    "tensorflow": "#2A7AB0",  # blue: PyTorch and TensorFlow are both orange by brand
    "jax": "#5E97F6",
    "keras-jax": "#5E97F6",  # JAX's blue-violet
    "keras-torch": "#F5A623",  # PyTorch's family, lighter
}
FALLBACK = ("#4C72B0", "#55A868", "#8172B2", "#64B5CD", "#CCB974")
# Modes of one framework share its colour and differ by pattern / dash.
MODE_DASH = {"eager": "solid", "graph": "dash", "xla": "dot", "script": "dashdot"}
MODE_PATTERN = {"eager": "", "graph": "/", "xla": ".", "script": "x"}


def colour(variant: str) -> str:
    framework = variant.split("/", 1)[0]
    if framework in FRAMEWORK_COLOURS:
        return FRAMEWORK_COLOURS[framework]
    return FALLBACK[sum(map(ord, framework)) % len(FALLBACK)]


def mode_of(variant: str) -> str:
    return variant.split("/", 1)[1] if "/" in variant else ""
