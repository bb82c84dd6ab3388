"""Draws dashboard.json's panels from a Prometheus server, in Grafana's colours.

This is not Grafana and not a screenshot of it: matplotlib draws each panel's queries, as
Prometheus answers them, so that the picture can be made on a machine without Grafana.

    python3 render.py dashboard.json http://127.0.0.1:9090 START END out.png

Each panel's queries are sent as written to Prometheus' query_range API, with the dashboard's
variables set as Grafana sets them for this scrape interval: $__rate_interval = 4s (four 1 s
scrapes) and $lock = .* (All). Needs matplotlib.
"""

import json
import math
import re
import sys
import urllib.parse
import urllib.request
from datetime import datetime

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

VARIABLES = {"$__rate_interval": "4s", "$lock": ".*"}
COLORS = ["#73bf69", "#f2cc0c", "#8ab8ff", "#ff780a", "#f2495c", "#5794f2", "#b877d9", "#fade2a"]
UNITS = {"s": "seconds", "reqps": "per second", "short": "", "percentunit": "share (1 = all)"}


def query_range(base, expr, start, end):
    for name, value in VARIABLES.items():
        expr = expr.replace(name, value)
    params = urllib.parse.urlencode({"query": expr, "start": start, "end": end, "step": "1"})
    with urllib.request.urlopen(f"{base}/api/v1/query_range?{params}", timeout=30) as answer:
        body = json.load(answer)
    if body.get("status") != "success":
        raise RuntimeError(f"{expr}: {body}")
    return body["data"]["result"]


def legend(template, labels):
    return re.sub(r"\{\{\s*(\w+)\s*\}\}", lambda m: labels.get(m.group(1), ""), template).strip()


def main():
    dashboard_path, base, start, end, out = sys.argv[1:6]
    start, end = int(start), int(end)
    with open(dashboard_path, encoding="utf-8") as f:
        dashboard = json.load(f)
    panels = dashboard["panels"]
    columns = 3
    rows = math.ceil(len(panels) / columns)
    plt.rcParams.update({"font.size": 9, "font.family": "DejaVu Sans"})
    figure, axes = plt.subplots(rows, columns, figsize=(18, 4.2 * rows), facecolor="#111217")
    for ax, panel in zip(axes.flat, panels):
        ax.set_facecolor("#181b1f")
        for side in ax.spines.values():
            side.set_color("#2c3235")
        ax.tick_params(colors="#ccccdc")
        ax.grid(color="#2c3235", linewidth=0.6)
        ax.set_title(panel["title"], color="#ccccdc", loc="left", fontsize=11, fontweight="bold")
        unit = panel["fieldConfig"]["defaults"].get("unit", "")
        ax.set_ylabel(UNITS.get(unit, unit), color="#8e8e8e")
        n = 0
        for target in panel["targets"]:
            for series in query_range(base, target["expr"], start, end):
                points = [(int(t) - start, float(v)) for t, v in series["values"]]
                points = [(t, v) for t, v in points if not math.isnan(v)]
                if not points:
                    continue
                xs, ys = zip(*points)
                color = COLORS[n % len(COLORS)]
                ax.plot(xs, ys, color=color, linewidth=1.6,
                        label=legend(target.get("legendFormat", ""), series["metric"]))
                ax.fill_between(xs, ys, color=color, alpha=0.08)
                n += 1
        ax.set_xlim(0, end - start)
        ax.set_ylim(bottom=0)
        ax.set_xlabel("seconds", color="#8e8e8e")
        if n:
            ax.legend(loc="upper left", fontsize=8, facecolor="#181b1f", edgecolor="#2c3235",
                      labelcolor="#ccccdc")
        else:
            ax.text(0.5, 0.5, "No data (none happened)", color="#8e8e8e", ha="center",
                    va="center", transform=ax.transAxes)
    for ax in list(axes.flat)[len(panels):]:
        ax.set_visible(False)
    when = datetime.fromtimestamp(start).strftime("%Y-%m-%d %H:%M")
    figure.suptitle(
        f"{dashboard['title']} — dashboard.json's queries on Prometheus, axum_service under load.sh ({when}); "
        "drawn by render.py (matplotlib), not a Grafana screenshot",
        color="#ccccdc", fontsize=13, x=0.01, ha="left")
    figure.tight_layout(rect=(0, 0, 1, 0.97))
    figure.savefig(out, dpi=80, facecolor=figure.get_facecolor())


if __name__ == "__main__":
    main()
