//! The cost curves as SVG (plotters, the house style of [`crate::chart`]): one file for the
//! held locks (C1), one for the waiters (C2); a panel per figure, a line per backend, both
//! axes logarithmic (a straight line of slope 1 is linear growth, a flat one O(1)).

use std::path::Path;

use plotters::prelude::*;

use crate::curve_plan::{CurveBackend, CurvesRun};
use crate::curve_report::{HeldFigures, short};

const WIDTH: u32 = 1200;
const PANEL_HEIGHT: u32 = 380;
const HEAD: u32 = 64;

/// One panel: a line per backend of `(scale, value)` points, a target line if any.
struct Panel {
    title: String,
    unit: &'static str,
    lines: Vec<(CurveBackend, Vec<(f64, f64)>)>,
    target: Option<f64>,
}

fn color(backend: CurveBackend) -> RGBColor {
    match backend {
        CurveBackend::Redis => RGBColor(200, 40, 40),
        CurveBackend::Valkey => RGBColor(230, 126, 34),
        CurveBackend::Postgres => RGBColor(31, 90, 180),
        CurveBackend::Etcd => RGBColor(39, 160, 90),
        CurveBackend::Mysql => RGBColor(142, 68, 173),
    }
}

/// Writes `curves-held.svg` and `curves-waiters.svg` into `dir` for the curves measured;
/// returns the files written.
pub(crate) fn write(run: &CurvesRun, dir: &Path, subtitle: &str) -> Result<Vec<String>, String> {
    let mut written = Vec::new();
    if !run.held.is_empty() {
        let held = |f: fn(&HeldFigures) -> f64| {
            run.held
                .iter()
                .map(|c| {
                    let pts = c.points.iter().map(HeldFigures::of);
                    (c.backend, pts.map(|p| (p.locks as f64, f(&p))).collect())
                })
                .collect::<Vec<_>>()
        };
        let panels = vec![
            Panel {
                title: "client CPU, % of one core, scaled to 30 s leases".into(),
                unit: "%",
                lines: held(|p| p.client_cpu_pct_30s),
                target: Some(5.0),
            },
            Panel {
                title: "client RSS while holding, MiB".into(),
                unit: "MiB",
                lines: held(|p| p.client_rss_mib),
                target: Some(256.0),
            },
            Panel {
                title: "server CPU, % of one core, scaled to 30 s leases".into(),
                unit: "%",
                lines: held(|p| p.server_cpu_pct_30s),
                target: None,
            },
            Panel {
                title: "server memory while holding, MiB (Redis/Valkey: used_memory; else Pss)"
                    .into(),
                unit: "MiB",
                lines: held(|p| p.server_mib),
                target: None,
            },
        ];
        let path = dir.join("curves-held.svg");
        draw(
            &path,
            "C1: renewed locks held, per backend (x: locks held; red dashes: Redis targets)",
            subtitle,
            &panels,
        )?;
        written.push(path.display().to_string());
    }
    if !run.waiters.is_empty() {
        let waiters = |f: fn(&crate::curve_waiters::WaitersPoint) -> f64| {
            run.waiters
                .iter()
                .map(|c| {
                    let pts = c.points.iter().map(|p| (p.waiters as f64, f(p))).collect();
                    (c.backend, pts)
                })
                .collect::<Vec<_>>()
        };
        let panels = vec![
            Panel {
                title: "store commands per release (Redis: commands; PostgreSQL: statements; etcd: messages)".into(),
                unit: "per release",
                lines: waiters(|p| p.commands_per_release),
                target: None,
            },
            Panel {
                title: "release call → next grant, p99, ms".into(),
                unit: "ms",
                lines: waiters(|p| p.gap.p99_us / 1000.0),
                target: Some(10.0),
            },
            Panel {
                title: "grant attempts per release (waiters woken that asked the store)".into(),
                unit: "per release",
                lines: waiters(|p| p.attempts_per_release),
                target: None,
            },
            Panel {
                title: "release call → next grant, p50, ms".into(),
                unit: "ms",
                lines: waiters(|p| p.gap.p50_us / 1000.0),
                target: None,
            },
            Panel {
                title: "client CPU per release, µs (the waiters' process; under 50 ms in all: left out)".into(),
                unit: "µs",
                lines: waiters(|p| p.resolved_client_cpu_us()),
                target: None,
            },
        ];
        let path = dir.join("curves-waiters.svg");
        draw(
            &path,
            "C2: waiters on one name (x: waiters; red dashes: the 10 ms p99 target)",
            subtitle,
            &panels,
        )?;
        written.push(path.display().to_string());
    }
    Ok(written)
}

