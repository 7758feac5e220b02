//! The dashboard's pages as HTML: the list of benchmarks, a benchmark's page and the
//! comparison of several. Each page is a frame around named sections; a live page asks
//! the dashboard for the sections again when they change and swaps them in, and a
//! frozen page (`bench report`) is the same frame with the sections as they are now, its
//! style and script inside it. One renderer serves both, so the report is the live page
//! stopped.
//!
//! Everything that came from a server or a user (names, tags, environment, metric names,
//! log lines, statuses) passes through [`escape`] on its way into the page; the charts'
//! SVG escapes its text itself (plotters' SVG backend), and the pointer readout's data
//! travels as JSON inside an escaped attribute. The script only ever sets text or
//! swaps in sections made here.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use benchlink_std::bench::{Results, StatusInfo};

use super::super::charts::{
    decimate, draw_one, group, mm_ss, readable, time_span, Chart, Kind, Line, Points, PALETTE,
    WIDTH,
};
use super::board::{Bench, State, LOG_LINES};

/// The page's looks: readable on screen and printed, no external font.
pub(crate) const STYLE: &str = include_str!("dashboard.css");
/// The page's behaviour: the pointer readout, and on a live page the updates.
pub(crate) const SCRIPT: &str = include_str!("dashboard.js");

/// Runs a series is thinned to for the pointer readout: enough to read a value under
/// the pointer, few enough that hundreds of metrics stay light.
const READOUT_BUCKETS: usize = 200;
/// Benchmarks one comparison can overlay: one colour each.
pub(crate) const MAX_COMPARED: usize = PALETTE.len();

/// How a page is made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Served by the dashboard: style and script by reference, sections updated.
    Live,
    /// One file that reads the same offline: style and script inside it, no updates,
    /// no links to pages that are not there.
    Frozen,
}

