//! Resuming `/data` without losing or repeating a sample.
//!
//! The benchmark server streams each metric's file from its first line on every `/data`
//! request, the metrics interleaved in any order but each metric's lines in file order.
//! So "where the agent was" is, per metric, how many lines it has taken: a new request
//! skips that many lines of each metric and takes the rest. That is exact whatever the
//! interleaving, and it survives a dropped connection, a silent server and the agent
//! breaking off the stream on purpose (when its publish queue is full).

use heapless::{String, Vec};

/// Longest metric name tracked (the server's names are dotted paths such as
/// `workers.pool1.started.rps`).
pub const MAX_NAME: usize = 64;

/// What to do with one `/data` line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Line {
    /// Already taken by an earlier request: skip it.
    Seen,
    /// New: take it (then call [`Cursor::take`]).
    New,
    /// A metric the table has no room for, or a name longer than [`MAX_NAME`]: the line
    /// cannot be resumed exactly, so the agent reports it instead of guessing.
    Untracked,
}

struct Metric {
    name: String<MAX_NAME>,
    /// Lines taken over every request.
    taken: u32,
    /// Lines of this metric met in the current request.
    met: u32,
}

/// Per-metric line counts for up to `N` metrics.
///
/// ```
/// use benchlink_device_agent::resume::{Cursor, Line};
/// let mut cursor: Cursor<4> = Cursor::new();
/// // First request: two lines of `a`, the connection drops.
/// for _ in 0..2 {
///     assert_eq!(cursor.classify("a"), Line::New);
///     cursor.take("a");
/// }
/// // Second request: `a` starts again from its first line.
/// cursor.restart();
/// assert_eq!(cursor.classify("a"), Line::Seen);
/// assert_eq!(cursor.classify("b"), Line::New);
/// assert_eq!(cursor.classify("a"), Line::Seen);
/// assert_eq!(cursor.classify("a"), Line::New);
/// ```
pub struct Cursor<const N: usize> {
    metrics: Vec<Metric, N>,
}

impl<const N: usize> Default for Cursor<N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const N: usize> Cursor<N> {
    /// Nothing taken yet.
    pub const fn new() -> Self {
        Cursor {
            metrics: Vec::new(),
        }
    }

    /// A new `/data` request starts: every metric is read again from its first line.
    pub fn restart(&mut self) {
        for m in &mut self.metrics {
            m.met = 0;
        }
    }

    /// Classifies the next line of metric `name` in the current request (and counts it
    /// as met).
    pub fn classify(&mut self, name: &str) -> Line {
        let Some(m) = self.entry(name) else {
            return Line::Untracked;
        };
        m.met = m.met.saturating_add(1);
        if m.met <= m.taken {
            Line::Seen
        } else {
            Line::New
        }
    }

    /// The line just classified [`Line::New`] was taken (it is in the publish queue).
    /// A line classified `New` and not taken must end the request (break off the
    /// stream): the next request, after [`restart`](Self::restart), meets it again.
    pub fn take(&mut self, name: &str) {
        if let Some(m) = self.entry(name) {
            m.taken = m.met;
        }
    }

    /// Lines taken so far, all metrics together.
    pub fn taken(&self) -> u32 {
        self.metrics.iter().map(|m| m.taken).sum()
    }

    /// The metrics seen so far.
    pub fn metrics(&self) -> usize {
        self.metrics.len()
    }

    fn entry(&mut self, name: &str) -> Option<&mut Metric> {
        let at = match self.metrics.iter().position(|m| m.name == name) {
            Some(at) => at,
            None => {
                let name = String::try_from(name).ok()?;
                self.metrics
                    .push(Metric {
                        name,
                        taken: 0,
                        met: 0,
                    })
                    .ok()?;
                self.metrics.len() - 1
            }
        };
        self.metrics.get_mut(at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Lines of metrics `a`, `b`, `c` interleaved differently on every request: each
    /// request breaks off after a few new lines; the union of what was taken is every
    /// line once.
    #[test]
    fn any_interleaving_resumes_exactly() {
        let lines: [(&str, u32); 9] = [
            ("a", 0),
            ("b", 0),
            ("a", 1),
            ("c", 0),
            ("b", 1),
            ("a", 2),
            ("c", 1),
            ("b", 2),
            ("c", 2),
        ];
        let mut cursor: Cursor<3> = Cursor::new();
        let mut got = std::vec::Vec::new();
        for round in 0..20 {
            cursor.restart();
            // A different interleaving that keeps each metric's order: rotate which
            // metric goes first.
            let mut order: std::vec::Vec<_> = lines.to_vec();
            order.sort_by_key(|(name, i)| (*i, (name.as_bytes()[0] as usize + round) % 3));
            let mut new = 0;
            for (name, i) in order {
                match cursor.classify(name) {
                    Line::Seen => {}
                    Line::New if new < 2 => {
                        cursor.take(name);
                        got.push((name, i));
                        new += 1;
                    }
                    // Broken off: the rest is left to the next request.
                    Line::New => break,
                    Line::Untracked => panic!("tracked"),
                }
            }
        }
        got.sort();
        let mut want = lines.to_vec();
        want.sort();
        assert_eq!(got, want);
        assert_eq!(cursor.taken(), 9);
    }

    #[test]
    fn a_full_table_or_a_long_name_is_untracked_not_guessed() {
        let mut cursor: Cursor<1> = Cursor::new();
        assert_eq!(cursor.classify("a"), Line::New);
        assert_eq!(cursor.classify("b"), Line::Untracked);
        let long = std::string::String::from("x").repeat(MAX_NAME + 1);
        let mut cursor: Cursor<4> = Cursor::new();
        assert_eq!(cursor.classify(&long), Line::Untracked);
    }
}
