//! The stream side of the async client: a blocking task owns a pooled client and its
//! blocking [`LineStream`](blocking::LineStream), and hands the items to the async
//! [`LineStream`] through a bounded channel.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::task::{ready, Context, Poll};

use futures_core::Stream;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use super::Pool;
use crate::bench::{self as blocking, Error, ErrorKind, OwnedLine};

/// How many items a stream's reader may be ahead of its consumer. Bounded, so that a
/// slow consumer stops the reading and TCP slows the server, instead of a queue growing.
const STREAM_AHEAD: usize = 64;

/// Opens a stream with `open` on a pooled client on the blocking pool, which then
/// forwards its items until it ends or the receiver is dropped; returns once it is
/// open (or failed to open).
pub(super) async fn open<F, O>(
    pool: &Arc<Pool>,
    path: &'static str,
    open: O,
) -> Result<LineStream<F::Owned>, Error>
where
    F: OwnedLine + 'static,
    F::Owned: Send + 'static,
    O: for<'c> FnOnce(&'c mut blocking::BenchClient) -> Result<blocking::LineStream<'c, F>, Error>
        + Send
        + 'static,
{
    let shared = Arc::clone(pool);
    let (items, received) = mpsc::channel(STREAM_AHEAD);
    let (opened, open_result) = oneshot::channel();
    let resumed = Arc::new(AtomicU32::new(0));
    let counter = Arc::clone(&resumed);
    let task = tokio::task::spawn_blocking(move || {
        let mut client = shared.take();
        let stopped = match open(&mut client) {
            Err(e) => opened.send(Err(e)).is_err(),
            Ok(stream) => opened.send(Ok(())).is_err() || forward(stream, &items, &counter),
        };
        // A stream left before its end leaves its connection unusable: dropping the
        // client closes it now, not at the client's next use.
        if !stopped {
            shared.give_back(client);
        }
    });
    match open_result.await {
        Ok(Ok(())) => Ok(LineStream {
            items: received,
            task: Some(task),
            resumed,
            path,
            pool: Arc::clone(pool),
        }),
        Ok(Err(e)) => Err(e),
        // The task ended without saying: it panicked (or the runtime shuts down).
        Err(_) => Err(match task.await {
            Err(e) => pool.lost(e, path),
            Ok(()) => Error::from(ErrorKind::Task("the stream never opened".into())),
        }),
    }
}

/// Hands `stream`'s items to `items` until the stream ends (false) or the receiver is
/// gone (true), keeping `resumed` up to date before each item goes out.
fn forward<F: OwnedLine>(
    mut stream: blocking::LineStream<'_, F>,
    items: &mpsc::Sender<Result<F::Owned, Error>>,
    resumed: &AtomicU32,
) -> bool {
    loop {
        let item = stream.next();
        resumed.store(stream.resumptions(), Ordering::Release);
        let Some(item) = item else { return false };
        // Blocks while the channel is full: the reading waits for the consumer.
        if items.blocking_send(item).is_err() {
            return true;
        }
    }
}

/// The items of a log or metric stream (`T`: [`Sample`](crate::bench::Sample) for `/data`, `String` for the
/// logs), read on tokio's blocking pool by the blocking [`LineStream`](blocking::LineStream)
/// and handed over through a bounded channel: a slow consumer stops the reading. A line
/// that cannot be decoded is an `Err` item and the stream goes on; a failure that could
/// not be resumed is a last `Err`.
///
/// Dropping it stops the reading and closes its connection (when the reading thread
/// next has a line to hand over). For "what has come so far", wrap the next item in
/// [`tokio::time::timeout`] and drop the stream when it expires.
///
/// ```no_run
/// # async fn f() -> Result<(), benchlink_std::bench::Error> {
/// use futures_core::Stream;
/// let client = benchlink_std::tokio::bench::BenchClient::from_env()?;
/// let mut log = client.log(7).await?;
/// // Through the Stream trait (what StreamExt::next and the combinators use).
/// while let Some(line) = std::future::poll_fn(|cx| std::pin::Pin::new(&mut log).poll_next(cx)).await {
///     println!("{}", line?);
/// }
/// # Ok(()) }
/// ```
pub struct LineStream<T> {
    items: mpsc::Receiver<Result<T, Error>>,
    /// The reading task: its end is the stream's end, and a panic there a last error.
    task: Option<JoinHandle<()>>,
    resumed: Arc<AtomicU32>,
    path: &'static str,
    pool: Arc<Pool>,
}

impl<T> LineStream<T> {
    /// The next item, `None` at the end: [`Stream::poll_next`] as an `async fn`, for
    /// callers without a stream-combinator crate (`StreamExt::next` does the same).
    ///
    /// # Cancel safety
    /// Cancel safe: an item is taken only when the future completes.
    ///
    /// ```no_run
    /// # async fn f() -> Result<(), benchlink_std::bench::Error> {
    /// let client = benchlink_std::tokio::bench::BenchClient::from_env()?;
    /// let mut userlog = client.userlog(7).await?;
    /// while let Some(line) = userlog.next().await {
    ///     println!("{}", line?);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn next(&mut self) -> Option<Result<T, Error>> {
        std::future::poll_fn(|cx| Pin::new(&mut *self).poll_next(cx)).await
    }

    /// Times the stream was cut and resumed so far (counted before each item is
    /// handed over, so it includes the resumptions before the items received).
    pub fn resumptions(&self) -> u32 {
        self.resumed.load(Ordering::Acquire)
    }
}

impl<T> fmt::Debug for LineStream<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LineStream")
            .field("request", &self.path)
            .field("resumptions", &self.resumptions())
            .finish_non_exhaustive()
    }
}

impl<T> Stream for LineStream<T> {
    type Item = Result<T, Error>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        if let Some(item) = ready!(this.items.poll_recv(cx)) {
            return Poll::Ready(Some(item));
        }
        // The channel closed: the stream ends when its task has (its client back in the
        // pool), with the task's panic as a last error rather than a silent end.
        let Some(task) = this.task.as_mut() else {
            return Poll::Ready(None);
        };
        let ended = ready!(Pin::new(task).poll(cx));
        this.task = None;
        Poll::Ready(ended.err().map(|e| Err(this.pool.lost(e, this.path))))
    }
}