/// A page's named sections, in page order.
pub(crate) type Sections = Vec<(&'static str, String)>;

/// A whole page: `title`, the sections, and on a live page where to ask for news.
pub(crate) fn document(
    title: &str,
    sections: &Sections,
    mode: Mode,
    news: Option<(&str, u64)>,
) -> String {
    let mut html = String::new();
    let _ = write!(
        html,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>{}</title>\n",
        escape(title)
    );
    match mode {
        Mode::Live => html.push_str("<link rel=\"stylesheet\" href=\"/dashboard.css\">\n"),
        Mode::Frozen => {
            let _ = write!(html, "<style>\n{STYLE}</style>\n");
        }
    }
    html.push_str("</head>\n");
    match (mode, news) {
        (Mode::Live, Some((api, version))) => {
            let _ = writeln!(
                html,
                "<body data-news=\"{}\" data-version=\"{version}\">",
                escape(api)
            );
        }
        _ => html.push_str("<body>\n"),
    }
    if mode == Mode::Live {
        html.push_str("<nav><a href=\"/\">All benchmarks</a></nav>\n");
    }
    for (name, content) in sections {
        let _ = write!(html, "<section id=\"s-{name}\">\n{content}</section>\n");
    }
    match mode {
        Mode::Live => html.push_str("<script src=\"/dashboard.js\"></script>\n"),
        Mode::Frozen => {
            let _ = write!(html, "<script>\n{SCRIPT}</script>\n");
        }
    }
    html.push_str("</body>\n</html>\n");
    html
}

/// A benchmark page's title.
pub(crate) fn benchmark_title(id: u64, bench: &Bench) -> String {
    let status = bench
        .status
        .as_ref()
        .map_or("unknown", |s| s.status_text.as_str());
    match &bench.meta.name {
        Some(name) => format!("Benchmark {id} ({name}): {status}"),
        None => format!("Benchmark {id}: {status}"),
    }
}

/// A benchmark page's sections: heading, timeline, charts, log, results, environment.
pub(crate) fn benchmark_sections(id: u64, bench: &Bench, mode: Mode) -> Sections {
    let mut head = String::new();
    let status = bench
        .status
        .as_ref()
        .map_or("unknown", |s| s.status_text.as_str());
    let _ = writeln!(head, "<h1>Benchmark {id}: {}</h1>", escape(status));
    if let Some(name) = &bench.meta.name {
        let _ = writeln!(head, "<p class=\"name\">{}</p>", escape(name));
    }
    if !bench.meta.tags.is_empty() {
        head.push_str("<p class=\"tags\">");
        tags(&mut head, &bench.meta.tags);
        head.push_str("</p>\n");
    }
    if let Some(trouble) = &bench.trouble {
        let _ = writeln!(head, "<p class=\"trouble\">{}</p>", escape(trouble));
    }
    let mut timeline_html = String::new();
    match &bench.status {
        Some(status) => timeline(&mut timeline_html, status),
        None => timeline_html
            .push_str("<h2>Status timeline</h2>\n<p class=\"note\">Not read yet.</p>\n"),
    }
    let mut results = String::new();
    results_table(&mut results, bench.results.as_ref());
    vec![
        ("head", head),
        ("timeline", timeline_html),
        ("charts", benchmark_charts(bench)),
        ("log", log(bench, mode)),
        ("results", results),
        ("about", about(bench)),
    ]
}

/// The charts of one benchmark, grouped as MZBench's dashboard groups them.
fn benchmark_charts(bench: &Bench) -> String {
    let mut html = String::from("<h2>Metrics</h2>\n");
    let series = &bench.series;
    if series.is_empty() {
        html.push_str("<p class=\"note\">No metric samples yet.</p>\n");
        return html;
    }
    let kept: usize = series.values().map(Vec::len).sum();
    let _ = writeln!(
        html,
        "<p class=\"note\">{} samples of {} series.</p>",
        readable(kept as f64),
        series.len()
    );
    if bench.samples_dropped > 0 {
        let _ = writeln!(
            html,
            "<p class=\"note\">{} samples of further series not kept (at most {} series).</p>",
            readable(bench.samples_dropped as f64),
            series.len()
        );
    }
    let charts = group(series);
    if let Some(line) = charts.all_zero_line() {
        let _ = writeln!(html, "<p class=\"note\">{}</p>", escape(&line));
    }
    figures(&mut html, &charts.charts, time_span(series));
    html
}

/// Each chart as a figure: its SVG, and its series for the pointer readout.
fn figures(html: &mut String, charts: &[Chart<'_>], span: (u64, u64)) {
    for chart in charts {
        let (svg, columns) = match draw_one(chart, span) {
            Ok(drawn) => drawn,
            Err(e) => {
                let _ = writeln!(
                    html,
                    "<p class=\"trouble\">cannot draw {}: {}</p>",
                    escape(chart.name),
                    escape(&e.to_string())
                );
                continue;
            }
        };
        let mut drawn = 0;
        let lines: Vec<serde_json::Value> = chart
            .lines
            .iter()
            .zip(PALETTE.iter().cycle())
            .map(|(line, colour)| {
                let points = decimate(line.points, READOUT_BUCKETS);
                drawn += line.points.len();
                serde_json::json!({
                    "label": line.label,
                    "color": format!("#{:02x}{:02x}{:02x}", colour.0, colour.1, colour.2),
                    "points": points
                        .iter()
                        .map(|(t, v)| (t.saturating_sub(span.0), v))
                        .collect::<Vec<_>>(),
                })
            })
            .collect();
        let readout = serde_json::json!({
            "x": [columns.start, columns.end],
            "span": span.1.saturating_sub(span.0).max(1),
            "width": WIDTH,
            "lines": lines,
        });
        let _ = write!(
            html,
            "<figure class=\"chart\" data-name=\"{}\" data-points=\"{drawn}\" data-readout=\"{}\">\n{}\n\
             <figcaption class=\"readout\" aria-live=\"polite\"></figcaption>\n</figure>\n",
            escape(chart.name),
            escape(&readout.to_string()),
            svg.trim()
        );
    }
}

/// The log's tail.
fn log(bench: &Bench, mode: Mode) -> String {
    let mut html = String::from("<h2>Log</h2>\n");
    if bench.log.is_empty() {
        html.push_str(if bench.followed || mode == Mode::Frozen {
            "<p class=\"note\">No log lines yet.</p>\n"
        } else {
            "<p class=\"note\">Not read: open the benchmark's page to follow it.</p>\n"
        });
        return html;
    }
    let _ = writeln!(
        html,
        "<p class=\"note\">The last {} lines{}.</p>",
        bench.log.len(),
        if bench.log_scrolled > 0 {
            format!(
                " (the tail keeps {LOG_LINES}; {} earlier ones are not shown)",
                readable(bench.log_scrolled as f64)
            )
        } else {
            String::new()
        }
    );
    html.push_str("<pre class=\"log\">");
    for line in &bench.log {
        html.push_str(&escape(line));
        html.push('\n');
    }
    html.push_str("</pre>\n");
    html
}

/// Name, tags and environment, where known.
fn about(bench: &Bench) -> String {
    let mut html = String::from("<h2>Environment and tags</h2>\n");
    let meta = &bench.meta;
    if meta.name.is_none() && meta.tags.is_empty() && meta.env.is_empty() {
        html.push_str(
            "<p class=\"note\">Not known: the benchmark server's HTTP API reports no \
             name, tags or environment; they are shown for benchmarks started through \
             benchlink.</p>\n",
        );
        return html;
    }
    html.push_str("<div class=\"wide\">\n<table>\n");
    if let Some(name) = &meta.name {
        let _ = writeln!(html, "<tr><th>name</th><td>{}</td></tr>", escape(name));
    }
    html.push_str("<tr><th>tags</th><td>");
    tags(&mut html, &meta.tags);
    html.push_str("</td></tr>\n");
    for (k, v) in &meta.env {
        let _ = writeln!(
            html,
            "<tr><th>env {}</th><td>{}</td></tr>",
            escape(k),
            escape(v)
        );
    }
    html.push_str("</table>\n</div>\n");
    html
}

fn tags(html: &mut String, tags: &[String]) {
    for tag in tags {
        let _ = write!(html, "<span class=\"tag\">{}</span> ", escape(tag));
    }
}

/// The list page's one section: every benchmark known, newest first.
pub(crate) fn list_sections(state: &State) -> Sections {
    let mut html = String::from("<h1>Benchmarks</h1>\n");
    if state.benches.is_empty() {
        html.push_str(
            "<p class=\"note\">No benchmarks yet: the list grows as the server starts them.</p>\n",
        );
        return vec![("list", html)];
    }
    html.push_str(
        "<form method=\"get\" action=\"/compare\">\n<div class=\"wide\">\n<table class=\"list\">\n\
         <tr><th>compare</th><th>id</th><th>name</th><th>status</th><th>created (UTC)</th>\
         <th>duration (mm:ss)</th><th>tags</th></tr>\n",
    );
    for (id, bench) in state.benches.iter().rev() {
        let status = bench.status.as_ref();
        let text = status.map_or("unknown", |s| s.status_text.as_str());
        let created = status
            .and_then(|s| s.create_time)
            .map(|t| t.to_string())
            .unwrap_or_default();
        let duration = status
            .and_then(|s| Some((s.start_time?, s.finish_time)))
            .map(|(start, end)| {
                let end = end.map_or_else(now_unix, |e| e.unix_seconds());
                mm_ss(end.saturating_sub(start.unix_seconds()))
            })
            .unwrap_or_default();
        let class = match status.map(StatusInfo::status) {
            Some(s) if s.is_final() && s.as_str() == "complete" => "complete",
            Some(s) if s.is_final() => "failed",
            Some(_) => "running",
            None => "unknown",
        };
        let _ = write!(
            html,
            "<tr><td><input type=\"checkbox\" name=\"ids\" value=\"{id}\" aria-label=\"compare {id}\"></td>\
             <td><a href=\"/benchmarks/{id}\">{id}</a></td><td>{}</td>\
             <td class=\"{class}\">{}</td><td>{created}</td><td>{duration}</td><td>",
            escape(bench.meta.name.as_deref().unwrap_or("")),
            escape(text),
        );
        tags(&mut html, &bench.meta.tags);
        html.push_str("</td></tr>\n");
    }
    html.push_str(
        "</table>\n</div>\n<p><button type=\"submit\">Compare the checked benchmarks</button></p>\n</form>\n",
    );
    vec![("list", html)]
}

fn now_unix() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The comparison's sections: which benchmarks, then one chart per series any of them
/// has, each benchmark's line over the time since its own start.
pub(crate) fn compare_sections(ids: &[u64], state: &State) -> Sections {
    let mut head = String::from("<h1>Comparison</h1>\n<ul class=\"compared\">\n");
    // Each benchmark's series with time as seconds since its start.
    let mut shifted: Vec<(u64, BTreeMap<String, Points>)> = Vec::new();
    for (id, colour) in ids.iter().zip(PALETTE.iter()) {
        let Some(bench) = state.benches.get(id) else {
            let _ = writeln!(head, "<li>{id}: not known to this dashboard</li>");
            continue;
        };
        let status = bench
            .status
            .as_ref()
            .map_or("unknown", |s| s.status_text.as_str());
        let _ = writeln!(
            head,
            "<li><span class=\"swatch\" style=\"background:#{:02x}{:02x}{:02x}\"></span>\
             <a href=\"/benchmarks/{id}\">{id}</a> {} ({})</li>",
            colour.0,
            colour.1,
            colour.2,
            escape(bench.meta.name.as_deref().unwrap_or("")),
            escape(status)
        );
        let start = bench
            .status
            .as_ref()
            .and_then(|s| s.start_time)
            .map(|t| t.unix_seconds())
            .unwrap_or_else(|| time_span(&bench.series).0);
        let series = bench
            .series
            .iter()
            .map(|(name, points)| {
                let points = points.iter().map(|(t, v)| (t.saturating_sub(start), *v));
                (name.clone(), points.collect())
            })
            .collect();
        shifted.push((*id, series));
    }
    head.push_str("</ul>\n<p class=\"note\">Time is since each benchmark's start.</p>\n");
    let labels: Vec<String> = shifted.iter().map(|(id, _)| format!("#{id}")).collect();
    let mut names: Vec<&String> = shifted.iter().flat_map(|(_, s)| s.keys()).collect();
    names.sort();
    names.dedup();
    let mut charts = Vec::new();
    let mut all_zero = Vec::new();
    for name in names {
        let lines: Vec<Line<'_>> = shifted
            .iter()
            .zip(&labels)
            .filter_map(|((_, series), label)| {
                let (series, points) = series.get_key_value(name)?;
                Some(Line {
                    series,
                    label: label.clone(),
                    points,
                    right_axis: false,
                })
            })
            .collect();
        if lines
            .iter()
            .all(|l| l.points.iter().all(|(_, v)| *v == 0.0))
        {
            all_zero.push(name.as_str());
            continue;
        }
        charts.push(Chart {
            name,
            kind: Kind::Compared,
            lines,
        });
    }
    let end = shifted
        .iter()
        .flat_map(|(_, s)| s.values().flat_map(|p| p.iter().map(|(t, _)| *t)))
        .max()
        .unwrap_or(0);
    let mut html = String::from("<h2>Metrics</h2>\n");
    if !all_zero.is_empty() {
        let _ = writeln!(
            html,
            "<p class=\"note\">all zero: {}</p>",
            escape(&all_zero.join(", "))
        );
    }
    if charts.is_empty() {
        html.push_str("<p class=\"note\">No metric samples yet.</p>\n");
    }
    figures(&mut html, &charts, (0, end));
    vec![("head", head), ("charts", html)]
}

/// The status timeline: when the benchmark was created, started and ended, each with
/// the time elapsed since its creation.
fn timeline(html: &mut String, status: &StatusInfo) {
    html.push_str(
        "<h2>Status timeline</h2>\n<table>\n\
         <tr><th>stage</th><th>time (UTC)</th><th>elapsed (mm:ss)</th></tr>\n",
    );
    let created = status.create_time.map(|t| t.unix_seconds());
    let end = if status.status().is_final() {
        status.status_text.as_str()
    } else {
        "ended"
    };
    for (stage, time) in [
        ("created", status.create_time),
        ("started", status.start_time),
        (end, status.finish_time),
    ] {
        let (when, elapsed) = match (time, created) {
            (Some(t), Some(c)) => (t.to_string(), mm_ss(t.unix_seconds().saturating_sub(c))),
            (Some(t), None) => (t.to_string(), String::new()),
            (None, _) => ("not yet".to_owned(), String::new()),
        };
        let _ = writeln!(
            html,
            "<tr><td>{}</td><td>{when}</td><td>{elapsed}</td></tr>",
            escape(stage)
        );
    }
    html.push_str("</table>\n");
    if let Some(reason) = &status.reason {
        let _ = writeln!(html, "<p class=\"note\">reason: {}</p>", escape(reason));
    }
}

/// Statistics in the order the results table shows them; others follow by name.
const STATS_ORDER: [&str; 10] = [
    "min", "50", "75", "90", "95", "99", "999", "max", "mean", "median",
];

/// The results: one row per metric, one column per statistic any metric has (a
/// counter's statistics are of its rate).
fn results_table(html: &mut String, results: Option<&Results>) {
    html.push_str("<h2>Results</h2>\n");
    let Some(results) = results.filter(|r| !r.0.is_empty()) else {
        html.push_str(
            "<p class=\"note\">No results yet: the server gives them once the benchmark \
             has ended.</p>\n",
        );
        return;
    };
    let mut stats: Vec<&str> = results
        .0
        .values()
        .flat_map(|m| m.stats.keys().map(String::as_str))
        .collect();
    stats.sort_by_key(|k| (STATS_ORDER.iter().position(|o| o == k), *k));
    stats.dedup();
    // Wide tables scroll inside their own box, never the page.
    html.push_str(
        "<div class=\"wide\">\n<table>\n<tr><th>metric</th><th>type</th><th>value</th>\
         <th>statistics of</th>",
    );
    for key in &stats {
        let _ = write!(html, "<th>{}</th>", escape(key));
    }
    html.push_str("</tr>\n");
    for (name, metric) in &results.0 {
        let of = if metric.kind == "counter" {
            "rate (per second)"
        } else {
            "value"
        };
        let value = metric.value.as_ref().map(number).unwrap_or_default();
        let _ = write!(
            html,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{of}</td>",
            escape(name),
            escape(&metric.kind),
            escape(&value)
        );
        for key in &stats {
            let cell = metric.stats.get(*key).map(number).unwrap_or_default();
            let _ = write!(html, "<td>{}</td>", escape(&cell));
        }
        html.push_str("</tr>\n");
    }
    html.push_str("</table>\n</div>\n");
}

/// A result as people read it ([`readable`]); the server's text when it is no number.
fn number(value: &benchlink_std::bench::Value) -> String {
    let v = value.as_f64();
    if v.is_nan() {
        value.to_string()
    } else {
        readable(v)
    }
}

/// `text` safe inside HTML elements and quoted attributes.
pub(crate) fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}
