//! `benchlink bench report ID -o report.html`: one page about a benchmark — its status
//! timeline, its results table and its metrics grouped into charts — that reads the same
//! offline and years later: the styles and the charts (inline SVG) are in the page, and
//! nothing in it loads from elsewhere (no scripts, links, fonts or images).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use benchlink_std::bench::{BenchClient, Results, StatusInfo};

use super::charts::{draw, group, mm_ss, readable, time_span, Points};
use super::plot::{collect, drawing_failed};
use crate::fail::Fail;

/// Statistics in the order the results table shows them; others follow by name.
const STATS_ORDER: [&str; 10] = [
    "min", "50", "75", "90", "95", "99", "999", "max", "mean", "median",
];

/// The page's looks: readable printed or on screen, no external font.
const STYLE: &str = "\
body { font-family: sans-serif; margin: 2em; color: #222; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: right; }
th:first-child, td:first-child { text-align: left; }
th { background: #f4f4f4; }
p.note { color: #555; }
div.wide { max-width: 100%; overflow-x: auto; }
svg { display: block; max-width: 100%; height: auto; }
";

/// Reads benchmark `id`'s status, results and samples and writes its report to `path`;
/// returns the number of charts in it.
pub(crate) fn report(client: BenchClient, id: u64, path: &Path) -> Result<usize, Fail> {
    let mut client = client;
    let status = client.status(id)?;
    let results = client.results(id)?;
    let series = collect(client, id, &status)?;
    let (html, charts) = page(id, &status, &results, &series)?;
    std::fs::write(path, html).map_err(|e| Fail(1, format!("{}: {e}", path.display())))?;
    Ok(charts)
}

/// The page, and the number of charts in it.
fn page(
    id: u64,
    status: &StatusInfo,
    results: &Results,
    series: &BTreeMap<String, Points>,
) -> Result<(String, usize), Fail> {
    let mut html = String::new();
    // Writing into a String cannot fail; `let _ =` keeps that out of the control flow.
    let _ = write!(
        html,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <title>Benchmark {id}: {status}</title>\n<style>\n{STYLE}</style>\n</head>\n<body>\n\
         <h1>Benchmark {id}: {status}</h1>\n",
        status = escape(&status.status_text),
    );
    timeline(&mut html, status);
    results_table(&mut html, results);
    html.push_str("<h2>Metrics</h2>\n");
    let charts = group(series);
    if series.is_empty() {
        html.push_str("<p class=\"note\">No metric samples.</p>\n");
    }
    if let Some(line) = charts.all_zero_line() {
        let _ = writeln!(html, "<p class=\"note\">{}</p>", escape(&line));
    }
    if !charts.charts.is_empty() {
        let svg = draw(&charts, false, time_span(series)).map_err(drawing_failed)?;
        html.push_str(svg.trim());
        html.push('\n');
    }
    html.push_str("</body>\n</html>\n");
    Ok((html, charts.charts.len()))
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

/// The results: one row per metric, one column per statistic any metric has (a
/// counter's statistics are of its rate).
fn results_table(html: &mut String, results: &Results) {
    html.push_str("<h2>Results</h2>\n");
    if results.0.is_empty() {
        html.push_str(
            "<p class=\"note\">No results yet: the server gives them once the benchmark \
             has ended.</p>\n",
        );
        return;
    }
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
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use benchlink_std::bench::MetricResult;

    fn status(text: &str) -> StatusInfo {
        StatusInfo {
            status_text: text.into(),
            create_time: "2026-11-27T10:00:00Z".parse().ok(),
            start_time: "2026-11-27T10:00:02Z".parse().ok(),
            finish_time: "2026-11-27T10:01:07Z".parse().ok(),
            reason: None,
        }
    }

    #[test]
    fn the_page_has_the_timeline_the_results_and_the_charts_and_nothing_from_elsewhere() {
        let mut results = BTreeMap::new();
        results.insert(
            "print<&>".to_owned(),
            MetricResult {
                kind: "counter".into(),
                value: "186".parse().ok(),
                stats: [("50", "3.5"), ("max", "9")]
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), v.parse().expect("a number")))
                    .collect(),
            },
        );
        results.insert(
            "dummy".to_owned(),
            MetricResult {
                kind: "histogram".into(),
                value: None,
                stats: [("min", "277"), ("999", "2015")]
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), v.parse().expect("a number")))
                    .collect(),
            },
        );
        let mut series = BTreeMap::new();
        series.insert("print".to_owned(), vec![(100, 1.0), (160, 5.0)]);
        series.insert("print.rps".to_owned(), vec![(100, 1.0), (160, 2.0)]);
        series.insert("errors".to_owned(), vec![(100, 0.0), (160, 0.0)]);
        let (html, charts) =
            page(7, &status("complete"), &Results(results), &series).expect("a page");
        assert_eq!(charts, 1);
        assert!(html.starts_with("<!DOCTYPE html>") && html.ends_with("</html>\n"));
        assert!(html.contains("<h1>Benchmark 7: complete</h1>"));
        for row in [
            "<tr><td>created</td><td>2026-11-27T10:00:00Z</td><td>00:00</td></tr>",
            "<tr><td>started</td><td>2026-11-27T10:00:02Z</td><td>00:02</td></tr>",
            "<tr><td>complete</td><td>2026-11-27T10:01:07Z</td><td>01:07</td></tr>",
        ] {
            assert!(html.contains(row), "{row}");
        }
        assert!(html.contains(
            "<th>statistics of</th><th>min</th><th>50</th><th>999</th><th>max</th></tr>"
        ));
        assert!(html.contains(
            "<tr><td>print&lt;&amp;&gt;</td><td>counter</td><td>186</td>\
             <td>rate (per second)</td><td></td><td>3.5</td><td></td><td>9</td></tr>"
        ));
        assert!(html.contains("<p class=\"note\">all zero: errors</p>"));
        assert_eq!(html.matches("<svg").count(), 1);
        assert!(html.contains("\nprint (counter)\n"), "the chart's title");
        for outside in [
            "<script", "<link", "<img", "src=", "href=", "url(", "@import",
        ] {
            assert!(!html.contains(outside), "{outside}");
        }
    }

    #[test]
    fn a_running_benchmark_has_no_results_and_no_end_yet() {
        let mut running = status("running");
        running.finish_time = None;
        let (html, charts) =
            page(3, &running, &Results::default(), &BTreeMap::new()).expect("a page");
        assert_eq!(charts, 0);
        assert!(html.contains("<tr><td>ended</td><td>not yet</td><td></td></tr>"));
        assert!(html.contains("No results yet"));
        assert!(html.contains("No metric samples."));
        assert!(!html.contains("<svg"));
    }
}
