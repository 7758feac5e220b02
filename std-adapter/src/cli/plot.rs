//! `benchlink bench plot` and `bench run --plot`: a benchmark's metrics from `/data`
//! drawn as an SVG file, one panel per metric (titled with the metric's name) against
//! seconds since the first sample — the graphs benchmark users read, without opening a
//! dashboard.
//!
//! A running benchmark is plotted as far as it got: `/data` replays every sample so far
//! at once and then only trickles, so reading stops when the stream ends or has been
//! quiet for [`QUIET`].

use std::collections::BTreeMap;
use std::ops::ControlFlow;
use std::path::Path;
use std::time::Duration;

use plotters::prelude::*;

use super::bench::Fail;
use crate::bench::{Available, BenchClient};

/// How long the `/data` stream of a finished benchmark may be silent before the plot is
/// drawn with what came (the stream itself ends only after the server's finalize
/// stages, which may take minutes).
const QUIET: Duration = Duration::from_secs(2);
/// The same for a running benchmark, whose stream goes on: the replay of the samples so
/// far comes in one burst, new samples only every metric interval.
const QUIET_RUNNING: Duration = Duration::from_millis(500);
/// Size of one panel in pixels.
const PANEL: (u32, u32) = (960, 240);

/// Samples of one metric: (unix seconds, value).
type Points = Vec<(u64, f64)>;

/// Reads benchmark `id`'s samples and writes the SVG of the `targets` metrics (all when
/// there are none) to `path`; returns the number of panels drawn. A target the benchmark
/// does not have is said on stderr, or is an error when no target is left.
pub(super) fn plot(
    client: BenchClient,
    id: u64,
    targets: &[String],
    path: &Path,
) -> Result<usize, Fail> {
    let mut series = collect(client, id)?;
    if series.is_empty() {
        return Err(Fail(
            1,
            format!("benchmark {id} has no metric samples to plot"),
        ));
    }
    if !targets.is_empty() {
        let known: Vec<String> = series.keys().cloned().collect();
        series.retain(|name, _| targets.contains(name));
        let missing: Vec<&str> = targets
            .iter()
            .filter(|t| !known.contains(t))
            .map(String::as_str)
            .collect();
        if !missing.is_empty() {
            let message = format!(
                "benchmark {id} has no metric {}; it has {}",
                missing.join(", "),
                known.join(", ")
            );
            if series.is_empty() {
                return Err(Fail(1, message));
            }
            eprintln!("warning: {message}");
        }
    }
    let svg = draw(&series).map_err(|e| Fail(1, format!("cannot draw the plot: {e}")))?;
    std::fs::write(path, svg).map_err(|e| Fail(1, format!("{}: {e}", path.display())))?;
    Ok(series.len())
}

/// The samples of `/data`, by metric name.
fn collect(client: BenchClient, id: u64) -> Result<BTreeMap<String, Points>, Fail> {
    let mut client = client;
    let quiet = if client.status(id)?.status().is_final() {
        QUIET
    } else {
        QUIET_RUNNING
    };
    let mut client = client.with_stream_idle_timeout(Some(quiet));
    let mut stream = client.data(id)?;
    let mut series: BTreeMap<String, Points> = BTreeMap::new();
    loop {
        let state = stream.read_available(|line| {
            if let Ok(s) = line {
                let value = s.value.as_str().parse::<f64>().ok();
                if let Some(value) = value.filter(|v| v.is_finite()) {
                    match series.get_mut(s.name) {
                        Some(points) => points.push((s.timestamp, value)),
                        None => {
                            series.insert(s.name.to_owned(), vec![(s.timestamp, value)]);
                        }
                    }
                }
            }
            ControlFlow::Continue(())
        });
        match state {
            Ok(Available::Idle) => {}
            Ok(Available::End | Available::Stopped) => return Ok(series),
            // Quiet for a while: a running benchmark, drawn as far as it got.
            Err(e) if e.is_timeout() => return Ok(series),
            Err(e) => return Err(e.into()),
        }
    }
}

/// The SVG text: the panels stacked top to bottom, in name order.
fn draw(series: &BTreeMap<String, Points>) -> Result<String, Box<dyn std::error::Error>> {
    let origin = series
        .values()
        .flat_map(|p| p.iter().map(|(t, _)| *t))
        .min()
        .unwrap_or(0);
    let end = series
        .values()
        .flat_map(|p| p.iter().map(|(t, _)| *t))
        .max()
        .unwrap_or(origin);
    let span = (end.saturating_sub(origin) as f64).max(1.0);
    let rows = u32::try_from(series.len()).unwrap_or(u32::MAX);
    let mut svg = String::new();
    {
        let size = (PANEL.0, PANEL.1.saturating_mul(rows));
        let root = SVGBackend::with_string(&mut svg, size).into_drawing_area();
        root.fill(&WHITE)?;
        for (panel, (name, points)) in root.split_evenly((series.len(), 1)).iter().zip(series) {
            let (low, high) = value_range(points);
            let mut chart = ChartBuilder::on(panel)
                .caption(name, ("sans-serif", 16))
                .margin(10)
                .x_label_area_size(30)
                .y_label_area_size(70)
                .build_cartesian_2d(0.0..span, low..high)?;
            chart
                .configure_mesh()
                .x_desc("seconds")
                .bold_line_style(BLACK.mix(0.1))
                .max_light_lines(0)
                .draw()?;
            let line = points
                .iter()
                .map(|(t, v)| (t.saturating_sub(origin) as f64, *v));
            chart.draw_series(LineSeries::new(line, &BLUE))?;
        }
        root.present()?;
    }
    Ok(svg)
}

/// The y range of a panel: the values' range with a margin, never empty.
fn value_range(points: &Points) -> (f64, f64) {
    let low = points.iter().map(|(_, v)| *v).fold(f64::INFINITY, f64::min);
    let high = points
        .iter()
        .map(|(_, v)| *v)
        .fold(f64::NEG_INFINITY, f64::max);
    if !low.is_finite() || !high.is_finite() {
        return (0.0, 1.0);
    }
    let margin = ((high - low) * 0.05).max(high.abs().max(1.0) * 0.05);
    (low - margin, high + margin)
}
