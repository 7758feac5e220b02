//! The bounded pool of threads that serve complete requests. The event loop reads
//! requests and queues them here; a worker writes the response (or the whole stream)
//! with blocking writes and hands a keep-alive connection back to the loop. Workers are
//! started as requests need them, up to
//! [`BenchServerConfig::workers`](super::BenchServerConfig::workers); beyond that,
//! requests wait in arrival order.

use std::collections::VecDeque;
use std::net::{Shutdown, TcpStream};
use std::panic::{self, AssertUnwindSafe};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::{self, JoinHandle};

use super::config::Fault;
use super::endpoints;
use super::http::{Conn, Flow, Request};
use super::listener::Net;
use super::state::Shared;

/// A complete request and its connection.
pub(crate) struct Job {
    pub(crate) id: u64,
    pub(crate) stream: TcpStream,
    pub(crate) request: Request,
    /// Bytes already read after the request (pipelined requests).
    pub(crate) pending: Vec<u8>,
}

#[derive(Default)]
struct Queue {
    jobs: VecDeque<Job>,
    idle: usize,
    threads: Vec<JoinHandle<()>>,
}

/// The pool.
pub(crate) struct Pool {
    queue: Mutex<Queue>,
    ready: Condvar,
    max: usize,
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pool").field("max", &self.max).finish()
    }
}

impl Pool {
    pub(crate) fn new(max: usize) -> Pool {
        Pool {
            queue: Mutex::new(Queue::default()),
            ready: Condvar::new(),
            max: max.max(1),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Queues a job, starting a worker if none is idle and the pool is not full.
    pub(crate) fn submit(self: &Arc<Self>, job: Job, shared: &Arc<Shared>, net: &Arc<Net>) {
        let mut q = self.lock();
        q.jobs.push_back(job);
        // Idle workers may not have woken for earlier jobs yet: count them against the
        // whole queue, or a job could wait behind a long stream while the pool has room.
        if q.jobs.len() > q.idle && q.threads.len() < self.max {
            let (pool, s, n) = (Arc::clone(self), Arc::clone(shared), Arc::clone(net));
            let spawned = thread::Builder::new()
                .name(format!("bench-worker-{}", q.threads.len()))
                .spawn(move || pool.work(&s, &n));
            match spawned {
                Ok(handle) => q.threads.push(handle),
                // The job waits for a running worker (there is at least one unless the
                // very first spawn failed, in which case the connection times out).
                Err(e) => log::warn!("bench server: cannot spawn a worker: {e}"),
            }
        }
        drop(q);
        self.ready.notify_one();
    }

    fn work(&self, shared: &Arc<Shared>, net: &Arc<Net>) {
        loop {
            let job = {
                let mut q = self.lock();
                loop {
                    if shared.is_shutdown() {
                        return;
                    }
                    if let Some(job) = q.jobs.pop_front() {
                        break job;
                    }
                    q.idle += 1;
                    q = self.ready.wait(q).unwrap_or_else(PoisonError::into_inner);
                    q.idle -= 1;
                }
            };
            let id = job.id;
            // A bug in an endpoint must not leak the connection's place under the cap
            // or the worker: the connection is closed and the worker goes on.
            let served = panic::catch_unwind(AssertUnwindSafe(|| serve(shared, net, job)));
            if served.is_err() {
                net.give_back(id, None);
            }
        }
    }

    /// Wakes every worker to see the shutdown flag; returns their handles to join.
    pub(crate) fn stop(&self) -> Vec<JoinHandle<()>> {
        let mut q = self.lock();
        q.jobs.clear();
        let threads = std::mem::take(&mut q.threads);
        drop(q);
        self.ready.notify_all();
        threads
    }
}

/// Answers one request and gives the connection back (or closes it).
fn serve(shared: &Arc<Shared>, net: &Net, job: Job) {
    let drip = match shared.config.fault {
        Some(Fault::Drip(pause)) => Some(pause),
        _ => None,
    };
    let Job {
        id,
        stream,
        request,
        pending,
    } = job;
    let mut conn = Conn::new(stream, drip, shared.config.write_timeout);
    let flow = endpoints::handle(shared, &mut conn, &request);
    let keep = matches!(flow, Ok(Flow::KeepAlive)) && request.keep_alive && !shared.is_shutdown();
    // The body's memory goes back to the budget now, not when the connection ends.
    drop(request);
    let stream = conn.into_stream();
    if keep {
        net.give_back(id, Some((stream, pending)));
    } else {
        let _ = stream.shutdown(Shutdown::Both);
        net.give_back(id, None);
    }
}