fn draw(path: &Path, title: &str, subtitle: &str, panels: &[Panel]) -> Result<(), String> {
    let rows = panels.len().div_ceil(2);
    let height = HEAD + PANEL_HEIGHT * u32::try_from(rows).unwrap_or(1) + 28;
    let root = SVGBackend::new(path, (WIDTH, height)).into_drawing_area();
    let e = |e: &dyn std::fmt::Display| format!("drawing {}: {e}", path.display());
    root.fill(&WHITE).map_err(|x| e(&x))?;
    let (head, body) = root.split_vertically(HEAD);
    let (body, foot) = body.split_vertically(height - HEAD - 28);
    head.draw(&Text::new(
        title.to_owned(),
        (20, 12),
        ("sans-serif", 22).into_font().color(&BLACK),
    ))
    .map_err(|x| e(&x))?;
    head.draw(&Text::new(
        subtitle.to_owned(),
        (20, 42),
        ("sans-serif", 13).into_font().color(&RGBColor(70, 70, 70)),
    ))
    .map_err(|x| e(&x))?;
    foot.draw(&Text::new(
        "Regenerate: cargo run --release -p distlock-bench --bin loadtool -- --only c1,c2  ·  figures: run.json (curves)  ·  method: benches/README.md, Cost curves",
        (20, 6),
        ("sans-serif", 12).into_font().color(&RGBColor(90, 90, 90)),
    ))
    .map_err(|x| e(&x))?;
    for (area, panel) in body.split_evenly((rows, 2)).iter().zip(panels) {
        draw_panel(area, panel).map_err(|x| e(&x))?;
    }
    root.present().map_err(|x| e(&x))
}

type Area<'a> = DrawingArea<SVGBackend<'a>, plotters::coord::Shift>;
type DrawResult =
    Result<(), DrawingAreaErrorKind<<SVGBackend<'static> as DrawingBackend>::ErrorType>>;

fn draw_panel(area: &Area<'_>, panel: &Panel) -> DrawResult {
    let all = || panel.lines.iter().flat_map(|(_, pts)| pts.iter());
    let positive = |v: f64| v > 0.0 && v.is_finite();
    let xs = all().map(|p| p.0).filter(|v| positive(*v));
    let (x_lo, x_hi) = xs.fold((f64::MAX, 0.0_f64), |(lo, hi), x| (lo.min(x), hi.max(x)));
    let ys = all()
        .map(|p| p.1)
        .chain(panel.target)
        .filter(|v| positive(*v));
    let (y_lo, y_hi) = ys.fold((f64::MAX, 0.0_f64), |(lo, hi), y| (lo.min(y), hi.max(y)));
    if x_hi <= 0.0 || y_hi <= 0.0 {
        return Ok(());
    }
    let mut chart = ChartBuilder::on(area)
        .caption(&panel.title, ("sans-serif", 13))
        .margin(12)
        .x_label_area_size(28)
        .y_label_area_size(56)
        .build_cartesian_2d(
            (x_lo / 1.3..x_hi * 1.3).log_scale(),
            (y_lo / 2.0..y_hi * 2.0).log_scale(),
        )?;
    chart
        .configure_mesh()
        .max_light_lines(1)
        .x_label_formatter(&|x| short(x.round()))
        .y_label_formatter(&|y| compact(*y))
        .y_desc(panel.unit)
        .label_style(("sans-serif", 12))
        .draw()?;
    if let Some(t) = panel.target {
        // Dashes drawn as short paths (the crate is built without its series features).
        let (from, to) = ((x_lo / 1.3).ln(), (x_hi * 1.3).ln());
        let step = (to - from) / 60.0;
        chart.draw_series((0..60).step_by(2).map(|i| {
            let a = (from + step * f64::from(i)).exp();
            let b = (from + step * f64::from(i + 1)).exp();
            PathElement::new(vec![(a, t), (b, t)], RGBColor(200, 30, 30).stroke_width(1))
        }))?;
    }
    for (backend, pts) in &panel.lines {
        let pts: Vec<(f64, f64)> = pts
            .iter()
            .copied()
            .filter(|p| positive(p.0) && positive(p.1))
            .collect();
        let c = color(*backend);
        chart
            .draw_series(std::iter::once(PathElement::new(
                pts.clone(),
                c.stroke_width(2),
            )))?
            .label(backend.label())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], c.stroke_width(2)));
        chart.draw_series(pts.iter().map(|p| Circle::new(*p, 3, c.filled())))?;
        chart.draw_series(pts.iter().map(|p| {
            Text::new(
                compact(p.1),
                (p.0, p.1),
                ("sans-serif", 10).into_font().color(&c),
            )
        }))?;
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(RGBColor(200, 200, 200))
        .label_font(("sans-serif", 11))
        .position(SeriesLabelPosition::UpperLeft)
        .draw()?;
    Ok(())
}

/// `12345.6` → `12k`; `0.0123` → `0.012`.
fn compact(v: f64) -> String {
    if v >= 10_000.0 {
        format!("{:.0}k", v / 1000.0)
    } else if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 1.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}
