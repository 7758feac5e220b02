//! The server's own log, which `/server_logs` streams: every message from the moment of
//! the request, at or above the requested severity.

use std::collections::VecDeque;

use super::clock;

/// Lager severities, lowest first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Severity {
    Debug,
    Info,
    Notice,
    Warning,
    Error,
    Critical,
    Alert,
    Emergency,
}

impl Severity {
    /// Parses a `severity` query value.
    pub(crate) fn parse(s: &str) -> Option<Severity> {
        Some(match s {
            "debug" => Severity::Debug,
            "info" => Severity::Info,
            "notice" => Severity::Notice,
            "warning" => Severity::Warning,
            "error" => Severity::Error,
            "critical" => Severity::Critical,
            "alert" => Severity::Alert,
            "emergency" => Severity::Emergency,
            _ => return None,
        })
    }

    /// The name as lager prints it.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Severity::Debug => "debug",
            Severity::Info => "info",
            Severity::Notice => "notice",
            Severity::Warning => "warning",
            Severity::Error => "error",
            Severity::Critical => "critical",
            Severity::Alert => "alert",
            Severity::Emergency => "emergency",
        }
    }
}

/// How many recent lines are kept for slow `/server_logs` readers.
const KEEP: usize = 4096;

/// A bounded ring of numbered server log lines.
#[derive(Debug, Default)]
pub(crate) struct ServerLog {
    lines: VecDeque<(u64, Severity, String)>,
    next_seq: u64,
}

impl ServerLog {
    /// Records a message from process `pid`; returns the formatted line
    /// (`time [severity] <pid> message`, without the line end).
    pub(crate) fn push(&mut self, severity: Severity, pid: &str, message: &str) -> String {
        let line = format!(
            "{} [{}] {} {}",
            clock::time_of_day(clock::now_ms()),
            severity.name(),
            pid,
            message
        );
        if self.lines.len() >= KEEP {
            self.lines.pop_front();
        }
        self.lines
            .push_back((self.next_seq, severity, line.clone()));
        self.next_seq += 1;
        line
    }

    /// The sequence number the next message will get: a reader starts here.
    pub(crate) fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// Lines numbered `from` or later at or above `min`, and the next position.
    pub(crate) fn since(&self, from: u64, min: Severity) -> (Vec<String>, u64) {
        let lines = self
            .lines
            .iter()
            .filter(|(seq, sev, _)| *seq >= from && *sev >= min)
            .map(|(_, _, line)| line.clone())
            .collect();
        (lines, self.next_seq)
    }
}
