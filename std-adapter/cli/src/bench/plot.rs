//! `benchlink bench plot` and `bench run --plot`: a benchmark's metrics from `/data`
//! drawn as an SVG file, grouped into charts as MZBench's dashboard groups them (see
//! [`super::charts`]) — the graphs benchmark users read, without opening a dashboard.
//!
//! A running benchmark is plotted as far as it got: `/data` replays every sample so far
//! at once and then only trickles, so reading stops when the stream ends or has been
//! quiet for [`QUIET`].

use std::collections::BTreeMap;
use std::ops::ControlFlow;
use std::path::Path;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use super::charts::{draw, group, time_span, Points};
use crate::fail::Fail;
use benchlink_std::bench::{Available, BenchClient, StatusInfo};

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

/// What a plot drew.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Drawn {
    /// Metric series read.
    pub(crate) metrics: usize,
    /// Charts drawn (the all-zero ones are named, not drawn).
    pub(crate) charts: usize,
}

/// Reads benchmark `id`'s samples and writes the SVG of the `targets` metrics (all when
/// there are none) to `path`; `status` is the benchmark's, just read (see [`collect`]).
/// A target the benchmark does not have is said on stderr, or is an error when no
/// target is left.
pub(crate) fn plot(
    client: BenchClient,
    id: u64,
    status: &StatusInfo,
    targets: &[String],
    path: &Path,
) -> Result<Drawn, Fail> {
    let mut series = collect(client, id, status)?;
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
    let charts = group(&series);
    let svg = draw(&charts, true, time_span(&series)).map_err(drawing_failed)?;
    std::fs::write(path, svg).map_err(|e| Fail(1, format!("{}: {e}", path.display())))?;
    Ok(Drawn {
        metrics: series.len(),
        charts: charts.charts.len(),
    })
}

/// The failure of a drawing backend, as the command reports it.
pub(crate) fn drawing_failed(e: Box<dyn std::error::Error>) -> Fail {
    Fail(1, format!("cannot draw the charts: {e}"))
}

/// The samples of `/data`, by metric name. `status` is the benchmark's, read by the
/// caller (which has it anyway: `bench run` waited for it, `report` prints it): it sets
/// the patience, and `/data` goes out without another `/status` round trip before it.
pub(crate) fn collect(
    client: BenchClient,
    id: u64,
    status: &StatusInfo,
) -> Result<BTreeMap<String, Points>, Fail> {
    let running = !status.status().is_final();
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
    // Quiet for a while means caught up, not cut: the stream ends there.
    let mut stream = client.data_with_status(id, status)?.silence_ends();
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

#[cfg(test)]
mod tests {
    use super::{Collector, Cut};
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
}
