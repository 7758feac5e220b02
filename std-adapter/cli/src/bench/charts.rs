//! A benchmark's metric series grouped into charts as MZBench's dashboard groups them,
//! and drawn as SVG: a histogram's percentiles and mean in one chart, a counter's total
//! with its rate (`NAME` and `NAME.rps`, on two axes), every other series (a gauge) in a
//! chart of its own. Time runs along the x axis as the elapsed `mm:ss` since the first
//! sample of the benchmark, so that every chart shares one clock; each chart has a legend
//! beside it, and the kind of value on its y axis. Charts whose every series is zero
//! (the error counters of a healthy run, say) are not drawn: their names are listed in
//! one line of text instead.
//!
//! The kinds are read from the series' names, as the server names them, rather than from
//! `/results`, which is empty while a benchmark runs.

use std::collections::BTreeMap;

use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;

/// Samples of one metric: (unix seconds, value).
pub(crate) type Points = Vec<(u64, f64)>;

/// Width of a chart, legend included, in pixels.
pub(crate) const WIDTH: u32 = 960;
/// Width of a chart's plotting part; its legend fills the rest of [`WIDTH`].
pub(crate) const PLOT_WIDTH: u32 = 760;
/// Height of one chart.
pub(crate) const CHART_HEIGHT: u32 = 280;
/// Height of the line that names the all-zero charts, when there is one.
pub(crate) const HEADER_HEIGHT: u32 = 28;
/// Vertical distance between two legend entries.
const LEGEND_STEP: i32 = 20;

/// The suffixes of a histogram's series as the server names them (`NAME.50`, …), in the
/// order of their legend, with the label each gets there.
const HISTOGRAM: [(&str, &str); 9] = [
    ("min", "min"),
    ("50", "p50"),
    ("75", "p75"),
    ("90", "p90"),
    ("95", "p95"),
    ("99", "p99"),
    ("999", "p99.9"),
    ("max", "max"),
    ("mean", "mean"),
];

/// The suffix of a counter's rate series (`NAME.rps`).
const RATE: &str = ".rps";

/// The series colours, in legend order: distinct from each other and from the black,
/// grey and white of axes, grid and background (so a picture of a chart tells its
/// series apart by colour alone).
pub(crate) const PALETTE: [RGBColor; 9] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

/// How a chart's series relate, as in MZBench's dashboard.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Percentiles and mean of one histogram.
    Histogram,
    /// A counter's running total and its rate per second.
    Counter,
    /// One value over time.
    Gauge,
    /// One series of several benchmarks, each over the time since its start.
    Compared,
}

impl Kind {
    fn as_str(self) -> &'static str {
        match self {
            Kind::Histogram => "histogram",
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Compared => "compared",
        }
    }

    /// What the (left) y axis measures.
    fn axis(self) -> &'static str {
        match self {
            Kind::Histogram => "value (percentiles, mean)",
            Kind::Counter => "count (total)",
            Kind::Gauge => "value (gauge)",
            Kind::Compared => "value",
        }
    }
}

/// What the right y axis of a counter measures.
const RATE_AXIS: &str = "per second (rate)";

/// One series of a chart.
#[derive(Debug, PartialEq)]
pub(crate) struct Line<'a> {
    /// The series' name on the server (`dummy.95`, `print.rps`).
    pub(crate) series: &'a str,
    /// Its entry in the legend.
    pub(crate) label: String,
    pub(crate) points: &'a Points,
    /// Drawn against the right axis (a counter's rate).
    pub(crate) right_axis: bool,
}

/// One chart: the series of one metric.
#[derive(Debug, PartialEq)]
pub(crate) struct Chart<'a> {
    /// The metric's name (a histogram's or counter's name without suffix).
    pub(crate) name: &'a str,
    pub(crate) kind: Kind,
    /// At most [`PALETTE`]`.len()` series, in legend order.
    pub(crate) lines: Vec<Line<'a>>,
}

