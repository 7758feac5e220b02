//! `benchlink bench report ID -o report.html`: the dashboard's page of a benchmark
//! frozen into one file — its status timeline, its metrics grouped into charts with the
//! pointer readout, the tail of its log, its results table — that reads the same offline
//! and years later: the style, the script and the charts (inline SVG) are in the page,
//! and nothing in it loads from elsewhere (no links, fonts, images or script files).

use std::ops::ControlFlow;
use std::path::Path;
use std::time::{Duration, Instant};

use benchlink_std::bench::{Available, BenchClient};

use super::dashboard::{frozen_benchmark, Board, Meta};
use super::plot::collect;
use crate::fail::Fail;

/// How long the log of a running benchmark may be silent before the report is written
/// with what came (its replay comes at once, then it only trickles), and the longest
/// the log is read.
const LOG_QUIET: Duration = Duration::from_millis(500);
const LOG_BUDGET: Duration = Duration::from_secs(10);

/// Reads benchmark `id`'s status, results, samples and log and writes its report to
/// `path`; returns the number of charts in it.
pub(crate) fn report(client: BenchClient, id: u64, path: &Path) -> Result<usize, Fail> {
    let mut client = client;
    let board = Board::new();
    board.add(id, Meta::default());
    let status = client.status(id)?;
    board.set_results(id, client.results(id)?);
    board.set_status(id, status.clone());
    let client = read_log(&board, client, id)?;
    let series = collect(client, id, &status)?;
    for (name, points) in &series {
        board.push_samples(id, points.iter().map(|(t, v)| (name.as_str(), *t, *v)));
    }
    let state = board.lock();
    let (html, charts) = match state.benches.get(&id) {
        Some(bench) => frozen_benchmark(id, bench),
        None => return Err(Fail(1, format!("benchmark {id} was forgotten while read"))),
    };
    std::fs::write(path, html).map_err(|e| Fail(1, format!("{}: {e}", path.display())))?;
    Ok(charts)
}

/// The log's lines onto `board` (which keeps the tail), until it ends, is quiet for
/// [`LOG_QUIET`] or was read for [`LOG_BUDGET`]; gives the client back for `/data`, on
/// the same connection.
fn read_log(board: &Board, client: BenchClient, id: u64) -> Result<BenchClient, Fail> {
    let mut client = client.with_stream_idle_timeout(Some(LOG_QUIET));
    read_log_with(board, &mut client, id)?;
    Ok(client)
}

fn read_log_with(board: &Board, client: &mut BenchClient, id: u64) -> Result<(), Fail> {
    let mut stream = client.log(id)?.silence_ends();
    let until = Instant::now() + LOG_BUDGET;
    let mut batch: Vec<String> = Vec::new();
    loop {
        let state = stream.read_available(|line| {
            if let Ok(text) = line {
                batch.push(text.to_owned());
            }
            ControlFlow::Continue(())
        });
        board.push_log(id, batch.iter().map(String::as_str));
        batch.clear();
        match state {
            Ok(Available::Idle) if Instant::now() < until => {}
            Ok(_) => return Ok(()),
            Err(e) if e.is_timeout() => return Ok(()),
            Err(e) => return Err(e.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::dashboard::{frozen_benchmark, Bench};
    use benchlink_std::bench::{MetricResult, Results, StatusInfo};
    use std::collections::BTreeMap;

    fn page(
        id: u64,
        status: &StatusInfo,
        results: &Results,
        series: &BTreeMap<String, super::super::charts::Points>,
    ) -> Option<(String, usize)> {
        let bench = Bench {
            status: Some(status.clone()),
            results: Some(results.clone()),
            series: series.clone(),
            followed: true,
            ..Bench::default()
        };
        Some(frozen_benchmark(id, &bench))
    }

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
        // One script, inside: the pointer readout. Nothing from elsewhere.
        assert_eq!(html.matches("<script").count(), 1);
        assert!(html.contains("<script>\n"));
        for outside in ["<link", "<img", "src=", "href=", "url(", "@import"] {
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
        assert!(html.contains("No metric samples yet."));
        assert!(!html.contains("<svg"));
    }
}
