//! `ringmq-bench plot`: PNG charts of a side-by-side run, from the JSON lines that
//! `scripts/bench-peer.sh` collects (one object per run: `workload`, `system`, `repeat`, the
//! ringmq-bench summary fields, `failure` when the run failed, `discarded` when the script ran
//! the pair again because the host was too loaded).
//!
//! Owns the reduction of those lines to medians per (workload, system), the same reduction as the
//! script's markdown table (failed and discarded runs left out, the median of an even count is
//! the mean of the middle two), and two charts: throughput per workload (grouped bars, one per
//! system, log scale when the values span more than a decade and a half) and a grid of latency
//! panels, one per workload, with p50/p90/p99/p99.9 for every system on a log scale.
//!
//! Text goes through plotters' ab_glyph backend, which needs a font registered at run time; it is
//! read from a system path (DejaVu Sans by default), never compiled in, and a missing font is an
//! error naming the path and the Debian package that provides it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use plotters::style::{register_font, FontStyle};
use serde::Deserialize;

/// The font read when no `--font` is given (Debian/Ubuntu package fonts-dejavu-core).
pub const DEFAULT_FONT: &str = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf";

/// One colour per system, in the order systems first appear (ringmq first in the script's runs).
const SYSTEM_COLOURS: [RGBColor; 4] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
];
/// Above this max/min ratio the throughput axis becomes logarithmic.
const LOG_SCALE_RATIO: f64 = 30.0;
/// Latency panels per grid row.
const PANELS_PER_ROW: usize = 5;

#[derive(Debug, thiserror::Error)]
pub enum PlotError {
    #[error("reading {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} line {line}: {source}")]
    Json {
        path: PathBuf,
        line: usize,
        source: serde_json::Error,
    },
    #[error("{0}: no run with a workload and a system")]
    Empty(PathBuf),
    #[error(
        "font {path} cannot be read ({source}); install it (apt-get install fonts-dejavu-core) \
         or pass --font PATH to a TrueType font"
    )]
    FontMissing {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("font {0} is not a TrueType/OpenType font")]
    FontInvalid(PathBuf),
    #[error("creating {path}: {source}")]
    OutDir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("drawing {path}: {message}")]
    Draw { path: PathBuf, message: String },
}

/// The fields of one run this module reads; everything else in the line is ignored.
#[derive(Deserialize)]
struct RunLine {
    workload: Option<String>,
    system: Option<String>,
    throughput_msgs: Option<f64>,
    latency_us: Option<LatencyLine>,
    failure: Option<String>,
    /// Set by `scripts/bench-peer.sh` (MAX_STEAL) on runs it replaced: in no median.
    discarded: Option<String>,
}

#[derive(Deserialize)]
struct LatencyLine {
    p50: f64,
    p90: f64,
    p99: f64,
    p999: f64,
    /// Zero when the workload has no per-request latency (C4's push consumer).
    samples: Option<u64>,
}

/// Medians of the successful runs of one (workload, system).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Cell {
    pub runs: usize,
    pub failed: usize,
    pub throughput_msgs: Option<f64>,
    /// p50, p90, p99, p99.9 in µs.
    pub latency_us: Option<[f64; 4]>,
}

/// The raw values of one (workload, system) before the medians.
#[derive(Default)]
struct Samples {
    throughput: Vec<f64>,
    latency: [Vec<f64>; 4],
    runs: usize,
    failed: usize,
}

/// A whole file reduced: workloads and systems in order of first appearance.
#[derive(Debug, Default)]
pub struct Series {
    pub workloads: Vec<String>,
    pub systems: Vec<String>,
    pub cells: BTreeMap<(String, String), Cell>,
}

impl Series {
    pub fn cell(&self, workload: &str, system: &str) -> Option<&Cell> {
        self.cells.get(&(workload.to_owned(), system.to_owned()))
    }

    /// Most runs behind any cell (the chart captions say "median of n").
    fn runs_max(&self) -> usize {
        self.cells.values().map(|c| c.runs).max().unwrap_or(0)
    }
}

/// Median as Python's `statistics.median` computes it (the script's table uses that).
pub fn median(values: &mut [f64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    let n = values.len();
    Some(if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    })
}