/// The charts to draw, and the metrics not drawn because every value of theirs is zero.
#[derive(Debug, PartialEq)]
pub(crate) struct Charts<'a> {
    pub(crate) charts: Vec<Chart<'a>>,
    pub(crate) all_zero: Vec<&'a str>,
}

impl Charts<'_> {
    /// The line of text that stands for the charts not drawn, if any.
    pub(crate) fn all_zero_line(&self) -> Option<String> {
        (!self.all_zero.is_empty()).then(|| format!("all zero: {}", self.all_zero.join(", ")))
    }
}

/// Groups `series` (by name) into charts, in name order.
pub(crate) fn group(series: &BTreeMap<String, Points>) -> Charts<'_> {
    let mut charts: Vec<Chart<'_>> = Vec::new();
    let mut taken: Vec<&str> = Vec::new();
    // Histograms: two or more series `NAME.<suffix>` with no series called NAME.
    let mut bases: BTreeMap<&str, usize> = BTreeMap::new();
    for name in series.keys() {
        if let Some((base, suffix)) = name.rsplit_once('.') {
            if HISTOGRAM.iter().any(|(s, _)| *s == suffix) && !series.contains_key(base) {
                *bases.entry(base).or_default() += 1;
            }
        }
    }
    for (base, _) in bases.into_iter().filter(|(_, n)| *n >= 2) {
        let lines = HISTOGRAM
            .iter()
            .filter_map(|(suffix, label)| {
                let (series, points) = series.get_key_value(&format!("{base}.{suffix}"))?;
                Some(Line {
                    series,
                    label: (*label).to_owned(),
                    points,
                    right_axis: false,
                })
            })
            .collect::<Vec<_>>();
        taken.extend(lines.iter().map(|l| l.series));
        charts.push(Chart {
            name: base,
            kind: Kind::Histogram,
            lines,
        });
    }
    // Counters: NAME with NAME.rps.
    for (name, points) in series {
        let Some((rate, rate_points)) = series.get_key_value(&format!("{name}{RATE}")) else {
            continue;
        };
        if taken.contains(&name.as_str()) || taken.contains(&rate.as_str()) {
            continue;
        }
        taken.extend([name.as_str(), rate.as_str()]);
        charts.push(Chart {
            name,
            kind: Kind::Counter,
            lines: vec![
                Line {
                    series: name,
                    label: "total".to_owned(),
                    points,
                    right_axis: false,
                },
                Line {
                    series: rate,
                    label: "rate (per second)".to_owned(),
                    points: rate_points,
                    right_axis: true,
                },
            ],
        });
    }
    // Gauges: the rest, each alone.
    for (name, points) in series {
        if !taken.contains(&name.as_str()) {
            charts.push(Chart {
                name,
                kind: Kind::Gauge,
                lines: vec![Line {
                    series: name,
                    label: "value".to_owned(),
                    points,
                    right_axis: false,
                }],
            });
        }
    }
    charts.sort_by(|a, b| a.name.cmp(b.name));
    let (all_zero, charts): (Vec<_>, Vec<_>) = charts.into_iter().partition(|c| {
        c.lines
            .iter()
            .all(|l| l.points.iter().all(|(_, v)| *v == 0.0))
    });
    Charts {
        charts,
        all_zero: all_zero.into_iter().map(|c| c.name).collect(),
    }
}

