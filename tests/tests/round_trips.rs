//! The round trips `BenchClient` costs across a delayed link: every request the local
//! benchmark server handles is counted by path, and every connection it accepts, with
//! the sandbox's latency relay between them. One request per call, one connection kept
//! alive across calls and streams, and no `/status` before `/data` when the caller
//! already knows the status. Counts only: how long a round trip takes is the relay's
//! business and never asserted.

use std::collections::BTreeMap;
use std::time::Duration;

use benchlink_sandbox::bench::BenchServer;
use benchlink_sandbox::relay::Relay;
use benchlink_std::bench::{BenchClient, StartOptions};
use benchlink_tests::{
    client, fast_server, hello, live_server, live_speed, server_with, wait_until,
};

/// Each direction of the relay: enough to be a link, not a loopback shortcut, and short
/// enough to keep the tests quick.
const DELAY: Duration = Duration::from_millis(5);

/// The server behind a latency relay, and a client of the relay.
struct Link {
    server: BenchServer,
    // Kept for the connections it relays.
    _relay: Relay,
    client: BenchClient,
    /// The server's request counts when [`Link::calls`] last looked.
    seen: BTreeMap<String, u64>,
}

impl Link {
    fn new(server: BenchServer) -> Link {
        let relay = Relay::start(
            "127.0.0.1:0".parse().expect("address"),
            server.addr(),
            DELAY,
        )
        .expect("latency relay");
        let client = client(&relay.addr().to_string());
        Link {
            seen: server.requests(),
            server,
            _relay: relay,
            client,
        }
    }

    /// The requests the server handled since the last look, by path.
    fn calls(&mut self) -> Vec<(String, u64)> {
        let now = self.server.requests();
        let new = now
            .iter()
            .filter_map(|(path, n)| {
                let before = self.seen.get(path).copied().unwrap_or(0);
                (*n > before).then(|| (path.clone(), n - before))
            })
            .collect();
        self.seen = now;
        new
    }

    /// Waits, on the server's own record (no request), until benchmark `id`'s status
    /// is one of `statuses`.
    fn wait_server_status(&self, id: u64, statuses: &[&str]) {
        wait_until(&format!("benchmark {id} in {statuses:?}"), || {
            self.server
                .benchmark(id)
                .is_some_and(|b| statuses.contains(&b.status.as_str()))
        });
    }

    /// Starts `hello.bdl` (one `/start`) and waits, on the server's record, until it is
    /// in one of `statuses`; its id.
    fn start_until(&mut self, statuses: &[&str]) -> u64 {
        let id = self
            .client
            .start(&hello(), &StartOptions::default())
            .expect("start");
        self.wait_server_status(id, statuses);
        id
    }

    fn connections(&self) -> u64 {
        self.server.stats().accepted
    }
}

fn one(path: &str) -> Vec<(String, u64)> {
    vec![(path.to_owned(), 1)]
}

#[test]
fn start_status_results_cost_one_request_each_on_one_connection() {
    let mut link = Link::new(fast_server());
    let id = link
        .client
        .start(&hello(), &StartOptions::default())
        .expect("start");
    assert_eq!(link.calls(), one("/start"));
    link.client.status(id).expect("status");
    assert_eq!(link.calls(), one("/status"));
    link.wait_server_status(id, &["complete"]);
    link.client.results(id).expect("results");
    assert_eq!(link.calls(), one("/results"));
    link.client.status(id).expect("status");
    assert_eq!(link.calls(), one("/status"));
    assert_eq!(link.connections(), 1, "one kept-alive connection");
}

#[test]
fn data_of_a_running_benchmark_whose_status_is_known_sends_no_status() {
    let mut link = Link::new(live_server());
    let id = link.start_until(&["running"]);
    let known = link.client.status(id).expect("status");
    assert_eq!(known.status_text, "running");
    assert_eq!(
        link.calls(),
        vec![("/start".into(), 1), ("/status".into(), 1)]
    );
    let samples = link
        .client
        .data_with_status(id, &known)
        .expect("data")
        .count();
    assert!(samples > 0, "the running benchmark reported samples");
    assert_eq!(link.calls(), one("/data"), "no /status before /data");
    // The stream read to its end leaves the connection for the next call.
    link.client.status(id).expect("status after the stream");
    assert_eq!(link.calls(), one("/status"));
    assert_eq!(link.connections(), 1, "one kept-alive connection");
}

#[test]
fn data_without_a_known_status_asks_once_when_the_benchmark_runs() {
    let mut link = Link::new(live_server());
    let id = link.start_until(&["running"]);
    assert_eq!(link.calls(), one("/start"));
    let samples = link.client.data(id).expect("data").count();
    assert!(samples > 0, "the running benchmark reported samples");
    // The guard's one /status (the real server would hold /data of a benchmark that
    // never runs), then the stream.
    assert_eq!(
        link.calls(),
        vec![("/data".into(), 1), ("/status".into(), 1)]
    );
    assert_eq!(link.connections(), 1, "one kept-alive connection");
}

#[test]
fn data_of_an_ended_benchmark_whose_status_is_known_sends_no_status() {
    let mut link = Link::new(fast_server());
    let id = link.start_until(&["complete"]);
    let known = link.client.status(id).expect("status");
    link.calls();
    let samples = link
        .client
        .data_with_status(id, &known)
        .expect("data")
        .count();
    assert!(samples > 0, "the benchmark reported samples");
    assert_eq!(link.calls(), one("/data"), "no /status before /data");
    assert_eq!(link.connections(), 1, "one kept-alive connection");
}

#[test]
fn data_of_a_failed_benchmark_whose_status_is_known_sends_nothing() {
    // As the real server: /data of a failed benchmark never answers.
    let mut link = Link::new(server_with(|c| {
        c.speed = live_speed();
        c.quirks.data_hangs_on_failed = true;
    }));
    let id = link.start_until(&["running"]);
    assert!(link.server.crash_benchmark(id), "crashed");
    link.wait_server_status(id, &["failed"]);
    let known = link.client.status(id).expect("status");
    assert_eq!(known.status_text, "failed");
    link.calls();
    let samples = link
        .client
        .data_with_status(id, &known)
        .expect("data")
        .count();
    assert_eq!(samples, 0, "an empty stream, not a hang");
    assert_eq!(link.calls(), vec![], "no request at all");
    assert_eq!(link.connections(), 1, "one kept-alive connection");
}
