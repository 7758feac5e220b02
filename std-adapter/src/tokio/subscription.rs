//! What the async client's streams hand their readers: a [`Subscription`]'s messages and
//! state changes, fed by an observer on the runner, and a [`Search`]'s replies.
//!
//! A subscription's observer appends to a shared queue under a lock, once per received
//! batch; the reader swaps the whole queue out under the lock when its own runs dry and
//! takes from it lock-free, so a message costs a lock only per batch on either side.
//! Bytes not yet taken by the reader are counted in one atomic; past
//! [`SUBSCRIPTION_BUFFER`] the subscription presses on the engine (the runner stops
//! reading the socket) until the reader took half.

use std::collections::VecDeque;
use std::future::poll_fn;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll, Waker};

use benchlink_core::rtm::SubState;
use futures_core::Stream;

use crate::rtm::engine::Engine;
use crate::rtm::{Error, SubscriptionData, SubscriptionObserver};

/// Bytes of messages a [`Subscription`] keeps for its reader before the client stops
/// reading the socket (1 MiB; plus at most one socket read's worth already taken and
/// the batch being handed over): what a reader that falls behind costs.
pub const SUBSCRIPTION_BUFFER: usize = 1 << 20;

/// What a [`Subscription`] yields.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Update {
    /// One message of the channel (or view), in order.
    Message(Message),
    /// The subscription entered this state (`Subscribed` after each (re)subscribe;
    /// `Subscribing` after a drop or an `out_of_sync` resubscribe).
    State(SubState),
    /// The server skipped messages it no longer had (`fast_forward`).
    FastForward,
    /// The subscription failed (Advanced mode's `out_of_sync`, a refused subscribe):
    /// the reason in words. It stays failed until unsubscribed or subscribed again.
    Failed(String),
}

/// One received message: its JSON text and the position of the batch it came in. The
/// messages of one `rtm/subscription/data` share one copy of their text (one allocation
/// a batch, not one a message).
#[derive(Clone, PartialEq, Eq)]
pub struct Message {
    batch: Arc<str>,
    range: std::ops::Range<usize>,
    position: Option<Arc<str>>,
}

impl Message {
    /// The message, one JSON value as text (parse it with `serde_json::from_str`).
    pub fn json(&self) -> &str {
        self.batch.get(self.range.clone()).unwrap_or_default()
    }

    /// The position of its `rtm/subscription/data` (to resume from).
    pub fn position(&self) -> Option<&str> {
        self.position.as_deref()
    }
}

impl std::fmt::Debug for Message {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Message")
            .field("json", &self.json())
            .field("position", &self.position)
            .finish()
    }
}

/// A subscription's messages and state changes, in order: a [`Stream`] of [`Update`]s
/// that ends when the subscription is deleted (unsubscribed) or the client ends.
/// Dropping it unsubscribes. Messages not taken are kept up to [`SUBSCRIPTION_BUFFER`]
/// bytes; past that the client reads no more from the server until they are (other
/// subscriptions and replies wait too, as with a blocking observer that takes its time).
#[derive(Debug)]
pub struct Subscription {
    key: String,
    client: crate::rtm::Client,
    shared: Arc<Shared>,
    /// What was swapped out of the shared queue, taken from without a lock, and the
    /// bytes of its messages.
    taken: VecDeque<Entry>,
    taken_bytes: usize,
    state: SubState,
    unsubscribed: bool,
}

impl Subscription {
    /// A stream for `key`, and the observer that feeds it.
    pub(crate) fn new(
        key: &str,
        client: &crate::rtm::Client,
    ) -> (Subscription, impl SubscriptionObserver) {
        let shared = Arc::new(Shared {
            queue: Mutex::new(Queue::default()),
            bytes: AtomicUsize::new(0),
            pressing: AtomicBool::new(false),
            engine: client.engine().clone(),
        });
        let observer = Feed(shared.clone());
        let subscription = Subscription {
            key: key.to_owned(),
            client: client.clone(),
            shared,
            taken: VecDeque::new(),
            taken_bytes: 0,
            state: SubState::Unsubscribed,
            unsubscribed: false,
        };
        (subscription, observer)
    }

    /// The channel (or view id) subscribed to.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The state as far as this stream has been read.
    pub fn state(&self) -> SubState {
        self.state
    }