/// The SVG of `charts` stacked top to bottom, under the line naming the all-zero ones
/// when `with_all_zero_line`; every chart's time axis starts at `origin` (unix seconds)
/// and ends at `end`.
pub(crate) fn draw(
    charts: &Charts<'_>,
    with_all_zero_line: bool,
    (origin, end): (u64, u64),
) -> Result<String, Box<dyn std::error::Error>> {
    let header = charts.all_zero_line().filter(|_| with_all_zero_line);
    let header_height = if header.is_some() { HEADER_HEIGHT } else { 0 };
    let rows = u32::try_from(charts.charts.len()).unwrap_or(u32::MAX);
    let height = header_height.saturating_add(CHART_HEIGHT.saturating_mul(rows));
    let span = end.saturating_sub(origin).max(1);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, height)).into_drawing_area();
        root.fill(&WHITE)?;
        let (top, body) = root.split_vertically(header_height);
        if let Some(text) = header {
            top.draw(&Text::new(text, (10, 8), ("sans-serif", 14)))?;
        }
        if rows > 0 {
            let areas = body.split_evenly((charts.charts.len(), 1));
            for (area, chart) in areas.iter().zip(&charts.charts) {
                draw_chart(area, chart, origin, span)?;
            }
        }
        root.present()?;
    }
    Ok(svg)
}

/// One chart as an SVG of its own ([`WIDTH`] × [`CHART_HEIGHT`]), as the pages show it,
/// with the pixel columns its time axis spans (where `origin` and `end` are drawn): a
/// page turns the pointer's position back into a time with them.
pub(crate) fn draw_one(
    chart: &Chart<'_>,
    (origin, end): (u64, u64),
) -> Result<(String, std::ops::Range<i32>), Box<dyn std::error::Error>> {
    let span = end.saturating_sub(origin).max(1);
    let mut svg = String::new();
    let columns = {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, CHART_HEIGHT)).into_drawing_area();
        root.fill(&WHITE)?;
        let columns = draw_chart(&root, chart, origin, span)?;
        root.present()?;
        columns
    };
    Ok((svg, columns))
}

/// The first and last sample time of `series`, in unix seconds.
pub(crate) fn time_span(series: &BTreeMap<String, Points>) -> (u64, u64) {
    let times = || series.values().flat_map(|p| p.iter().map(|(t, _)| *t));
    let origin = times().min().unwrap_or(0);
    (origin, times().max().unwrap_or(origin))
}

/// Seconds as `mm:ss` (minutes beyond 59 keep counting: `75:00`).
pub(crate) fn mm_ss(seconds: u64) -> String {
    format!("{:02}:{:02}", seconds / 60, seconds % 60)
}

/// Draws `chart` into `area`; returns the pixel columns of its time axis.
fn draw_chart<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    chart: &Chart<'_>,
    origin: u64,
    span: u64,
) -> Result<std::ops::Range<i32>, Box<dyn std::error::Error>>
where
    DB::ErrorType: 'static,
{
    let (plot_area, legend_area) = area.split_horizontally(PLOT_WIDTH);
    let (left, right): (Vec<_>, Vec<_>) = chart
        .lines
        .iter()
        .zip(PALETTE.iter().cycle())
        .partition(|(line, _)| !line.right_axis);
    let mut builder = ChartBuilder::on(&plot_area);
    builder
        .caption(
            format!("{} ({})", chart.name, chart.kind.as_str()),
            ("sans-serif", 16),
        )
        .margin(10)
        .x_label_area_size(40)
        .y_label_area_size(80);
    if !right.is_empty() {
        builder.right_y_label_area_size(80);
    }
    let (low, high) = value_range(left.iter().map(|(l, _)| l.points));
    let context = builder.build_cartesian_2d(0.0..span as f64, low..high)?;
    let columns = context.plotting_area().get_pixel_range().0;
    if right.is_empty() {
        let mut context = context;
        draw_primary(&mut context, chart.kind, &left, origin, span)?;
    } else {
        // Made before the primary axes are drawn: it takes the right label area over.
        let (low, high) = value_range(right.iter().map(|(l, _)| l.points));
        let mut dual = context.set_secondary_coord(0.0..span as f64, low..high);
        draw_primary(&mut dual, chart.kind, &left, origin, span)?;
        dual.configure_secondary_axes()
            .y_desc(RATE_AXIS)
            .y_label_formatter(&axis_value)
            .draw()?;
        for (line, colour) in &right {
            dual.draw_secondary_series(LineSeries::new(
                path(line.points, origin),
                colour.stroke_width(2),
            ))?;
        }
    }
    for ((line, colour), y) in chart
        .lines
        .iter()
        .zip(PALETTE.iter().cycle())
        .zip((0..).map(|i: i32| 40 + i * LEGEND_STEP))
    {
        legend_area.draw(&Rectangle::new([(10, y), (34, y + 6)], colour.filled()))?;
        legend_area.draw(&Text::new(
            line.label.as_str(),
            (42, y - 4),
            ("sans-serif", 13),
        ))?;
    }
    Ok(columns)
}