/// Reduces JSONL text to medians per (workload, system). Blank lines are skipped; a line that is
/// not a JSON object is an error naming its number.
pub fn parse_series(text: &str, path: &Path) -> Result<Series, PlotError> {
    let mut series = Series::default();
    let mut samples: BTreeMap<(String, String), Samples> = BTreeMap::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let run: RunLine = serde_json::from_str(line).map_err(|source| PlotError::Json {
            path: path.to_owned(),
            line: i + 1,
            source,
        })?;
        if run.discarded.is_some() {
            continue;
        }
        let (Some(w), Some(s)) = (run.workload, run.system) else {
            continue;
        };
        if !series.workloads.contains(&w) {
            series.workloads.push(w.clone());
        }
        if !series.systems.contains(&s) {
            series.systems.push(s.clone());
        }
        let entry = samples.entry((w, s)).or_default();
        entry.runs += 1;
        if run.failure.is_some() {
            entry.failed += 1;
            continue;
        }
        if let Some(t) = run.throughput_msgs {
            entry.throughput.push(t);
        }
        if let Some(l) = run.latency_us.filter(|l| l.samples != Some(0)) {
            for (k, v) in [l.p50, l.p90, l.p99, l.p999].into_iter().enumerate() {
                entry.latency[k].push(v);
            }
        }
    }
    if series.workloads.is_empty() {
        return Err(PlotError::Empty(path.to_owned()));
    }
    for (key, mut raw) in samples {
        let latency_us = if raw.latency[0].is_empty() {
            None
        } else {
            let mut m = [0.0; 4];
            for (k, v) in raw.latency.iter_mut().enumerate() {
                m[k] = median(v).unwrap_or(0.0);
            }
            Some(m)
        };
        let cell = Cell {
            runs: raw.runs,
            failed: raw.failed,
            throughput_msgs: median(&mut raw.throughput),
            latency_us,
        };
        series.cells.insert(key, cell);
    }
    Ok(series)
}

/// Reads the font at `path` and registers it as plotters' "sans-serif".
pub fn load_font(path: &Path) -> Result<(), PlotError> {
    let bytes = std::fs::read(path).map_err(|source| PlotError::FontMissing {
        path: path.to_owned(),
        source,
    })?;
    // plotters keeps registered fonts for the life of the process and wants `&'static`; this is
    // a short-lived CLI that registers one font once, so leaking it is the simple, bounded way.
    let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
    register_font("sans-serif", FontStyle::Normal, bytes)
        .map_err(|_| PlotError::FontInvalid(path.to_owned()))
}

/// Writes `<prefix>-throughput.png` and `<prefix>-latency.png` into `out_dir`; returns the paths.
pub fn plot_file(
    input: &Path,
    out_dir: &Path,
    prefix: Option<&str>,
    font: &Path,
) -> Result<Vec<PathBuf>, PlotError> {
    let text = std::fs::read_to_string(input).map_err(|source| PlotError::Read {
        path: input.to_owned(),
        source,
    })?;
    let series = parse_series(&text, input)?;
    load_font(font)?;
    std::fs::create_dir_all(out_dir).map_err(|source| PlotError::OutDir {
        path: out_dir.to_owned(),
        source,
    })?;
    let prefix = prefix.map(str::to_owned).unwrap_or_else(|| {
        input
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| "bench".to_owned())
    });
    let source = input
        .file_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tp = out_dir.join(format!("{prefix}-throughput.png"));
    draw_throughput(&series, &source, &tp).map_err(|message| PlotError::Draw {
        path: tp.clone(),
        message,
    })?;
    let lat = out_dir.join(format!("{prefix}-latency.png"));
    draw_latency(&series, &source, &lat).map_err(|message| PlotError::Draw {
        path: lat.clone(),
        message,
    })?;
    Ok(vec![tp, lat])
}

fn colour(i: usize) -> RGBColor {
    SYSTEM_COLOURS[i % SYSTEM_COLOURS.len()]
}

/// `v` with one decimal, without a trailing ".0" ("1.5", "10").
fn one_decimal(v: f64) -> String {
    let s = format!("{v:.1}");
    s.strip_suffix(".0").map(str::to_owned).unwrap_or(s)
}

