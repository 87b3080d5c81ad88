"""PNG charts for the Markdown report (matplotlib, no display needed)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only: no display, no GUI toolkit
import matplotlib.pyplot as plt

from fwbench.report import figures, generation, scaling
from fwbench.report.style import colour, dash, pattern
from fwbench.result import Result
from fwbench.tasks import all_tasks

# Plotly's dash names in matplotlib's terms.
MATPLOTLIB_DASH = {
    "solid": "-",
    "dash": "--",
    "dot": ":",
    "dashdot": "-.",
    "longdash": (0, (10, 3)),
    "longdashdot": (0, (10, 3, 2, 3)),
}


def _relative(panels: list[figures.Panel], title: str, path: Path) -> None:
    fig, axes = plt.subplots(len(panels), 1, figsize=(9, 2.8 * len(panels)), squeeze=False)
    for ax, panel in zip(axes[:, 0], panels, strict=True):
        variants = list(panel.series)
        width = 0.8 / max(1, len(variants))
        for i, variant in enumerate(variants):
            by_x = {p.x: p for p in panel.series[variant]}
            for j, x in enumerate(panel.x):
                point = by_x.get(x)
                pos = j + (i - (len(variants) - 1) / 2) * width
                if point is None:
                    continue
                if point.value is None:
                    ax.text(
                        pos,
                        0.05,
                        point.status.upper(),
                        rotation=90,
                        ha="center",
                        va="bottom",
                        fontsize=8,
                        color=colour(variant),
                    )
                    ax.plot(pos, 0.02, marker="x", color=colour(variant))
                    continue
                ax.bar(
                    pos,
                    panel.shown(point),
                    width,
                    color=colour(variant),
                    hatch=pattern(variant) * 2,
                    label=variant if j == 0 else None,
                )
                if panel.cut(point) and panel.cap is not None:
                    # Cut at the axis' top (figures.RELATIVE_CAP): its value, written on it.
                    ax.text(
                        pos,
                        panel.cap * 0.97,
                        f"{point.value:.3g}x, cut",
                        rotation=90,
                        ha="center",
                        va="top",
                        fontsize=8,
                        bbox={"facecolor": "white", "edgecolor": "none", "pad": 1},
                    )
        if panel.cap is not None:
            ax.set_ylim(0, panel.cap * 1.04)
        ax.set_xticks(range(len(panel.x)), panel.x)
        ax.axhline(1.0, color="#999", linewidth=0.8)
        ax.set_title(panel.title)
        ax.set_ylabel("relative time")
        ax.legend(fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _curves(panels: list[figures.CurvePanel], title: str, y_label: str, path: Path) -> None:
    fig, axes = plt.subplots(len(panels), 1, figsize=(9, 2.8 * len(panels)), squeeze=False)
    for ax, panel in zip(axes[:, 0], panels, strict=True):
        for curve in panel.curves:
            ax.errorbar(
                curve.batch_sizes,
                curve.values,
                yerr=curve.error_bars() if curve.intervals else None,
                capsize=3,
                marker="o",
                color=colour(curve.variant),
                linestyle=MATPLOTLIB_DASH[dash(curve.variant)],
                label=curve.variant,
            )
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_title(panel.title)
        ax.set_xlabel("batch size")
        ax.set_ylabel(y_label)
        ax.legend(fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _scaling(panels: list[scaling.ScalingPanel], path: Path) -> None:
    fig, axes = plt.subplots(len(panels), 2, figsize=(10, 3 * len(panels)), squeeze=False)
    for (ax_tp, ax_eff), panel in zip(axes, panels, strict=True):
        for series in panel.series:
            ok = [p for p in series.points if p.throughput is not None]
            ax_tp.plot(
                [p.world_size for p in ok],
                [p.throughput for p in ok],
                marker="o",
                color=colour(series.variant),
                label=series.variant,
            )
            for p in series.points:
                if p.throughput is None:
                    ax_tp.plot(p.world_size, 0, marker="x", color=colour(series.variant))
                    ax_tp.annotate(p.status.upper(), (p.world_size, 0), fontsize=8)
            eff = [p for p in ok if p.efficiency is not None]
            ax_eff.errorbar(
                [p.world_size for p in eff],
                [p.efficiency for p in eff],
                yerr=scaling.error_bars(eff),
                marker="o",
                capsize=3,
                color=colour(series.variant),
                label=series.variant,
            )
        sizes = sorted({p.world_size for s in panel.series for p in s.points})
        ax_eff.axhline(1.0, color="#999", linewidth=0.8, linestyle=":")
        for ax, label in ((ax_tp, "samples/s"), (ax_eff, "efficiency t1/tN")):
            ax.set_xticks(sizes)
            ax.set_xlabel("workers")
            ax.set_ylabel(label)
            ax.set_ylim(bottom=0)
            ax.legend(fontsize=8)
        ax_tp.set_title(f"{panel.title}: throughput", fontsize=9)
        ax_eff.set_title(f"{panel.title}: efficiency", fontsize=9)
    fig.suptitle("Data-parallel scaling (per-replica batch fixed)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_charts(results: Sequence[Result], folder: Path) -> list[tuple[str, Path]]:
    """Write the charts into `folder`; return (caption, path) pairs."""
    folder.mkdir(parents=True, exist_ok=True)
    charts: list[tuple[str, Path]] = []
    for device in sorted({r.case.device for r in results}):
        for task in all_tasks().values():
            panels = figures.relative_time(results, task.name, device)
            if panels:
                # What the chart plots: a generation's is its time per output token.
                subject = figures.relative_subject(task)
                path = folder / f"relative-{task.name}-{device}.png"
                _relative(panels, f"Relative {subject} on {device} (fastest = 1.0)", path)
                cut = any(p.cap is not None for p in panels)
                said = f" (axis cut at {figures.RELATIVE_CAP:g}x, values written)" if cut else ""
                said += "".join(f"; {note}" for note in figures.panel_notes(panels))
                charts.append((f"Relative {subject}, {device}{said}", path))
    scaled = scaling.scaling(results)
    if scaled:
        path = folder / "scaling.png"
        _scaling(scaled, path)
        charts.append(("Data-parallel scaling: throughput and efficiency vs workers", path))
    per_sample = figures.per_sample_time(results)
    if per_sample:
        path = folder / "per-sample.png"
        _curves(per_sample, "Inference time per sample", "seconds per sample", path)
        charts.append(("Inference time per sample vs batch size", path))
    for figure, title, caption, curves in generation.charts(results):
        path = folder / f"generation-{figure.removesuffix('_s')}.png"
        _curves(curves, title, "ms", path)
        charts.append((caption, path))
    return charts