    /// Bytes of messages received and not yet taken from this stream: at most about
    /// [`SUBSCRIPTION_BUFFER`] plus one socket read's worth, however fast the server
    /// sends.
    pub fn buffered_bytes(&self) -> usize {
        self.shared.bytes.load(Ordering::Acquire) + self.taken_bytes
    }

    /// The next update (what the [`Stream`] yields, without a stream combinator crate);
    /// `None` when the subscription ended.
    ///
    /// # Cancel safety
    /// Cancel safe: an update is taken only when this returns it.
    pub async fn next(&mut self) -> Option<Update> {
        poll_fn(|cx| Pin::new(&mut *self).poll_next(cx)).await
    }

    /// The next message, skipping state changes (see [`state`](Self::state)); `None`
    /// when the subscription ended. A failure ends it too: read [`Update::Failed`]
    /// through [`next`](Self::next) to see why.
    ///
    /// # Cancel safety
    /// Cancel safe: a message is taken only when this returns it.
    pub async fn next_message(&mut self) -> Option<Message> {
        loop {
            match self.next().await? {
                Update::Message(m) => return Some(m),
                Update::Failed(_) => return None,
                _ => {}
            }
        }
    }

    /// Unsubscribes; the stream ends once the server confirmed (after the messages
    /// that came before).
    pub fn unsubscribe(&mut self) -> Result<(), Error> {
        self.unsubscribed = true;
        self.client.unsubscribe(&self.key)
    }
}

impl Stream for Subscription {
    type Item = Update;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Update>> {
        let this = self.get_mut();
        if this.taken.is_empty() {
            let mut queue = this.shared.lock();
            if queue.updates.is_empty() {
                if queue.ended {
                    return Poll::Ready(None);
                }
                queue.waker = Some(cx.waker().clone());
                return Poll::Pending;
            }
            std::mem::swap(&mut queue.updates, &mut this.taken);
            this.taken_bytes = std::mem::take(&mut queue.bytes);
            drop(queue);
            this.shared.taken(this.taken_bytes);
        }
        let update = loop {
            match this.taken.front_mut() {
                Some(Entry::Batch(batch)) => match batch.next_message() {
                    Some(m) => break Some(Update::Message(m)),
                    None => {
                        this.taken.pop_front();
                    }
                },
                Some(Entry::Update(_)) => match this.taken.pop_front() {
                    Some(Entry::Update(update)) => break Some(update),
                    _ => continue,
                },
                None => break None,
            }
        };
        match &update {
            Some(Update::Message(m)) => {
                this.taken_bytes = this.taken_bytes.saturating_sub(m.range.len());
            }
            Some(Update::State(state)) => this.state = *state,
            Some(_) => {}
            // Only empty batches were left: look again.
            None => {
                cx.waker().wake_by_ref();
                return Poll::Pending;
            }
        }
        Poll::Ready(update)
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        self.shared.release();
        let ended = self.shared.lock().ended;
        if !self.unsubscribed && !ended {
            let _ = self.client.unsubscribe(&self.key);
        }
    }
}

/// What the observer and the stream share.
struct Shared {
    queue: Mutex<Queue>,
    /// Bytes of messages received and not yet taken by the reader.
    bytes: AtomicUsize,
    /// Counted in the engine's `pressure`.
    pressing: AtomicBool,
    engine: Arc<Engine>,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("bytes", &self.bytes)
            .field("pressing", &self.pressing)
            .finish_non_exhaustive()
    }
}

/// What the observer queues: a received batch whole (its messages made on the reader's
/// side, so that the reference counts they share are touched by one thread only), or
/// another update.
#[derive(Debug)]
enum Entry {
    Batch(Batch),
    Update(Update),
}

/// The messages of one `rtm/subscription/data`: their text in one allocation.
#[derive(Debug)]
struct Batch {
    text: Arc<str>,
    ranges: std::vec::IntoIter<std::ops::Range<usize>>,
    position: Option<Arc<str>>,
}

impl Batch {
    fn next_message(&mut self) -> Option<Message> {
        Some(Message {
            range: self.ranges.next()?,
            batch: self.text.clone(),
            position: self.position.clone(),
        })
    }
}

