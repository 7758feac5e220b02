//! Feeding the dashboard from a benchmark server: which benchmarks there are, their
//! statuses while they run, and — for the ones a page shows — their `/data` and log as
//! the server streams them, with the client's resumption after cuts. Each follower is a
//! thread with a client of its own; what it reads goes onto the [`Board`].

use std::ops::ControlFlow;
use std::sync::Arc;
use std::time::Duration;

use benchlink_std::bench::{Available, BenchClient};

use super::board::Board;

/// How often running benchmarks' statuses are read, and new ids looked for.
const POLL: Duration = Duration::from_secs(1);
/// Benchmarks shown when the dashboard starts without ids: the newest ones.
const NEWEST: u64 = 20;
/// Statuses read per poll at most: a list of many running benchmarks is refreshed in
/// turns rather than all at once.
const STATUSES_PER_POLL: usize = 50;

/// Starts following the server behind `client` for `board`: the benchmarks `given`
/// (followed at once), the newest ones it has, and every new one it starts. Returns at
/// once; the work is on threads that live as long as the process.
pub(crate) fn watch_server(board: &Arc<Board>, client: BenchClient, given: &[u64]) {
    {
        let client = client.another();
        let weak = Arc::downgrade(board);
        board.on_follow(Box::new(move |id| {
            if let Some(board) = weak.upgrade() {
                follow(&board, &client, id);
            }
        }));
    }
    for id in given {
        board.want(*id);
    }
    let board = Arc::clone(board);
    let _ = std::thread::Builder::new()
        .name("dashboard-poll".into())
        .spawn(move || poll(&board, client));
}

/// Looks for new benchmarks and refreshes the statuses of the running ones, forever.
fn poll(board: &Board, mut client: BenchClient) {
    // The next id the server will give, once one benchmark was found.
    let mut next: Option<u64> = None;
    let mut turn = 0usize;
    loop {
        if next.is_none() {
            next = newest(&mut client).map(|newest| {
                for id in newest.saturating_sub(NEWEST - 1)..=newest {
                    if let Ok(status) = client.status(id) {
                        board.set_status(id, status);
                    }
                }
                newest + 1
            });
        }
        // New benchmarks: ids are given in order, so the next one is the one to ask for.
        if let Some(from) = next.as_mut() {
            while let Ok(status) = client.status(*from) {
                board.set_status(*from, status);
                *from += 1;
            }
        }
        // Running ones, in turns.
        let running: Vec<u64> = board
            .lock()
            .benches
            .iter()
            .filter(|(_, b)| !b.is_final())
            .map(|(id, _)| *id)
            .collect();
        let count = running.len();
        for id in running
            .into_iter()
            .cycle()
            .skip(turn % count.max(1))
            .take(count.min(STATUSES_PER_POLL))
        {
            match client.status(id) {
                Ok(status) => board.set_status(id, status),
                Err(e) => board.set_trouble(id, format!("status: {e}")),
            }
        }
        turn = turn.wrapping_add(STATUSES_PER_POLL);
        std::thread::sleep(POLL);
    }
}

/// The newest benchmark's id, when the server has any: ids start at 0 and grow by one,
/// so the last one is found by doubling, then halving. A server that does not answer
/// has none yet, as far as this round can tell.
fn newest(client: &mut BenchClient) -> Option<u64> {
    let mut exists = |id| client.status(id).is_ok();
    if !exists(0) {
        return None;
    }
    let mut low = 0u64;
    let mut high = 1u64;
    while high < 1 << 40 && exists(high) {
        low = high;
        high *= 2;
    }
    // `low` exists, `high` does not.
    while high - low > 1 {
        let mid = low + (high - low) / 2;
        if exists(mid) {
            low = mid;
        } else {
            high = mid;
        }
    }
    Some(low)
}

/// Follows benchmark `id`'s `/data` and log on two threads until they end.
fn follow(board: &Arc<Board>, client: &BenchClient, id: u64) {
    follow_data(board, client, id);
    follow_log(board, client, id);
}

/// Follows benchmark `id`'s `/data` on a thread of its own until it ends, then reads
/// the final status and the results.
fn follow_data(board: &Arc<Board>, client: &BenchClient, id: u64) {
    let data = {
        let (board, mut client) = (
            Arc::clone(board),
            client.another().with_stream_idle_timeout(None),
        );
        move || {
            let status = match client.status(id) {
                Ok(s) => s,
                Err(e) => return board.set_trouble(id, format!("status: {e}")),
            };
            board.set_status(id, status.clone());
            let mut stream = match client.data_with_status(id, &status) {
                Ok(s) => s,
                Err(e) => return board.set_trouble(id, format!("/data: {e}")),
            };
            let mut batch: Vec<(String, u64, f64)> = Vec::new();
            loop {
                let state = stream.read_available(|line| {
                    if let Ok(s) = line {
                        if let Ok(v) = s.value.as_str().parse::<f64>() {
                            batch.push((s.name.to_owned(), s.timestamp, v));
                        }
                    }
                    ControlFlow::Continue(())
                });
                board.push_samples(id, batch.iter().map(|(n, t, v)| (n.as_str(), *t, *v)));
                batch.clear();
                match state {
                    Ok(Available::Idle) => {}
                    Ok(Available::End | Available::Stopped) => break,
                    Err(e) => return board.set_trouble(id, format!("/data: {e}")),
                }
            }
            drop(stream);
            // The stream ends when the benchmark does: its final status and results.
            if let Ok(status) = client.status(id) {
                let over = status.status().is_final();
                board.set_status(id, status);
                if over {
                    if let Ok(results) = client.results(id) {
                        board.set_results(id, results);
                    }
                }
            }
        }
    };
    let _ = std::thread::Builder::new()
        .name(format!("dashboard-data-{id}"))
        .spawn(data);
}

/// Follows benchmark `id`'s log on a thread of its own until it ends.
pub(crate) fn follow_log(board: &Arc<Board>, client: &BenchClient, id: u64) {
    let log = {
        let (board, mut client) = (
            Arc::clone(board),
            client.another().with_stream_idle_timeout(None),
        );
        move || {
            let mut stream = match client.log(id) {
                Ok(s) => s,
                Err(e) => return board.set_trouble(id, format!("log: {e}")),
            };
            let mut batch: Vec<String> = Vec::new();
            loop {
                let state = stream.read_available(|line| {
                    match line {
                        Ok(text) => batch.push(text.to_owned()),
                        Err(benchlink_core::bench::LogLineError::NotUtf8 { line }) => {
                            batch.push(String::from_utf8_lossy(line).into_owned());
                        }
                        Err(e) => batch.push(format!("[benchlink: {e}]")),
                    }
                    ControlFlow::Continue(())
                });
                board.push_log(id, batch.iter().map(String::as_str));
                batch.clear();
                match state {
                    Ok(Available::Idle) => {}
                    Ok(Available::End | Available::Stopped) => break,
                    Err(e) => return board.set_trouble(id, format!("log: {e}")),
                }
            }
        }
    };
    let _ = std::thread::Builder::new()
        .name(format!("dashboard-log-{id}"))
        .spawn(log);
}