/// "12k", "1.2M", "4.4k", "850": bar labels and axis ticks.
fn short_count(v: f64) -> String {
    if v >= 1e6 {
        format!("{}M", one_decimal(v / 1e6))
    } else if v >= 1e4 {
        format!("{:.0}k", v / 1e3)
    } else if v >= 1e3 {
        format!("{}k", one_decimal(v / 1e3))
    } else {
        format!("{v:.0}")
    }
}

/// Microseconds as "250 µs", "1.5 ms", "12 ms", "2.4 s".
fn short_us(v: f64) -> String {
    let (x, unit) = if v >= 1e6 {
        (v / 1e6, "s")
    } else if v >= 1e3 {
        (v / 1e3, "ms")
    } else {
        (v, "µs")
    };
    if x >= 10.0 {
        format!("{x:.0} {unit}")
    } else {
        format!("{} {unit}", one_decimal(x))
    }
}

fn draw_err<E: std::fmt::Debug>(e: E) -> String {
    format!("{e:?}")
}

/// Bar geometry for `groups` groups of `bars` bars on an x axis of 0..groups: group g spans
/// [g, g + 1); bar b of it gets an equal share of the middle 80 %.
fn bar_span(group: usize, bar: usize, bars: usize) -> (f64, f64) {
    let width = 0.8 / bars.max(1) as f64;
    let x0 = group as f64 + 0.1 + width * bar as f64;
    (x0 + width * 0.06, x0 + width * 0.94)
}

fn draw_throughput(series: &Series, source: &str, path: &Path) -> Result<(), String> {
    let width = (180 + 130 * series.workloads.len() as u32).max(640);
    let root = BitMapBackend::new(path, (width, 540)).into_drawing_area();
    root.fill(&WHITE).map_err(draw_err)?;
    let values: Vec<f64> = series
        .cells
        .values()
        .filter_map(|c| c.throughput_msgs)
        .filter(|v| *v > 0.0)
        .collect();
    let max = values.iter().copied().fold(1.0, f64::max);
    let min = values.iter().copied().fold(max, f64::min);
    let log = max / min > LOG_SCALE_RATIO;
    let caption = format!(
        "Throughput (msg/s{}), median of {} runs; {source}",
        if log { ", log scale" } else { "" },
        series.runs_max()
    );
    let groups = series.workloads.len();
    let mut chart = ChartBuilder::on(&root);
    chart
        .caption(caption, ("sans-serif", 20))
        .margin(12)
        .margin_bottom(60)
        .x_label_area_size(10)
        .y_label_area_size(70);
    if log {
        let mut c = chart
            .build_cartesian_2d(0.0..groups as f64, (min / 2.0..max * 3.0).log_scale())
            .map_err(draw_err)?;
        c.configure_mesh()
            .disable_x_mesh()
            .x_labels(0)
            .y_desc("msg/s")
            .y_label_formatter(&|v| short_count(*v))
            .draw()
            .map_err(draw_err)?;
        throughput_bars(&mut c, &root, series, min / 2.0)?;
    } else {
        let mut c = chart
            .build_cartesian_2d(0.0..groups as f64, 0.0..max * 1.15)
            .map_err(draw_err)?;
        c.configure_mesh()
            .disable_x_mesh()
            .x_labels(0)
            .y_desc("msg/s")
            .y_label_formatter(&|v| short_count(*v))
            .draw()
            .map_err(draw_err)?;
        throughput_bars(&mut c, &root, series, 0.0)?;
    }
    root.present().map_err(draw_err)
}

