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
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use plotters::prelude::*;

use crate::bench::Fail;
use benchlink_std::bench::{Available, BenchClient};

/// How long the `/data` stream of a finished benchmark may be silent before the plot is
/// drawn with what came (the stream itself ends only after the server's finalize
/// stages, which may take minutes).
const QUIET: Duration = Duration::from_secs(2);
/// The same for a running benchmark, whose stream goes on: the replay of the samples so
/// far comes in one burst, new samples only every metric interval.
const QUIET_RUNNING: Duration = Duration::from_millis(500);
/// Longest a running benchmark's `/data` is read: its replay comes at once, so a
/// stream still trickling after this is drawn as far as it got.
const BUDGET_RUNNING: Duration = Duration::from_secs(3);
/// The same for a finished benchmark, whose replay may be long.
const BUDGET: Duration = Duration::from_secs(60);
/// Samples read at most (about 16 bytes each).
const MAX_POINTS: usize = 1_000_000;
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
    let running = !client.status(id)?.status().is_final();
    let (quiet, budget) = if running {
        (QUIET_RUNNING, BUDGET_RUNNING)
    } else {
        (QUIET, BUDGET)
    };
    let now = Instant::now();
    let mut samples = Collector {
        series: BTreeMap::new(),
        points: 0,
        max_points: MAX_POINTS,
        // Unix seconds now: a running benchmark's sample after this is news, not replay.
        caught_up: running.then(|| {
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_secs())
        }),
        deadline: now + budget,
        cut: None,
    };
    let mut client = client.with_stream_idle_timeout(Some(quiet));
    let mut stream = client.data(id)?;
    loop {
        let state = stream.read_available(|line| match line {
            Ok(s) => samples.push(s.name, s.timestamp, s.value.as_str(), Instant::now()),
            Err(_) => ControlFlow::Continue(()),
        });
        match state {
            Ok(Available::Idle) if Instant::now() < samples.deadline => {}
            Ok(Available::Idle) => {
                samples.cut = Some(Cut::Budget);
                break;
            }
            Ok(Available::End | Available::Stopped) => break,
            // Quiet for a while: a running benchmark, drawn as far as it got.
            Err(e) if e.is_timeout() => break,
            Err(e) => return Err(e.into()),
        }
    }
    match samples.cut {
        Some(Cut::Points) => {
            eprintln!("warning: plotting the first {MAX_POINTS} samples of benchmark {id} only")
        }
        Some(Cut::Budget) => eprintln!(
            "warning: plotting what benchmark {id}'s /data sent in {}s only",
            budget.as_secs()
        ),
        None => {}
    }
    Ok(samples.series)
}

/// Why reading `/data` stopped before its end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cut {
    /// [`MAX_POINTS`] samples were read.
    Points,
    /// The time budget ran out (a stream that trickles or floods on).
    Budget,
}

/// The samples read so far, within bounds of memory and time.
struct Collector {
    series: BTreeMap<String, Points>,
    points: usize,
    max_points: usize,
    /// For a running benchmark: the unix second at which the replay is caught up.
    caught_up: Option<u64>,
    deadline: Instant,
    cut: Option<Cut>,
}

impl Collector {
    /// Takes one sample (values that are not finite numbers are skipped); `Break` when
    /// reading should stop.
    fn push(&mut self, name: &str, timestamp: u64, value: &str, now: Instant) -> ControlFlow<()> {
        if self.caught_up.is_some_and(|t| timestamp > t) {
            return ControlFlow::Break(());
        }
        if self.points >= self.max_points {
            self.cut = Some(Cut::Points);
            return ControlFlow::Break(());
        }
        if now >= self.deadline {
            self.cut = Some(Cut::Budget);
            return ControlFlow::Break(());
        }
        let Some(value) = value.parse::<f64>().ok().filter(|v| v.is_finite()) else {
            return ControlFlow::Continue(());
        };
        match self.series.get_mut(name) {
            Some(points) => points.push((timestamp, value)),
            None => {
                self.series
                    .insert(name.to_owned(), vec![(timestamp, value)]);
            }
        }
        self.points += 1;
        ControlFlow::Continue(())
    }
}

/// At most about `2 * buckets` points with the same outline: the points split into
/// `buckets` runs, each drawn as its lowest and highest point in time order, so that
/// spikes survive. The SVG stays small however long the benchmark ran.
fn decimate(points: &[(u64, f64)], buckets: usize) -> Vec<(u64, f64)> {
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
            let line = decimate(points, PANEL.0 as usize)
                .into_iter()
                .map(|(t, v)| (t.saturating_sub(origin) as f64, v));
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

#[cfg(test)]
mod tests {
    use super::{decimate, Collector, Cut};
    use std::collections::BTreeMap;
    use std::ops::ControlFlow;
    use std::time::{Duration, Instant};

    fn collector(max_points: usize, caught_up: Option<u64>, now: Instant) -> Collector {
        Collector {
            series: BTreeMap::new(),
            points: 0,
            max_points,
            caught_up,
            deadline: now + Duration::from_secs(1),
            cut: None,
        }
    }

    #[test]
    fn collecting_stops_at_the_point_budget_and_at_news() {
        let now = Instant::now();
        let mut c = collector(3, None, now);
        for t in 0..3 {
            assert_eq!(c.push("m", t, "1.5", now), ControlFlow::Continue(()));
        }
        assert_eq!(c.push("m", 3, "1", now), ControlFlow::Break(()));
        assert_eq!(c.cut, Some(Cut::Points));
        assert_eq!(c.series["m"].len(), 3);

        let mut c = collector(10, Some(100), now);
        assert_eq!(c.push("m", 100, "1", now), ControlFlow::Continue(()));
        assert_eq!(c.push("m", 101, "1", now), ControlFlow::Break(()), "news");
        assert_eq!(c.cut, None, "caught up is no cut");

        let mut c = collector(10, None, now);
        assert_eq!(c.push("m", 1, "nan", now), ControlFlow::Continue(()));
        assert_eq!(c.push("m", 1, "text", now), ControlFlow::Continue(()));
        assert!(c.series.is_empty(), "nothing kept: {:?}", c.series);
        let late = now + Duration::from_secs(2);
        assert_eq!(c.push("m", 1, "2", late), ControlFlow::Break(()));
        assert_eq!(c.cut, Some(Cut::Budget));
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
}