#[derive(Debug, Default)]
struct Queue {
    updates: VecDeque<Entry>,
    /// Bytes of the messages in `updates`.
    bytes: usize,
    waker: Option<Waker>,
    ended: bool,
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// `len` bytes more wait for the reader: past the buffer, the runner stops reading.
    fn received(&self, len: usize) {
        let bytes = self.bytes.fetch_add(len, Ordering::AcqRel) + len;
        if bytes > SUBSCRIPTION_BUFFER && !self.pressing.swap(true, Ordering::AcqRel) {
            self.engine.pressure.fetch_add(1, Ordering::AcqRel);
        }
    }

    /// The reader took a batch of `len` bytes out of the queue: at half the buffer, the
    /// runner may read again (what the reader holds is at most one batch).
    fn taken(&self, len: usize) {
        let bytes = self.bytes.fetch_sub(len, Ordering::AcqRel) - len;
        if bytes <= SUBSCRIPTION_BUFFER / 2 {
            self.release();
        }
    }

    /// The reader caught up (or went away).
    fn release(&self) {
        if self.pressing.swap(false, Ordering::AcqRel) {
            self.engine.pressure.fetch_sub(1, Ordering::AcqRel);
            self.engine.wake();
        }
    }

    fn push(&self, entry: Entry) {
        let mut queue = self.lock();
        queue.updates.push_back(entry);
        if let Some(waker) = queue.waker.take() {
            waker.wake();
        }
    }

    fn end(&self) {
        let mut queue = self.lock();
        queue.ended = true;
        if let Some(waker) = queue.waker.take() {
            waker.wake();
        }
    }
}

/// The observer the engine calls for one subscription, on the runner: it feeds the
/// stream.
struct Feed(Arc<Shared>);

impl SubscriptionObserver for Feed {
    fn on_subscription_data(&mut self, data: &SubscriptionData<'_>) {
        let position: Option<Arc<str>> = data.position().map(Into::into);
        let messages = data.messages();
        let mut text = String::with_capacity(messages.iter().map(|m| m.len()).sum());
        let ranges: Vec<_> = messages
            .iter()
            .map(|m| {
                let start = text.len();
                text.push_str(m);
                start..text.len()
            })
            .collect();
        let len = text.len();
        self.0.received(len);
        let mut queue = self.0.lock();
        queue.bytes += len;
        queue.updates.push_back(Entry::Batch(Batch {
            text: text.into(),
            ranges: ranges.into_iter(),
            position,
        }));
        // Woken when the runner's turn ends: a read's worth of batches at once.
        if let Some(waker) = queue.waker.take() {
            drop(queue);
            self.0
                .engine
                .deferred
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(waker);
        }
    }

    fn on_enter_subscribing(&mut self) {
        self.0
            .push(Entry::Update(Update::State(SubState::Subscribing)));
    }

    fn on_enter_subscribed(&mut self) {
        self.0
            .push(Entry::Update(Update::State(SubState::Subscribed)));
    }

    fn on_enter_unsubscribing(&mut self) {
        self.0
            .push(Entry::Update(Update::State(SubState::Unsubscribing)));
    }

    fn on_enter_unsubscribed(&mut self) {
        self.0
            .push(Entry::Update(Update::State(SubState::Unsubscribed)));
    }

    fn on_enter_failed(&mut self, reason: &str) {
        self.0
            .push(Entry::Update(Update::Failed(reason.to_owned())));
    }

    fn on_fast_forward(&mut self) {
        self.0.push(Entry::Update(Update::FastForward));
    }

    fn on_deleted(&mut self) {
        self.0.end();
    }
}

impl Drop for Feed {
    /// The client ended (or dropped the observer): the stream ends after what it has.
    fn drop(&mut self) {
        self.0.end();
    }
}

/// The replies of a [`Client::search`](super::rtm::Client::search): each item one
/// reply's `channels`.
#[derive(Debug)]
pub struct Search {
    pub(crate) feed: Arc<Mutex<SearchFeed>>,
}

#[derive(Debug, Default)]
pub(crate) struct SearchFeed {
    pub(crate) items: VecDeque<Result<Vec<String>, Error>>,
    pub(crate) done: bool,
    pub(crate) waker: Option<Waker>,
}

impl Stream for Search {
    type Item = Result<Vec<String>, Error>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let mut feed = self.feed.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(item) = feed.items.pop_front() {
            return Poll::Ready(Some(item));
        }
        if feed.done {
            return Poll::Ready(None);
        }
        feed.waker = Some(cx.waker().clone());
        Poll::Pending
    }
}