/// Draws one bar series per system with its value on top, the workload names under the axis
/// and the legend. `floor` is the bottom of the y axis (bars start there).
fn throughput_bars<'a, Y>(
    chart: &mut ChartContext<
        'a,
        BitMapBackend<'a>,
        Cartesian2d<plotters::coord::types::RangedCoordf64, Y>,
    >,
    root: &DrawingArea<BitMapBackend<'a>, Shift>,
    series: &Series,
    floor: f64,
) -> Result<(), String>
where
    Y: Ranged<ValueType = f64>,
{
    let bars = series.systems.len();
    for (si, sys) in series.systems.iter().enumerate() {
        let c = colour(si);
        let rects: Vec<_> = series
            .workloads
            .iter()
            .enumerate()
            .filter_map(|(g, w)| {
                let v = series.cell(w, sys)?.throughput_msgs?;
                let (x0, x1) = bar_span(g, si, bars);
                Some(Rectangle::new(
                    [(x0, floor), (x1, v.max(floor))],
                    c.filled(),
                ))
            })
            .collect();
        chart.draw_series(rects).map_err(draw_err)?;
        let labels: Vec<_> = series
            .workloads
            .iter()
            .enumerate()
            .filter_map(|(g, w)| {
                let v = series.cell(w, sys)?.throughput_msgs?;
                let (x0, x1) = bar_span(g, si, bars);
                let style = ("sans-serif", 12)
                    .into_font()
                    .color(&BLACK)
                    .pos(Pos::new(HPos::Center, VPos::Bottom));
                Some(Text::new(short_count(v), ((x0 + x1) / 2.0, v), style))
            })
            .collect();
        chart.draw_series(labels).map_err(draw_err)?;
    }
    group_names(chart, root, &series.workloads, floor, 16)?;
    // Under the workload names: the caption row may be full on a narrow chart.
    legend(root, series, root.dim_in_pixel().1 as i32 - 16)
}

/// Writes `names[g]` centred under group g, in root (pixel) coordinates below the x axis.
fn group_names<'a, Y>(
    chart: &ChartContext<
        'a,
        BitMapBackend<'a>,
        Cartesian2d<plotters::coord::types::RangedCoordf64, Y>,
    >,
    root: &DrawingArea<BitMapBackend<'a>, Shift>,
    names: &[String],
    floor: f64,
    size: u32,
) -> Result<(), String>
where
    Y: Ranged<ValueType = f64>,
{
    for (g, name) in names.iter().enumerate() {
        let (px, py) = chart.backend_coord(&(g as f64 + 0.5, floor));
        let style = ("sans-serif", size)
            .into_font()
            .color(&BLACK)
            .pos(Pos::new(HPos::Center, VPos::Top));
        root.draw(&Text::new(name.as_str(), (px, py + 6), style))
            .map_err(draw_err)?;
    }
    Ok(())
}

fn draw_latency(series: &Series, source: &str, path: &Path) -> Result<(), String> {
    let n = series.workloads.len();
    let cols = n.min(PANELS_PER_ROW);
    let rows = n.div_ceil(cols);
    let (pw, ph) = (340u32, 320u32);
    let root =
        BitMapBackend::new(path, (pw * cols as u32, ph * rows as u32 + 50)).into_drawing_area();
    root.fill(&WHITE).map_err(draw_err)?;
    let caption = format!(
        "Latency percentiles (log scale), median of {} runs; {source}",
        series.runs_max()
    );
    let body = root
        .titled(&caption, ("sans-serif", 20))
        .map_err(draw_err)?;
    legend(&root, series, 18)?;
    let panels = body.split_evenly((rows, cols));
    for (w, area) in series.workloads.iter().zip(panels.iter()) {
        latency_panel(series, w, area, &root)?;
    }
    root.present().map_err(draw_err)
}

/// One legend per image, right-aligned on the pixel row `y` (outside every plot: a legend inside
/// a plot hides bars).
fn legend(
    root: &DrawingArea<BitMapBackend<'_>, Shift>,
    series: &Series,
    y: i32,
) -> Result<(), String> {
    let font = ("sans-serif", 16).into_font();
    let mut x = root.dim_in_pixel().0 as i32 - 24;
    for (si, sys) in series.systems.iter().enumerate().rev() {
        let style = font
            .clone()
            .color(&BLACK)
            .pos(Pos::new(HPos::Right, VPos::Center));
        root.draw(&Text::new(sys.as_str(), (x, y), style))
            .map_err(draw_err)?;
        let text_w = root
            .estimate_text_size(sys, &font.clone().into_text_style(root))
            .map_err(draw_err)?
            .0 as i32;
        x -= text_w + 8;
        root.draw(&Rectangle::new(
            [(x - 14, y - 7), (x, y + 7)],
            colour(si).filled(),
        ))
        .map_err(draw_err)?;
        x -= 30;
    }
    Ok(())
}

