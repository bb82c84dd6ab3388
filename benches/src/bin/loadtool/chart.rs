//! The chart of a run: distlock against the baselines, as an SVG (plotters), ten panels.

use std::path::Path;

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::handoff::HandoffRun;
use crate::run::{
    BACKEND, DISTLOCK, DISTLOCK_TTL, HAND, RSLOCK, Run, UNFENCED, redlock_label,
    redlock_unfenced_label, rslock_label,
};
use crate::stats::Latency;

const WIDTH: u32 = 1200;
const HEIGHT: u32 = 1660;
/// Rows of two panels.
const ROWS: usize = 5;

const REDIS: RGBColor = RGBColor(120, 120, 120);
const HAND_COLOR: RGBColor = RGBColor(230, 126, 34);
const RSLOCK_COLOR: RGBColor = RGBColor(39, 160, 90);
const BACKEND_COLOR: RGBColor = RGBColor(120, 170, 220);
const DISTLOCK_COLOR: RGBColor = RGBColor(31, 90, 180);
const REDLOCK_COLOR: RGBColor = RGBColor(142, 68, 173);
const TARGET_COLOR: RGBColor = RGBColor(200, 30, 30);

/// One bar group: a client and its value in each series (`None`: not measured).
struct Group {
    label: String,
    color: RGBColor,
    values: Vec<Option<f64>>,
}

/// One panel: grouped bars, optionally a target line.
struct Panel {
    title: String,
    unit: &'static str,
    series: Vec<&'static str>,
    groups: Vec<Group>,
    target: Option<(f64, String)>,
    decimals: usize,
}

/// Writes the chart of `run` to `path`.
pub(crate) fn write(run: &Run, path: &Path) -> Result<(), String> {
    let root = SVGBackend::new(path, (WIDTH, HEIGHT)).into_drawing_area();
    draw(run, &root).map_err(|e| format!("drawing {}: {e}", path.display()))?;
    root.present()
        .map_err(|e| format!("writing {}: {e}", path.display()))
}

type Area<'a> = DrawingArea<SVGBackend<'a>, plotters::coord::Shift>;
type DrawResult =
    Result<(), DrawingAreaErrorKind<<SVGBackend<'static> as DrawingBackend>::ErrorType>>;

fn draw(run: &Run, root: &Area<'_>) -> Result<(), String> {
    fill(root).map_err(|e| e.to_string())?;
    let (head, rest) = root.split_vertically(64);
    let (body, foot) = rest.split_vertically(HEIGHT - 64 - 28);
    head.draw(&Text::new(
        "distlock against the bare-Redis baselines, in one run",
        (20, 12),
        ("sans-serif", 24).into_font().color(&BLACK),
    ))
    .map_err(|e| e.to_string())?;
    head.draw(&Text::new(
        format!(
            "loopback · redis {} · {} × {} · {} tokio runtime · {} run · grey: redis-benchmark, orange: hand-written redis-rs lock, green: rslock 0.10, blue: distlock, purple: distlock's Redlock",
            run.redis_version,
            run.machine.cpus,
            run.machine.cpu_model,
            run.plan.runtime.as_arg(),
            run.plan.mode,
        ),
        (20, 42),
        ("sans-serif", 13).into_font().color(&RGBColor(70, 70, 70)),
    ))
    .map_err(|e| e.to_string())?;
    foot.draw(&Text::new(
        "Regenerate: bash scripts/bench.sh  (= cargo run --release -p distlock-bench --bin loadtool)  ·  every figure: benches/results/run.json  ·  method: benches/README.md",
        (20, 6),
        ("sans-serif", 12).into_font().color(&RGBColor(90, 90, 90)),
    ))
    .map_err(|e| e.to_string())?;
    let areas = body.split_evenly((ROWS, 2));
    for (area, panel) in areas.iter().zip(panels(run)) {
        draw_panel(area, &panel).map_err(|e| e.to_string())?;
    }
    Ok(())
}

fn fill(root: &Area<'_>) -> DrawResult {
    root.fill(&WHITE)
}