/// A number as people read it, on axes and in tables alike: about four significant
/// digits (`1.8`, `0.6001`, `12.35`), the integer part grouped by thousands (`1,234,568`),
/// tiny and huge magnitudes in scientific notation (`1.5e-5`, `2.5e9`) rather than a row
/// of zeros, no trailing zeros, no `-0`.
pub(crate) fn readable(v: f64) -> String {
    if !v.is_finite() {
        return v.to_string();
    }
    let magnitude = v.abs();
    if magnitude == 0.0 {
        return "0".to_owned();
    }
    if !(1e-4..1e9).contains(&magnitude) {
        let text = format!("{v:.3e}");
        let (mantissa, exponent) = text.split_once('e').unwrap_or((&text, "0"));
        let mantissa = mantissa.trim_end_matches('0').trim_end_matches('.');
        return format!("{mantissa}e{exponent}");
    }
    // Digits before the decimal point (0 or less for a fraction).
    let before = magnitude.log10().floor() as i32 + 1;
    let decimals = usize::try_from(4 - before).unwrap_or(0);
    let text = format!("{magnitude:.decimals$}");
    let (integer, fraction) = text.split_once('.').unwrap_or((&text, ""));
    let fraction = fraction.trim_end_matches('0');
    let mut out = String::with_capacity(text.len() + text.len() / 3 + 2);
    if v < 0.0 && (integer != "0" || !fraction.is_empty()) {
        out.push('-');
    }
    for (i, digit) in integer.chars().enumerate() {
        if i > 0 && (integer.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(digit);
    }
    if !fraction.is_empty() {
        out.push('.');
        out.push_str(fraction);
    }
    out
}

/// A value-axis label: [`readable`], as plotters hands the ticks over.
pub(crate) fn axis_value(v: &f64) -> String {
    readable(*v)
}

/// The axes, grid and left-axis series of a chart.
fn draw_primary<DB: DrawingBackend>(
    context: &mut ChartContext<'_, DB, Cartesian2d<RangedCoordf64, RangedCoordf64>>,
    kind: Kind,
    lines: &[(&Line<'_>, &RGBColor)],
    origin: u64,
    span: u64,
) -> Result<(), Box<dyn std::error::Error>>
where
    DB::ErrorType: 'static,
{
    let elapsed = |x: &f64| mm_ss(x.max(0.0).round() as u64);
    // At most one tick per second (the samples' resolution), so that no two ticks read
    // the same `mm:ss`.
    let ticks = usize::try_from(span.saturating_add(1)).map_or(10, |n| n.min(10));
    context
        .configure_mesh()
        .x_desc("elapsed (mm:ss)")
        .y_desc(kind.axis())
        .x_label_formatter(&elapsed)
        .y_label_formatter(&axis_value)
        .x_labels(ticks)
        .bold_line_style(BLACK.mix(0.1))
        .max_light_lines(0)
        .draw()?;
    for (line, colour) in lines {
        context.draw_series(LineSeries::new(
            path(line.points, origin),
            colour.stroke_width(2),
        ))?;
    }
    Ok(())
}

/// A series' points as drawn: thinned to about two per pixel column, time as seconds
/// since `origin`.
fn path(points: &Points, origin: u64) -> impl Iterator<Item = (f64, f64)> {
    decimate(points, BUCKETS)
        .into_iter()
        .map(move |(t, v)| (t.saturating_sub(origin) as f64, v))
}

/// The runs a series is thinned to before it is drawn or sent to a page: one per two
/// pixel columns of the plot (each drawn as its lowest and highest point, so a spike
/// one sample wide still shows), which halves a long benchmark's page against one run
/// per column with no difference to see.
pub(crate) const BUCKETS: usize = PLOT_WIDTH as usize / 2;

/// At most about `2 * buckets` points with the same outline: the points split into
/// `buckets` runs, each drawn as its lowest and highest point in time order, so that
/// spikes survive. The SVG stays small however long the benchmark ran.
pub(crate) fn decimate(points: &[(u64, f64)], buckets: usize) -> Vec<(u64, f64)> {
    if points.len() <= 2 * buckets || buckets == 0 {
        return points.to_vec();
    }
    let per = points.len().div_ceil(buckets);
    let mut out = Vec::with_capacity(2 * buckets);
    for run in points.chunks(per) {
        let low = run.iter().min_by(|a, b| a.1.total_cmp(&b.1));
        let high = run.iter().max_by(|a, b| a.1.total_cmp(&b.1));
        if let (Some(low), Some(high)) = (low, high) {
            if low.0 <= high.0 {
                out.extend([*low, *high]);
            } else {
                out.extend([*high, *low]);
            }
        }
    }
    out
}

/// The y range of some series: their values' range with a margin, never empty.
fn value_range<'a>(series: impl Iterator<Item = &'a Points>) -> (f64, f64) {
    let (low, high) = series
        .flat_map(|p| p.iter().map(|(_, v)| *v))
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(low, high), v| {
            (low.min(v), high.max(v))
        });
    if !low.is_finite() || !high.is_finite() {
        return (0.0, 1.0);
    }
    // 5 % of the span each side; a flat line gets 5 % of its value (or ±1 at zero), so
    // that small values (a merge time of 0.0002 s) are drawn at their own scale.
    let span = high - low;
    let margin = if span > 0.0 {
        span * 0.05
    } else if high != 0.0 {
        high.abs() * 0.05
    } else {
        1.0
    };
    (low - margin, high + margin)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Series named as the server names `hello.bdl`'s: a histogram (`dummy`), counters
    /// with their rates (`print`, and `errors.user` at zero throughout), a gauge, and a
    /// lone rate, over a minute and a half. Every series has values of its own, so that
    /// no line hides another.
    fn hello_like() -> BTreeMap<String, Points> {
        let start = 1_700_000_000;
        let over = |f: &dyn Fn(u64) -> f64| (0..=90).map(|t| (start + t, f(t))).collect();
        let mut series = BTreeMap::new();
        for (i, (suffix, _)) in HISTOGRAM.iter().enumerate() {
            let level = 100.0 * (i as f64 + 1.0);
            series.insert(
                format!("dummy.{suffix}"),
                over(&|t| level + (t % 10) as f64),
            );
        }
        series.insert("print".into(), over(&|t| 10.0 * t as f64));
        series.insert("print.rps".into(), over(&|t| 10.0 + (t % 3) as f64));
        series.insert("errors.user".into(), over(&|_| 0.0));
        series.insert("errors.user.rps".into(), over(&|_| 0.0));
        series.insert("metric_merging_time".into(), over(&|t| (t % 7) as f64));
        series.insert("lonely.rps".into(), over(&|t| t as f64));
        series
    }

    #[test]
    fn series_are_grouped_as_the_dashboard_groups_them() {
        let series = hello_like();
        let charts = group(&series);
        let shape: Vec<(&str, Kind, Vec<&str>)> = charts
            .charts
            .iter()
            .map(|c| (c.name, c.kind, c.lines.iter().map(|l| l.series).collect()))
            .collect();
        assert_eq!(
            shape,
            [
                (
                    "dummy",
                    Kind::Histogram,
                    vec![
                        "dummy.min",
                        "dummy.50",
                        "dummy.75",
                        "dummy.90",
                        "dummy.95",
                        "dummy.99",
                        "dummy.999",
                        "dummy.max",
                        "dummy.mean"
                    ]
                ),
                ("lonely.rps", Kind::Gauge, vec!["lonely.rps"]),
                (
                    "metric_merging_time",
                    Kind::Gauge,
                    vec!["metric_merging_time"]
                ),
                ("print", Kind::Counter, vec!["print", "print.rps"]),
            ]
        );
        let rate = &charts.charts[3].lines[1];
        assert!(rate.right_axis && rate.label == "rate (per second)");
        assert_eq!(charts.all_zero, ["errors.user"]);
        assert_eq!(
            charts.all_zero_line().as_deref(),
            Some("all zero: errors.user")
        );
    }

    #[test]
    fn a_metric_named_like_a_percentile_is_not_a_histogram_on_its_own() {
        let mut series = BTreeMap::new();
        series.insert("latency".to_owned(), vec![(1, 1.0)]);
        series.insert("latency.max".to_owned(), vec![(1, 2.0)]);
        series.insert("latency.min".to_owned(), vec![(1, 0.5)]);
        series.insert("queue.max".to_owned(), vec![(1, 3.0)]);
        let charts = group(&series);
        assert!(charts.charts.iter().all(|c| c.kind == Kind::Gauge));
        assert_eq!(charts.charts.len(), 4);
    }

    #[test]
    fn elapsed_time_reads_as_minutes_and_seconds() {
        assert_eq!(mm_ss(0), "00:00");
        assert_eq!(mm_ss(75), "01:15");
        assert_eq!(mm_ss(3600 + 5), "60:05");
    }

    /// Whether the SVG has a text element that reads `text`.
    fn has_text(svg: &str, text: &str) -> bool {
        svg.split("</text>")
            .filter_map(|chunk| chunk.rsplit_once('>'))
            .any(|(_, inner)| inner.trim() == text)
    }

    /// The SVG rasterised: `(width, height, RGBA pixels)`.
    fn raster(svg: &str) -> (u32, u32, Vec<u8>) {
        let tree = resvg::usvg::Tree::from_str(svg, &resvg::usvg::Options::default())
            .expect("the SVG parses");
        let size = tree.size().to_int_size();
        let mut pixmap =
            resvg::tiny_skia::Pixmap::new(size.width(), size.height()).expect("a pixmap");
        resvg::render(
            &tree,
            resvg::tiny_skia::Transform::default(),
            &mut pixmap.as_mut(),
        );
        (size.width(), size.height(), pixmap.data().to_vec())
    }

    /// How many pixels of exactly `colour` lie in the rectangle `x` × `y`.
    fn count(
        (width, _, data): &(u32, u32, Vec<u8>),
        colour: RGBColor,
        x: std::ops::Range<u32>,
        y: std::ops::Range<u32>,
    ) -> usize {
        y.flat_map(|row| x.clone().map(move |col| (row * width + col) as usize * 4))
            .filter(|&i| data[i..i + 4] == [colour.0, colour.1, colour.2, 255])
            .count()
    }

    #[test]
    fn each_chart_draws_its_series_and_legend_in_their_colours() {
        let series = hello_like();
        let charts = group(&series);
        let svg = draw(&charts, true, time_span(&series)).expect("drawn");
        let picture = raster(&svg);
        let rows = charts.charts.len() as u32;
        assert_eq!(
            (picture.0, picture.1),
            (WIDTH, HEADER_HEIGHT + rows * CHART_HEIGHT)
        );
        for (row, chart) in charts.charts.iter().enumerate() {
            let top = HEADER_HEIGHT + row as u32 * CHART_HEIGHT;
            let y = top..top + CHART_HEIGHT;
            for (i, colour) in PALETTE.iter().enumerate() {
                let plotted = count(&picture, *colour, 0..PLOT_WIDTH, y.clone());
                let legend = count(&picture, *colour, PLOT_WIDTH..WIDTH, y.clone());
                if i < chart.lines.len() {
                    let what = format!("{} {}", chart.name, chart.lines[i].label);
                    assert!(plotted >= 50, "{what}: {plotted} pixels of its line");
                    assert!(legend >= 100, "{what}: {legend} pixels of its legend");
                } else {
                    assert_eq!(plotted + legend, 0, "{}: colour {i} unused", chart.name);
                }
            }
        }
        // The labels are text of the SVG (no fonts are loaded to draw them).
        for chart in &charts.charts {
            let title = format!("{} ({})", chart.name, chart.kind.as_str());
            assert!(has_text(&svg, &title), "{title}");
            for line in &chart.lines {
                assert!(has_text(&svg, &line.label), "{}", line.label);
            }
        }
        for axis in [
            "elapsed (mm:ss)",
            "value (percentiles, mean)",
            "count (total)",
            RATE_AXIS,
            "value (gauge)",
            "01:30",
        ] {
            assert!(has_text(&svg, axis), "{axis}");
        }
        assert!(has_text(&svg, "all zero: errors.user"));
        assert!(!svg.contains("errors.user ("), "no chart of errors.user");
    }

    #[test]
    fn decimation_bounds_the_points_and_keeps_the_extremes() {
        let points: Vec<(u64, f64)> = (0..100_000u64)
            .map(|t| (t, if t == 54_321 { 1e9 } else { (t % 7) as f64 }))
            .collect();
        let drawn = decimate(&points, 500);
        assert!(drawn.len() <= 1000, "{}", drawn.len());
        assert!(drawn.contains(&(54_321, 1e9)), "the spike survives");
        assert!(drawn.windows(2).all(|w| w[0].0 <= w[1].0), "in time order");
        let few = &points[..10];
        assert_eq!(decimate(few, 500), few, "short series as they are");
    }

    #[test]
    fn axis_labels_tell_tiny_and_huge_values_apart() {
        assert_eq!(axis_value(&0.0), "0");
        assert_eq!(axis_value(&-0.0), "0");
        assert_eq!(axis_value(&1.5), "1.5");
        assert_eq!(axis_value(&1800.0), "1,800");
        assert_eq!(axis_value(&0.125), "0.125");
        assert_eq!(axis_value(&0.00001), "1e-5");
        assert_eq!(axis_value(&0.00002), "2e-5");
        assert_eq!(axis_value(&2.5e9), "2.5e9");
    }

    #[test]
    fn numbers_read_with_about_four_significant_digits() {
        assert_eq!(readable(1.7997582240796934), "1.8");
        assert_eq!(readable(0.6000829428642799), "0.6001");
        assert_eq!(readable(12.3456), "12.35");
        assert_eq!(readable(1234567.891), "1,234,568");
        assert_eq!(readable(-98765.4321), "-98,765");
        assert_eq!(readable(0.00123456), "0.001235");
        assert_eq!(readable(-0.00004), "-4e-5");
        assert_eq!(readable(123456789012.0), "1.235e11");
        assert_eq!(readable(999.99999), "1,000");
        assert_eq!(readable(-0.0000001), "-1e-7");
        assert_eq!(readable(f64::NAN), "NaN");
    }

    #[test]
    fn small_values_get_their_own_scale() {
        let tiny: Points = vec![(0, 0.0002), (1, 0.000233), (2, 0.00029)];
        let (low, high) = value_range([&tiny].into_iter());
        assert!(low > 0.0001 && high < 0.0003, "{low}..{high}");
        let flat: Points = vec![(0, 5.0), (1, 5.0)];
        assert_eq!(value_range([&flat].into_iter()), (4.75, 5.25));
        let zero: Points = vec![(0, 0.0)];
        assert_eq!(value_range([&zero].into_iter()), (-1.0, 1.0));
    }
}