const PERCENTILES: [&str; 4] = ["p50", "p90", "p99", "p99.9"];

fn latency_panel<'a>(
    series: &Series,
    workload: &str,
    area: &DrawingArea<BitMapBackend<'a>, Shift>,
    root: &DrawingArea<BitMapBackend<'a>, Shift>,
) -> Result<(), String> {
    let values: Vec<f64> = series
        .systems
        .iter()
        .filter_map(|s| series.cell(workload, s)?.latency_us)
        .flatten()
        .filter(|v| *v > 0.0)
        .collect();
    let mut chart = ChartBuilder::on(area);
    chart
        .caption(workload, ("sans-serif", 17))
        .margin(8)
        .margin_bottom(24)
        .x_label_area_size(4)
        .y_label_area_size(58);
    if values.is_empty() {
        // A workload without latencies (every run failed, or a drain through a push consumer,
        // which hides its pulls) still gets its panel, saying so.
        let c = chart
            .build_cartesian_2d(0.0..1.0, 0.0..1.0)
            .map_err(draw_err)?;
        let style = ("sans-serif", 15)
            .into_font()
            .color(&BLACK)
            .pos(Pos::new(HPos::Center, VPos::Center));
        return c
            .plotting_area()
            .draw(&Text::new("no latency samples", (0.5, 0.5), style))
            .map_err(draw_err);
    }
    let max = values.iter().copied().fold(f64::MIN_POSITIVE, f64::max);
    let min = values.iter().copied().fold(max, f64::min);
    let floor = min / 2.0;
    let mut c = chart
        .build_cartesian_2d(0.0..4.0, (floor..max * 2.5).log_scale())
        .map_err(draw_err)?;
    c.configure_mesh()
        .disable_x_mesh()
        .x_labels(0)
        .y_labels(6)
        .y_label_formatter(&|v| short_us(*v))
        .label_style(("sans-serif", 12))
        .draw()
        .map_err(draw_err)?;
    let bars = series.systems.len();
    for (si, sys) in series.systems.iter().enumerate() {
        let Some(l) = series.cell(workload, sys).and_then(|c| c.latency_us) else {
            continue;
        };
        let col = colour(si);
        let rects = l.iter().enumerate().map(|(g, v)| {
            let (x0, x1) = bar_span(g, si, bars);
            Rectangle::new([(x0, floor), (x1, v.max(floor))], col.filled())
        });
        c.draw_series(rects).map_err(draw_err)?;
    }
    let names: Vec<String> = PERCENTILES.iter().map(|s| s.to_string()).collect();
    group_names(&c, root, &names, floor, 13)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(w: &str, s: &str, tp: f64, p50: f64, failure: Option<&str>) -> String {
        serde_json::json!({
            "workload": w, "system": s, "repeat": 1, "mode": "send",
            "throughput_msgs": tp,
            "latency_us": {"p50": p50, "p90": p50 * 2.0, "p99": p50 * 4.0, "p999": p50 * 8.0,
                           "max": 1e6, "mean": p50, "samples": 10},
            "failure": failure,
        })
        .to_string()
    }

    /// Medians per (workload, system) match the script's table: failed and discarded runs are
    /// left out, an even count averages the middle two, and order is first appearance.
    #[test]
    fn medians_per_workload_and_system_skip_failed_runs() {
        let text = [
            line("W2", "ringmq", 300.0, 30.0, None),
            line("W2", "peer", 10.0, 100.0, None),
            line("W2", "ringmq", 100.0, 10.0, None),
            line("W2", "peer", 30.0, 300.0, None),
            line("W2", "ringmq", 200.0, 20.0, None),
            line("W2", "peer", 99_999.0, 1.0, Some("exit 1")),
            String::new(),
            line("W1", "peer", 7.0, 70.0, None),
            r#"{"workload":"C4","system":"peer","throughput_msgs":5,"latency_us":{"p50":0,"p90":0,"p99":0,"p999":0,"samples":0}}"#.into(),
            r#"{"workload":"W1","system":"ringmq","repeat":1,"failure":"start failed"}"#.into(),
            r#"{"workload":"W2","system":"ringmq","throughput_msgs":1,"discarded":"host steal"}"#.into(),
        ]
        .join("\n");
        let s = parse_series(&text, Path::new("x.jsonl")).expect("parses");
        assert_eq!(s.workloads, ["W2", "W1", "C4"]);
        let c4 = s.cell("C4", "peer").unwrap();
        assert_eq!(c4.throughput_msgs, Some(5.0));
        assert_eq!(c4.latency_us, None, "zero samples is no latency, not 0 µs");
        assert_eq!(s.systems, ["ringmq", "peer"]);
        let r = s.cell("W2", "ringmq").unwrap();
        assert_eq!((r.runs, r.failed), (3, 0));
        assert_eq!(r.throughput_msgs, Some(200.0));
        assert_eq!(r.latency_us, Some([20.0, 40.0, 80.0, 160.0]));
        let p = s.cell("W2", "peer").unwrap();
        assert_eq!((p.runs, p.failed), (3, 1));
        assert_eq!(p.throughput_msgs, Some(20.0), "mean of the middle two");
        assert_eq!(p.latency_us.unwrap()[0], 200.0);
        let f = s.cell("W1", "ringmq").unwrap();
        assert_eq!((f.runs, f.failed), (1, 1));
        assert_eq!((f.throughput_msgs, f.latency_us), (None, None));
        assert_eq!(s.cell("W1", "peer").unwrap().throughput_msgs, Some(7.0));
    }

    /// A line that is not JSON is an error naming its line number, not a silently short chart.
    #[test]
    fn bad_line_is_an_error_with_its_number() {
        let text = format!("{}\nnot json\n", line("W1", "ringmq", 1.0, 1.0, None));
        match parse_series(&text, Path::new("x.jsonl")) {
            Err(PlotError::Json { line, .. }) => assert_eq!(line, 2),
            other => panic!("expected a JSON error, got {other:?}"),
        }
        assert!(matches!(
            parse_series("\n\n", Path::new("e.jsonl")),
            Err(PlotError::Empty(_))
        ));
    }

    /// The committed side-by-side data reduces to the medians quoted in bench/RESULTS.md.
    #[test]
    fn committed_side_by_side_data_matches_the_results_table() {
        // The run-time variable: the compile-time one names whichever checkout last built this
        // binary in a shared target dir (a deleted CI clone, say).
        let root = std::env::var_os("CARGO_MANIFEST_DIR").expect("run by cargo test");
        let path = Path::new(&root).join("data/2026-12-02-side-by-side.jsonl");
        let text = std::fs::read_to_string(&path).expect("committed data file");
        let s = parse_series(&text, &path).expect("parses");
        assert_eq!(s.workloads.len(), 10);
        assert_eq!(s.systems, ["ringmq", "peer"]);
        assert_eq!(
            s.cell("W1", "ringmq").unwrap().throughput_msgs,
            Some(10_815.0)
        );
        assert_eq!(
            s.cell("W4", "peer").unwrap().throughput_msgs,
            Some(92_223.0)
        );
        assert_eq!(
            s.cell("W1", "ringmq").unwrap().latency_us.unwrap()[2],
            387.6
        );
    }

    #[test]
    fn a_missing_font_names_its_path_and_package() {
        let e = load_font(Path::new("/nonexistent/font.ttf")).unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains("/nonexistent/font.ttf"), "{msg}");
        assert!(msg.contains("fonts-dejavu-core"), "{msg}");
    }

    #[test]
    fn labels_are_short_and_in_the_right_unit() {
        assert_eq!(short_count(755_668.0), "756k");
        assert_eq!(short_count(1_260_000.0), "1.3M");
        assert_eq!(short_count(4_449.0), "4.4k");
        assert_eq!(short_us(62.6), "63 µs");
        assert_eq!(short_us(2_797.6), "2.8 ms");
        assert_eq!(short_us(1_000.0), "1 ms");
        assert_eq!(short_count(9_999.0), "10k");
        assert_eq!(short_us(2_453_667.8), "2.5 s");
    }
}