fn panels(run: &Run) -> Vec<Panel> {
    let b = &run.baselines;
    let s1 = |client: &str| Run::cycle(&run.s1, client);
    let s2 = |client: &str| Run::cycle(&run.s2, client);
    let s4 = |label: String| Run::cycle(&run.s4, &label);
    let s3 = |client: &str| run.handoff(client);
    let group = |label: &str, color, values| Group {
        label: label.to_owned(),
        color,
        values,
    };
    let rate = |r: Option<&crate::cycles::CycleRun>| vec![r.map(|r| r.per_second)];
    let cpu = |r: Option<&crate::cycles::CycleRun>| {
        r.map_or(vec![None, None], |r| {
            vec![
                Some(r.cost.client_cpu_us_per_op),
                Some(r.cost.server_cpu_us_per_op),
            ]
        })
    };
    // S1's clients, in the order of the run, with a value of each.
    let s1_groups = |values: &dyn Fn(Option<&crate::cycles::CycleRun>) -> Vec<Option<f64>>| {
        vec![
            group("hand-written", HAND_COLOR, values(s1(HAND))),
            group("rslock", RSLOCK_COLOR, values(s1(RSLOCK))),
            group("backend only", BACKEND_COLOR, values(s1(BACKEND))),
            group("fixed ttl", DISTLOCK_COLOR, values(s1(DISTLOCK_TTL))),
            group("no fencing", DISTLOCK_COLOR, values(s1(UNFENCED))),
            group("distlock", DISTLOCK_COLOR, values(s1(DISTLOCK))),
        ]
    };
    let s4_groups = |values: &dyn Fn(Option<&crate::cycles::CycleRun>) -> Vec<Option<f64>>| {
        [3, 5]
            .into_iter()
            .flat_map(|n| {
                [
                    group(
                        &format!("rslock ×{n}"),
                        RSLOCK_COLOR,
                        values(s4(rslock_label(n))),
                    ),
                    group(
                        &format!("no fencing ×{n}"),
                        REDLOCK_COLOR,
                        values(s4(redlock_unfenced_label(n))),
                    ),
                    group(
                        &format!("Redlock ×{n}"),
                        REDLOCK_COLOR,
                        values(s4(redlock_label(n))),
                    ),
                ]
            })
            .collect()
    };
    let s3_groups = |values: &dyn Fn(&HandoffRun) -> Vec<f64>, series: usize| {
        [
            ("hand-written (1 ms poll)", HAND, HAND_COLOR),
            ("rslock (retry loop)", RSLOCK, RSLOCK_COLOR),
            ("no fencing", UNFENCED, DISTLOCK_COLOR),
            ("distlock", DISTLOCK, DISTLOCK_COLOR),
        ]
        .into_iter()
        .map(|(label, client, color)| {
            let v = s3(client).map_or(vec![None; series], |r| {
                values(r).into_iter().map(Some).collect()
            });
            group(label, color, v)
        })
        .collect()
    };
    let with_first = |first: Group, mut rest: Vec<Group>| {
        rest.insert(0, first);
        rest
    };
    vec![
        Panel {
            title: "S1 uncontended: acquire + release cycles/s".into(),
            unit: "cycles/s",
            series: vec!["cycles/s"],
            groups: with_first(
                group("RTT limit", REDIS, vec![b.round_trip_limit_per_s]),
                s1_groups(&rate),
            ),
            target: b
                .round_trip_limit_per_s
                .map(|l| (0.9 * l, "90 % of the RTT limit".to_owned())),
            decimals: 0,
        },
        Panel {
            title: "S1 latency per cycle, µs".into(),
            unit: "µs",
            series: vec!["p50", "p99"],
            groups: with_first(
                group("RTT limit", REDIS, vec![b.round_trip_limit_p50_us, None]),
                s1_groups(&latency),
            ),
            target: None,
            decimals: 0,
        },
        Panel {
            title: "S1 CPU per cycle, µs (client: the whole process)".into(),
            unit: "µs",
            series: vec!["client", "server"],
            groups: s1_groups(&cpu),
            target: None,
            decimals: 0,
        },
        Panel {
            title: format!("S2 {} tasks, own names: cycles/s", run.plan.s2_tasks),
            unit: "cycles/s",
            series: vec!["cycles/s"],
            groups: vec![
                group("pipelined ceiling", REDIS, vec![b.pipelined_ceiling_per_s]),
                group("hand-written", HAND_COLOR, rate(s2(HAND))),
                group("rslock", RSLOCK_COLOR, rate(s2(RSLOCK))),
                group("backend only", BACKEND_COLOR, rate(s2(BACKEND))),
                group("no fencing", DISTLOCK_COLOR, rate(s2(UNFENCED))),
                group("distlock", DISTLOCK_COLOR, rate(s2(DISTLOCK))),
            ],
            target: b
                .pipelined_ceiling_per_s
                .map(|c| (0.8 * c, "80 % of the pipelined ceiling".to_owned())),
            decimals: 0,
        },
        Panel {
            title: "S4 Redlock over 3 and 5 servers: cycles/s".into(),
            unit: "cycles/s",
            series: vec!["cycles/s"],
            groups: s4_groups(&rate),
            target: None,
            decimals: 0,
        },
        Panel {
            title: "S4 Redlock latency per cycle, µs".into(),
            unit: "µs",
            series: vec!["p50", "p99"],
            groups: s4_groups(&latency),
            target: s1(DISTLOCK).map(|r| {
                (
                    1.25 * r.latency.p50_us,
                    "1.25× S1 distlock p50 (Redlock ×5 target)".to_owned(),
                )
            }),
            decimals: 0,
        },
        Panel {
            title: format!(
                "S3 handoff gap from the release call, µs ({} workers, 1 ms hold)",
                run.plan.s3_workers
            ),
            unit: "µs",
            series: vec!["mean", "p99"],
            groups: s3_groups(&|r| mean_p99(&r.gap_from_call), 2),
            target: None,
            decimals: 0,
        },
        Panel {
            title: "S3 handoff gap from the release reply, µs".into(),
            unit: "µs",
            series: vec!["mean", "p99"],
            groups: s3_groups(&|r| mean_p99(&r.gap), 2),
            target: Some((250.0, "p99 target 250 µs (mean: 120)".to_owned())),
            decimals: 0,
        },
        Panel {
            title: "S3 server commands per acquisition".into(),
            unit: "commands",
            series: vec!["commands"],
            groups: s3_groups(&|r| vec![r.cost.commands_per_op], 1),
            target: Some((6.0, "target 6".to_owned())),
            decimals: 1,
        },
        Panel {
            title: "S3 self-handoff: grants won by the releaser, %".into(),
            unit: "%",
            series: vec!["self-handoff"],
            groups: s3_groups(&|r| vec![r.self_handoff * 100.0], 1),
            target: Some((20.0, "target 20 %".to_owned())),
            decimals: 1,
        },
    ]
}

