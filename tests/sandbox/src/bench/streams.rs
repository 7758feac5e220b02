//! The streaming endpoints: `/log` and `/userlog` (the stored zlib file, chunked in
//! ≤ 1024-byte pieces while the benchmark's process lives, Content-Length afterwards),
//! `/data` (one chunk per metric line, after waiting for a streamable status) and
//! `/server_logs` (one chunk per server log line, until the client goes away).

use std::io;

use super::config::LogCompression;
use super::endpoints::reply_err;
use super::erlang;
use super::error::ApiError;
use super::http::{Conn, Flow};
use super::query::{QValue, Query};
use super::server_log::Severity;
use super::state::Shared;

/// Largest piece of a live log sent as one chunk (the real server's file read size).
const LOG_CHUNK: usize = 1024;

fn encoding(shared: &Shared) -> String {
    match shared.config.log_compression {
        LogCompression::Deflate => "deflate".to_owned(),
        LogCompression::Identity => "identity".to_owned(),
    }
}

/// `/log` (`user == false`) and `/userlog`.
pub(crate) fn log(
    shared: &Shared,
    conn: &mut Conn,
    id: i64,
    user: bool,
    ka: bool,
) -> io::Result<Flow> {
    let headers = [
        ("content-encoding", encoding(shared)),
        ("content-type", "text/plain".to_owned()),
    ];
    {
        let st = shared.lock();
        let Some(b) = st.benches.get(&id) else {
            drop(st);
            return reply_err(conn, &ApiError::no_bench(id), ka);
        };
        if !b.process_alive {
            let file = if user {
                b.user_log.bytes()
            } else {
                b.log.bytes()
            }
            .to_vec();
            drop(st);
            return conn.respond(200, &headers, &file, ka);
        }
    }
    conn.start_chunked(&headers, ka)?;
    let mut pos = 0usize;
    loop {
        let mut st = shared.lock();
        // Like the real reader, the "last pass" flag is taken before reading.
        let (last_pass, piece) = match st.benches.get(&id) {
            None => (true, Vec::new()),
            Some(b) => {
                let file = if user {
                    b.user_log.bytes()
                } else {
                    b.log.bytes()
                };
                let end = file.len().min(pos + LOG_CHUNK);
                (
                    !b.process_alive || shared.is_shutdown(),
                    file.get(pos..end).unwrap_or(&[]).to_vec(),
                )
            }
        };
        if !piece.is_empty() {
            drop(st);
            pos += piece.len();
            conn.chunk(&piece)?;
            continue;
        }
        if last_pass {
            drop(st);
            break;
        }
        st = shared.wait(st, shared.config.speed.poll);
        drop(st);
    }
    conn.end_chunked(ka)
}

/// Statuses after which `/data` answers (the real server waits for one of them before
/// sending any header); `failed` is missing on purpose: the real server never answers.
fn streamable(status: &str) -> bool {
    matches!(
        status,
        "running" | "stopped" | "complete" | "crashed" | "zombie"
    )
}

/// `/data`.
pub(crate) fn data(shared: &Shared, conn: &mut Conn, id: i64, ka: bool) -> io::Result<Flow> {
    // Wait, before any header, for a status with data.
    let names: Vec<String> = loop {
        let mut st = shared.lock();
        let Some(b) = st.benches.get_mut(&id) else {
            drop(st);
            return reply_err(conn, &ApiError::no_bench(id), ka);
        };
        let failed = b.status == "failed" || b.crashed;
        if streamable(b.status) || (failed && !shared.config.quirks.data_hangs_on_failed) {
            break b.metrics.series.iter().map(|(n, _)| n.clone()).collect();
        }
        b.data_waits += 1;
        let st = shared.wait(st, shared.config.speed.poll);
        drop(st);
        if shared.is_shutdown() || conn.peer_gone() {
            conn.shutdown();
            return Ok(Flow::Close);
        }
    };
    conn.start_chunked(
        &[
            ("content-encoding", "identity".to_owned()),
            ("content-type", "text/plain".to_owned()),
        ],
        ka,
    )?;
    if shared.config.data_flood > 0 {
        let flood = shared.data_flood();
        conn.raw_chunks(&flood)?;
    }
    let mut positions = vec![0usize; names.len()];
    loop {
        let mut st = shared.lock();
        let Some(b) = st.benches.get(&id) else { break };
        let last_pass = !b.process_alive || shared.is_shutdown();
        let mut lines = Vec::new();
        for (name, pos) in names.iter().zip(positions.iter_mut()) {
            let points = b.metrics.points(name);
            for (ts, value) in points.get(*pos..).unwrap_or(&[]) {
                lines.push(format!("{ts}\t{name}\t{value}\n"));
            }
            *pos = points.len();
        }
        if lines.is_empty() {
            if last_pass {
                break;
            }
            drop(st);
            conn.flush_chunks()?;
            st = shared.lock();
            st = shared.wait(st, shared.config.speed.poll);
            drop(st);
            continue;
        }
        drop(st);
        for line in lines {
            conn.chunk_buffered(line.as_bytes())?;
        }
    }
    conn.end_chunked(ka)
}

/// `/server_logs?severity=S`: never ends by itself.
pub(crate) fn server_logs(
    shared: &Shared,
    conn: &mut Conn,
    q: &Query,
    ka: bool,
) -> io::Result<Flow> {
    let min = match q.first("severity") {
        None => Severity::Info,
        Some(v) => match Severity::parse(v.text()).filter(|_| matches!(v, QValue::Str(_))) {
            Some(s) => s,
            None => {
                let shown = match v {
                    QValue::Str(s) => erlang::binary(s.as_bytes()),
                    QValue::True => "true".to_owned(),
                };
                return reply_err(
                    conn,
                    &ApiError::badarg(format!("Invalid severity: {shown}")),
                    ka,
                );
            }
        },
    };
    let mut pos = shared.lock().server_log.next_seq();
    conn.start_chunked(&[("content-type", "text/plain".to_owned())], ka)?;
    loop {
        if shared.is_shutdown() {
            let _ = conn.end_chunked(false);
            return Ok(Flow::Close);
        }
        let mut st = shared.lock();
        let (lines, next) = st.server_log.since(pos, min);
        pos = next;
        if lines.is_empty() {
            st = shared.wait(st, shared.config.speed.poll);
            drop(st);
            if conn.peer_gone() {
                return Ok(Flow::Close);
            }
            continue;
        }
        drop(st);
        for line in lines {
            conn.chunk(format!("{line}\r\n").as_bytes())?;
        }
    }
}