fn mean_p99(l: &Latency) -> Vec<f64> {
    vec![l.mean_us, l.p99_us]
}

fn latency(run: Option<&crate::cycles::CycleRun>) -> Vec<Option<f64>> {
    run.map_or(vec![None, None], |r| {
        vec![Some(r.latency.p50_us), Some(r.latency.p99_us)]
    })
}

fn draw_panel(area: &Area<'_>, panel: &Panel) -> DrawResult {
    let n = panel.groups.len().max(1);
    let top = panel
        .groups
        .iter()
        .flat_map(|g| g.values.iter().flatten())
        .copied()
        .chain(panel.target.as_ref().map(|t| t.0))
        .fold(0.0_f64, f64::max);
    let y_max = if top > 0.0 { top * 1.2 } else { 1.0 };
    let x_range = -0.5..(n as f64 - 0.5);
    let labels: Vec<String> = panel.groups.iter().map(|g| g.label.clone()).collect();
    let title = match &panel.target {
        Some((_, label)) => format!("{} · red: {label}", panel.title),
        None => panel.title.clone(),
    };
    let mut chart = ChartBuilder::on(area)
        .caption(title, ("sans-serif", 13))
        .margin(12)
        .x_label_area_size(28)
        .y_label_area_size(64)
        .build_cartesian_2d(x_range, 0.0..y_max)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .max_light_lines(1)
        .x_labels(n)
        .x_label_formatter(&|x| {
            // Bar groups sit at 0, 1, 2, ...: label those positions, nothing in between.
            labels
                .iter()
                .enumerate()
                .find(|(i, _)| (*i as f64 - x).abs() < 1e-6)
                .map(|(_, label)| label.clone())
                .unwrap_or_default()
        })
        .y_desc(panel.unit)
        .y_label_formatter(&|y| compact(*y))
        .label_style(("sans-serif", 12))
        .draw()?;
    let k = panel.series.len().max(1);
    let width = 0.7 / k as f64;
    for (i, group) in panel.groups.iter().enumerate() {
        if group.values.iter().all(Option::is_none) {
            chart.draw_series(std::iter::once(Text::new(
                "not measured",
                (i as f64, 0.0),
                ("sans-serif", 11)
                    .into_font()
                    .color(&RGBColor(120, 120, 120))
                    .pos(Pos::new(HPos::Center, VPos::Bottom)),
            )))?;
        }
        for (s, value) in group.values.iter().enumerate() {
            let Some(v) = *value else { continue };
            let left = i as f64 - 0.35 + s as f64 * width;
            let style = if s == 0 {
                group.color.filled()
            } else {
                group.color.mix(0.45).filled()
            };
            chart.draw_series(std::iter::once(Rectangle::new(
                [(left, 0.0), (left + width * 0.92, v)],
                style,
            )))?;
            let text = if k > 1 {
                format!("{} {}", panel.series[s], fixed(v, panel.decimals))
            } else {
                fixed(v, panel.decimals)
            };
            chart.draw_series(std::iter::once(Text::new(
                text,
                (left + width * 0.46, v),
                ("sans-serif", 11)
                    .into_font()
                    .color(&BLACK)
                    .pos(Pos::new(HPos::Center, VPos::Bottom)),
            )))?;
        }
    }
    if let Some((value, _)) = &panel.target {
        chart.draw_series(std::iter::once(PathElement::new(
            vec![(-0.5, *value), (n as f64 - 0.5, *value)],
            TARGET_COLOR.stroke_width(1),
        )))?;
    }
    Ok(())
}

/// `12345.6` → `12.3k`; small numbers as they are.
fn compact(v: f64) -> String {
    if v >= 10_000.0 {
        format!("{:.0}k", v / 1000.0)
    } else if v >= 1000.0 {
        format!("{:.1}k", v / 1000.0)
    } else if v >= 10.0 || v == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

fn fixed(v: f64, decimals: usize) -> String {
    if decimals == 0 {
        compact(v)
    } else {
        format!("{v:.decimals$}")
    }
}
