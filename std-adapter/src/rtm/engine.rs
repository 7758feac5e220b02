//! What every runner of the messaging client shares: the core's sans-IO
//! [`Link`](core_rtm::Link) with its memory, the events it reported, the registrations of
//! calls (callbacks, observers) and their delivery in order. A runner — the I/O thread
//! of the blocking client (`io_thread`), or the task of the async one (`crate::tokio`) —
//! only moves bytes between a socket and the link, sleeps until the link's next
//! deadline, and calls [`take`] and [`deliver`] between reads.

use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};
use std::task::Waker;
use std::thread::{self, ThreadId};
use std::time::Instant as StdInstant;

use benchlink_core::rtm::pdu::Encoding;
use benchlink_core::rtm::{self as core_rtm, ClientState, Event, Outcome, SubState, Ticket};
use benchlink_core::time::Instant;

use super::client::{Callback, ClientOptions, ConnectingError, Error, Response};
use super::observer::{text, ClientObserver, Reply, SubscriptionData, SubscriptionObserver};
use super::tickets::Tickets;
use super::transport::ConnectError;

/// The default of [`ClientOptions::max_subscriptions`]: room for thousands of channels
/// at once (the reference SDK has no limit); any number can be configured.
pub const DEFAULT_MAX_SUBSCRIPTIONS: usize = 4096;
/// Room in the outbox beyond the largest message: the PDU's envelope and the channel
/// name (or a read's arguments), so that a message of exactly
/// [`ClientOptions::max_outgoing_message_size`] goes out with any channel name up to
/// about 64 KiB.
const ENVELOPE_ROOM: usize = 64 << 10;
/// Room in the outbox beyond one largest PDU: small PDUs wait there, framed where they
/// were encoded, and go out up to [`WRITE_PIECES`] in one vectored write.
const TX_BATCH: usize = 512 << 10;
/// Frames per vectored write: enough to fill a socket buffer with small PDUs in a few
/// calls; the array of slices is built on the stack at every write, so no more.
pub(crate) const WRITE_PIECES: usize = 128;
/// The link's own transmit buffer: the upgrade request, then the server's `101` head in
/// its place (a head larger than this is refused), then pings, pongs and the close.
const TX: usize = 16 << 10;
/// One socket read; the link is fed this much at a time, so a flooding server costs at
/// most this (plus the events of one chunk) before timers and user calls run again.
pub(crate) const READ_CHUNK: usize = 64 << 10;
type Subscriptions = Box<[core_rtm::SubscriptionSlot]>;
pub(crate) type CoreLink = core_rtm::Link<Box<[u8]>, Subscriptions, InFlightTable>;
pub(crate) type CoreClient =
    core_rtm::Client<Subscriptions, InFlightTable, Box<[u8]>, Box<[u8]>, Box<[u8]>>;

/// A table of `n` entries of `entry` (the subscription table); `what` names it in the
/// error when the memory cannot hold it, an error of [`Client::new`], not an abort.
fn table<T: Clone>(n: usize, entry: T, what: &str) -> Result<Box<[T]>, String> {
    let mut table = Vec::new();
    table
        .try_reserve_exact(n)
        .map_err(|_| format!("{what} {n}: no memory for a table that large"))?;
    table.resize(n, entry);
    Ok(table.into_boxed_slice())
}

/// Bytes [`ClientOptions::max_in_flight_bytes`] counts for each acknowledged request in
/// flight: its entry in the table of requests in flight (24) and its callback's pointer
/// in the table of callbacks (16 on a 64-bit host): what the client itself keeps for a
/// request it sent, whatever the size of its message. A limit is a number of requests
/// times this.
///
/// ```
/// use benchlink_std::rtm::{ClientOptions, DEFAULT_MAX_IN_FLIGHT_BYTES, IN_FLIGHT_REQUEST_BYTES};
/// let mut options = ClientOptions::new("ws://127.0.0.1:8080", "key");
/// assert_eq!(options.max_in_flight_bytes, DEFAULT_MAX_IN_FLIGHT_BYTES);
/// // 100,000 acknowledged requests in flight at most:
/// options.max_in_flight_bytes = 100_000 * IN_FLIGHT_REQUEST_BYTES;
/// ```
pub const IN_FLIGHT_REQUEST_BYTES: usize =
    std::mem::size_of::<core_rtm::Pending>() + std::mem::size_of::<Option<Callback>>();

/// The most acknowledged requests `options` lets be in flight at once (at least one).
fn max_in_flight(options: &ClientOptions) -> usize {
    (options.max_in_flight_bytes / IN_FLIGHT_REQUEST_BYTES).max(1)
}

/// The table of requests in flight: empty at first, doubled each time every entry holds
/// a request in flight and another is to be sent, up to `max` entries (the byte limit's
/// worth), so a short pipe costs little and a long one what it holds. At the limit, or
/// when the memory cannot hold more, requests wait in the offline queue for replies to
/// free entries (backpressure, not growth). Kept at its largest: a pipe that was long
/// once is likely to be again.
pub(crate) struct InFlightTable {
    entries: Vec<core_rtm::Pending>,
    max: usize,
}

impl core_rtm::Slots for InFlightTable {
    fn entries(&self) -> &[core_rtm::Pending] {
        &self.entries
    }

    fn entries_mut(&mut self) -> &mut [core_rtm::Pending] {
        &mut self.entries
    }

    fn grow(&mut self) -> bool {
        let len = self.entries.len();
        let to = len.saturating_mul(2).max(1024).min(self.max);
        if to <= len || self.entries.try_reserve_exact(to - len).is_err() {
            return false;
        }
        self.entries.resize(to, core_rtm::Pending::EMPTY);
        true
    }
}

/// The subscription table for `options`: `max_subscriptions` entries.
fn subscriptions(options: &ClientOptions) -> Result<Subscriptions, String> {
    let n = options.max_subscriptions;
    table(n, core_rtm::SubscriptionSlot::EMPTY, "max_subscriptions")
}

/// The link's four buffers for `options`, zeroed heap allocations whose pages the
/// operating system commits only as they are written: a 16 MiB outbox costs memory only
/// when a message that large is sent.
fn buffers(options: &ClientOptions) -> core_rtm::Buffers<Box<[u8]>> {
    let bytes = |n: usize| vec![0u8; n].into_boxed_slice();
    let pdu = options
        .max_outgoing_message_size
        .saturating_add(ENVELOPE_ROOM);
    core_rtm::Buffers {
        rx: bytes(rx_size(options)),
        tx: bytes(TX.max(core_rtm::MIN_TX)),
        // Every request that can be sent can also wait offline.
        queue: bytes(options.queue_bytes.saturating_add(pdu)),
        outbox: bytes(pdu.saturating_add(TX_BATCH)),
        subscription_args: bytes(
            options
                .max_subscriptions
                .saturating_mul(options.max_subscription_args),
        ),
    }
}

/// The link's events between two takes by the I/O thread, each message they borrow
/// kept with them: a call's worst case, a largest message and two reads' worth (zeroed:
/// pages are committed only as events are kept; past a largest message the link waits
/// for the next take).
fn journal(options: &ClientOptions) -> Journal {
    let max_message = rx_size(options);
    let size = Journal::capacity_for(
        options.max_subscriptions,
        max_in_flight(options),
        options.max_queue_size,
    )
    .saturating_add(max_message)
    .saturating_add(2 * READ_CHUNK);
    Journal::new(vec![0u8; size].into_boxed_slice()).keeping_messages(max_message)
}

/// The link's receive buffer: the largest message.
fn rx_size(options: &ClientOptions) -> usize {
    options.transport.max_message_size.max(1024)
}

/// The default of [`ClientOptions::max_in_flight_bytes`], 8 MiB: the client's full rate
/// of acknowledged publishes, about 600,000 a second on loopback (`.ci/bench-rtm`),
/// across a 300 ms round trip is 180,000 requests in flight, 7.2 MB at
/// [`IN_FLIGHT_REQUEST_BYTES`] each; rounded up, 209,715 requests (at 40 bytes).
///
/// ```
/// use benchlink_std::rtm::{DEFAULT_MAX_IN_FLIGHT_BYTES, IN_FLIGHT_REQUEST_BYTES};
/// // A 300 ms round trip at 600,000 acknowledged publishes a second fits.
/// assert!(DEFAULT_MAX_IN_FLIGHT_BYTES / IN_FLIGHT_REQUEST_BYTES >= 180_000);
/// ```
pub const DEFAULT_MAX_IN_FLIGHT_BYTES: usize = 8 << 20;

/// Makes the runner look at the link (a mio waker's syscall, a tokio `Notify`).
pub(crate) type Wake = Box<dyn Fn() + Send + Sync>;

/// The link and the events it produced, shared by the runner and the callers.
pub(crate) struct Engine {
    core: Mutex<Core>,
    /// A wake-up is on its way (or the runner is busy and will look at the link before
    /// it sleeps): callers skip the syscall.
    pub(crate) wake_pending: AtomicBool,
    wake: Wake,
    /// The I/O thread, once it runs (callers on it need not wake it); never set for an
    /// async runner, whose callbacks run on any of the runtime's threads.
    pub(crate) thread: OnceLock<ThreadId>,
    /// Signalled by the runner after each turn while someone waits for room
    /// ([`Client::wait_for_room`]); waited on with `core`'s lock.
    pub(crate) room: std::sync::Condvar,
    pub(crate) room_waiters: AtomicUsize,
    /// Consumers that asked the runner to stop taking input until they catch up (an
    /// async subscription whose messages were not taken): the runner reads no more
    /// while this is above zero, so TCP slows the server down, and the link's deadlines
    /// go on meanwhile.
    #[cfg(feature = "tokio")]
    pub(crate) pressure: AtomicUsize,
    /// Readers to wake once the runner's turn ends (async streams fed during delivery):
    /// one wake-up a socket read, not one a message.
    #[cfg(feature = "tokio")]
    pub(crate) deferred: Mutex<Vec<Waker>>,
}

impl Engine {
    pub(crate) fn lock(&self) -> MutexGuard<'_, Core> {
        self.core.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Makes the runner look at the link: a syscall only when it may be asleep.
    pub(crate) fn wake(&self) {
        if self.thread.get() != Some(&thread::current().id())
            && !self.wake_pending.swap(true, Ordering::AcqRel)
        {
            (self.wake)();
        }
    }

    /// Wakes the runner whatever it is doing (a connect thread's result).
    pub(crate) fn wake_now(&self) {
        self.wake_pending.store(true, Ordering::Release);
        (self.wake)();
    }

    /// After a runner's turn, requests went out or were answered: callers waiting for
    /// room look again.
    pub(crate) fn room_changed(&self, core: &mut Core) {
        let wakers = std::mem::take(&mut core.room_wakers);
        wakers.into_iter().for_each(Waker::wake);
        if self.room_waiters.load(Ordering::Acquire) > 0 {
            self.room.notify_all();
        }
    }
}

/// The link's events, kept in place until the I/O thread takes them (see [`take`]).
pub(crate) type Journal = core_rtm::Events<Box<[u8]>>;

/// The sans-IO link and what it reported, not yet taken for delivery.
pub(crate) struct Core {
    pub(crate) link: Box<CoreLink>,
    /// The events of every call into the link since the I/O thread last took them.
    pub(crate) events: Journal,
    /// Events taken by the I/O thread so far; `events.recorded()` and `lost()` when it
    /// last took them. With the events recorded since, they count every event (see
    /// [`Core::recorded`]).
    pub(crate) taken: u64,
    pub(crate) recorded_at_take: u32,
    pub(crate) lost_at_take: u32,
    /// What calls registered (request callbacks, observers), each with the count of
    /// events recorded before it: delivered in that order among the events.
    pub(crate) registrations: Vec<(u64, Registration)>,
    /// Subscription records (created and not yet seen deleted), against
    /// `max_subscriptions`.
    pub(crate) subs: usize,
    pub(crate) max_subs: usize,
    pub(crate) epoch: StdInstant,
    /// The transport error behind the client's latest connect failure.
    pub(crate) transport_error: Option<(core_rtm::ConnectError, Arc<ConnectError>)>,
    /// Async callers waiting for room (see [`Engine::room_changed`]).
    pub(crate) room_wakers: Vec<Waker>,
}

impl Core {
    pub(crate) fn now(&self) -> Instant {
        Instant::from_micros(u64::try_from(self.epoch.elapsed().as_micros()).unwrap_or(u64::MAX))
    }

    pub(crate) fn parts(&mut self) -> (&mut CoreLink, &mut Journal) {
        (&mut self.link, &mut self.events)
    }

    /// Events recorded so far, ever: the mark [`Client::wait_for_state`] waits for
    /// observers to reach, and where a registration goes among the events.
    pub(crate) fn recorded(&self) -> u64 {
        let since = self.events.recorded().wrapping_sub(self.recorded_at_take);
        self.taken.saturating_add(u64::from(since))
    }

    /// Registers `r` after every event recorded so far.
    pub(crate) fn register(&mut self, r: Registration) {
        let at = self.recorded();
        self.registrations.push((at, r));
    }

    pub(crate) fn dispose(&mut self) {
        let now = self.now();
        let (link, events) = self.parts();
        link.client_mut().dispose(now, events);
    }

    pub(crate) fn last_error(&self) -> Option<ConnectingError> {
        let kind = self.link.client().last_connecting_error()?;
        let transport = match &self.transport_error {
            Some((code, e)) if *code == kind => Some(e.clone()),
            _ => None,
        };
        Some(ConnectingError { kind, transport })
    }
}

/// What a call hands the I/O thread besides its request: delivered in order with the
/// events (a request's callback before its replies, say).
pub(crate) enum Registration {
    /// A request's callback.
    Callback(Ticket, Callback),
    /// An `authenticate`'s completion.
    AuthDone(Ticket, AuthDone),
    /// An accepted `subscribe`'s observer (see `Observers`).
    Subscribe(String, Box<dyn SubscriptionObserver>),
    /// `replace_observer`.
    Replace(String, Box<dyn SubscriptionObserver>),
    /// `set_observer`: the client observer from here on.
    Observer(Option<Box<dyn ClientObserver>>),
}

/// The events the I/O thread took from [`Core`], read and delivered with the link
/// unlocked (so observers may call the client).
pub(crate) struct Delivery {
    /// Swapped with the link's: empty whenever it is swapped back. The events keep the
    /// messages they borrow from, so they need the link no longer.
    pub(crate) events: Journal,
    /// The client's encoding (how to show the messages of subscription data).
    pub(crate) encoding: Encoding,
    pub(crate) registrations: VecDeque<(u64, Registration)>,
    /// The count of the next event to deliver, and of the events taken.
    pub(crate) next: u64,
    pub(crate) until: u64,
}

/// Takes the link's events and what calls registered, for delivery with the link
/// unlocked; `false` when there is nothing. The events are swapped out whole, with the
/// messages they keep: the link goes on receiving meanwhile.
pub(crate) fn take(core: &mut Core, d: &mut Delivery) -> bool {
    let until = core.recorded();
    if until == core.taken && core.registrations.is_empty() {
        return false;
    }
    let lost = core.events.lost().wrapping_sub(core.lost_at_take);
    if lost > 0 {
        log::warn!("rtm: {lost} events were dropped: the client's calls made more events than its events buffer holds before the I/O thread took them");
    }
    std::mem::swap(&mut core.events, &mut d.events);
    core.taken = until;
    core.recorded_at_take = core.events.recorded();
    core.lost_at_take = core.events.lost();
    d.registrations.extend(core.registrations.drain(..));
    d.until = until;
    true
}

/// The client state as last reported, for callers that wait for a state.
#[derive(Debug)]
pub(crate) struct StateWatch {
    pub(crate) seen: Mutex<Seen>,
    pub(crate) changed: std::sync::Condvar,
}

/// What observers have been told so far.
#[derive(Debug)]
pub(crate) struct Seen {
    pub(crate) state: ClientState,
    /// Events delivered (see [`Core::taken`]).
    pub(crate) delivered: u64,
    /// The I/O thread has ended.
    pub(crate) ended: bool,
    /// Async callers waiting for a change.
    pub(crate) wakers: Vec<Waker>,
    /// Threads blocked in [`StateWatch::wait`]: a `Condvar` notify is a system call even
    /// with nobody waiting, and the I/O thread would otherwise make one per event.
    pub(crate) waiters: usize,
}

impl StateWatch {
    pub(crate) fn lock(&self) -> MutexGuard<'_, Seen> {
        self.seen.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Waits for a change until `deadline` (`None`: no limit); the guard back either way.
    pub(crate) fn wait<'s>(
        &'s self,
        mut seen: MutexGuard<'s, Seen>,
        deadline: Option<StdInstant>,
    ) -> MutexGuard<'s, Seen> {
        seen.waiters += 1;
        let mut seen = match deadline {
            Some(d) => {
                let left = d.saturating_duration_since(StdInstant::now());
                self.changed
                    .wait_timeout(seen, left)
                    .map_or_else(|p| p.into_inner().0, |(s, _)| s)
            }
            None => self
                .changed
                .wait(seen)
                .unwrap_or_else(PoisonError::into_inner),
        };
        seen.waiters -= 1;
        seen
    }

    /// Releases `seen` after a change, waking the threads in [`wait`](Self::wait) and the
    /// async callers, if any.
    pub(crate) fn notify(&self, mut seen: MutexGuard<'_, Seen>) {
        let wake = seen.waiters > 0;
        let wakers = std::mem::take(&mut seen.wakers);
        drop(seen);
        wakers.into_iter().for_each(Waker::wake);
        if wake {
            self.changed.notify_all();
        }
    }
}

/// What a runner takes over: the engine and state watch it shares with the handles, the
/// observers it calls and its delivery buffer.
pub(crate) struct Parts {
    pub(crate) engine: Arc<Engine>,
    pub(crate) watch: Arc<StateWatch>,
    pub(crate) observers: Observers,
    pub(crate) delivery: Delivery,
}

/// A stopped client's link for `options`, with its memory, events and observers (the
/// given `observer`, else `options.observer`); `wake` makes its runner look at the link.
pub(crate) fn build(
    options: &ClientOptions,
    observer: Option<Box<dyn ClientObserver>>,
    wake: Wake,
) -> Result<Parts, Error> {
    crate::logging::init_from_env();
    let observer = observer.or_else(|| {
        let shared = options.observer.clone()?;
        Some(Box::new(shared) as Box<dyn ClientObserver>)
    });
    let config = core_rtm::Config {
        reconnect_interval: options.reconnect_interval,
        max_reconnect_interval: options.max_reconnect_interval,
        fail_count_threshold: options.fail_count_threshold,
        restore_auth_on_reconnect: options.restore_auth_on_reconnect,
        max_queue_size: options.max_queue_size,
        retry_first_connect: options.retry_first_connect,
        wait_before_first_reconnect: options.wait_before_first_reconnect,
        // A zero seed turns the core's jitter off.
        jitter_seed: if options.reconnect_jitter { seed() } else { 0 },
        connect_timeout: options.transport.connect_timeout,
        encoding: options.encoding,
        max_message_size: options.max_outgoing_message_size,
        ..core_rtm::Config::default()
    };
    let link_config = core_rtm::LinkConfig {
        ping_interval: options.ping_interval,
        dead_peer_timeout: options.dead_peer_timeout,
        user_agent: Some(concat!("benchlink/", env!("CARGO_PKG_VERSION"))),
        seed: seed(),
        ..core_rtm::LinkConfig::DEFAULT
    };
    let (endpoint, appkey) = (&options.transport.endpoint, &options.transport.appkey);
    let link = subscriptions(options)
        .and_then(|subscriptions| {
            CoreLink::new(
                config,
                link_config,
                endpoint,
                appkey,
                buffers(options),
                subscriptions,
                InFlightTable {
                    entries: Vec::new(),
                    max: max_in_flight(options),
                },
            )
            .map(Box::new)
            .map_err(|e| e.to_string())
        })
        .map_err(Error::Connect)?;
    let engine = Arc::new(Engine {
        core: Mutex::new(Core {
            link,
            events: journal(options),
            taken: 0,
            recorded_at_take: 0,
            lost_at_take: 0,
            registrations: Vec::new(),
            subs: 0,
            max_subs: options.max_subscriptions,
            epoch: StdInstant::now(),
            transport_error: None,
            room_wakers: Vec::new(),
        }),
        wake_pending: AtomicBool::new(false),
        wake,
        thread: OnceLock::new(),
        room: std::sync::Condvar::new(),
        room_waiters: AtomicUsize::new(0),
        #[cfg(feature = "tokio")]
        pressure: AtomicUsize::new(0),
        #[cfg(feature = "tokio")]
        deferred: Mutex::new(Vec::new()),
    });
    let watch = Arc::new(StateWatch {
        seen: Mutex::new(Seen {
            state: ClientState::Stopped,
            delivered: 0,
            ended: false,
            wakers: Vec::new(),
            waiters: 0,
        }),
        changed: std::sync::Condvar::new(),
    });
    Ok(Parts {
        engine,
        watch,
        observers: Observers {
            client: observer,
            hold_leave_subscribed: options.leave_subscribed_on_completion,
            ..Observers::default()
        },
        delivery: Delivery {
            events: journal(options),
            encoding: options.encoding,
            registrations: VecDeque::new(),
            next: 0,
            until: 0,
        },
    })
}

/// Delivers what is left when a runner ends (a call's events after the last delivery:
/// dispose's own, the queued requests' `Disconnected`), fails whatever still waits, so
/// no caller waits forever, and tells the waiting callers that the runner ended.
pub(crate) fn finish(
    engine: &Engine,
    watch: &StateWatch,
    observers: &RefCell<Observers>,
    delivery: &mut Delivery,
) {
    while take(&mut engine.lock(), delivery) {
        deliver(engine, watch, observers, delivery);
    }
    observers.borrow_mut().callbacks.clear();
    let mut seen = watch.lock();
    seen.ended = true;
    watch.notify(seen);
    engine.room_changed(&mut engine.lock());
    engine.room.notify_all();
}

/// What an `authenticate` caller is told.
pub(crate) type AuthDone = Box<dyn FnOnce(Result<(), String>) + Send>;

/// Observers and callbacks, on the I/O thread only.
#[derive(Default)]
pub(crate) struct Observers {
    pub(crate) client: Option<Box<dyn ClientObserver>>,
    /// `ClientOptions::leave_subscribed_on_completion`.
    pub(crate) hold_leave_subscribed: bool,
    /// Subscriptions whose `Subscribed → Unsubscribing` is held back until the
    /// unsubscribe completes (their next event).
    pub(crate) held: std::collections::HashSet<String>,
    /// The observers registered per subscription key (by `Registration::Subscribe`, in the order
    /// of the core's events), oldest first. The front one gets the key's events until
    /// its `on_deleted`. A `subscribe` while the old record still exists (a cycle) waits
    /// behind it; a `created` leaves only the newest registration, the one the core
    /// created the record for (registrations superseded before that get `on_deleted`).
    /// A slot is empty while its observer runs.
    pub(crate) subs: HashMap<String, VecDeque<Option<Box<dyn SubscriptionObserver>>>>,
    pub(crate) callbacks: Tickets<Callback>,
    pub(crate) auth: Tickets<AuthDone>,
}

pub(crate) fn seed() -> u64 {
    let mut b = [0u8; 8];
    let _ = getrandom::fill(&mut b);
    u64::from_le_bytes(b) | 1
}

/// Delivers the events [`take`] took, in order, one at a time, with the link unlocked
/// (so callbacks may call the client), and what calls registered among them. A
/// panicking callback stops the client (and is reported), instead of killing the I/O
/// thread.
pub(crate) fn deliver(
    engine: &Engine,
    watch: &StateWatch,
    observers: &RefCell<Observers>,
    d: &mut Delivery,
) {
    let Delivery {
        events,
        encoding,
        registrations,
        next,
        until,
    } = d;
    while let Some(event) = events.poll_kept() {
        register(observers, registrations, *next);
        *next = next.saturating_add(1);
        let state = match event {
            Event::ClientState { enter, .. } => Some(enter),
            _ => None,
        };
        if let Event::SubscriptionDeleted { .. } = event {
            // Room for another before its observer hears it (and may subscribe again).
            let mut core = engine.lock();
            core.subs = core.subs.saturating_sub(1);
        }
        let ok = catch_unwind(AssertUnwindSafe(|| tell(observers, event, *encoding))).is_ok();
        if let Some(state) = state {
            let mut seen = watch.lock();
            seen.state = state;
            seen.delivered = *next;
            watch.notify(seen);
        }
        if !ok {
            log::error!("rtm: a callback panicked: stopping the client");
            let mut core = engine.lock();
            let now = core.now();
            let (link, events) = core.parts();
            link.client_mut().stop(now, events);
        }
    }
    // Events dropped for room (logged when taken) are counted as delivered.
    *next = *until;
    register(observers, registrations, *next);
    let mut seen = watch.lock();
    seen.delivered = *until;
    watch.notify(seen);
}

/// Applies the registrations made before event number `next`.
fn register(
    observers: &RefCell<Observers>,
    registrations: &mut VecDeque<(u64, Registration)>,
    next: u64,
) {
    while registrations.front().is_some_and(|(at, _)| *at <= next) {
        let Some((_, r)) = registrations.pop_front() else {
            return;
        };
        let mut obs = observers.borrow_mut();
        match r {
            Registration::Callback(ticket, cb) => obs.callbacks.insert(ticket.get(), cb),
            Registration::AuthDone(ticket, done) => obs.auth.insert(ticket.get(), done),
            Registration::Subscribe(key, observer) => {
                obs.subs.entry(key).or_default().push_back(Some(observer));
            }
            Registration::Observer(observer) => obs.client = observer,
            Registration::Replace(key, observer) => {
                if let Some(slot) = obs.subs.get_mut(&key).and_then(VecDeque::back_mut) {
                    *slot = Some(observer);
                }
            }
        }
    }
}

/// What a request callback is told of `outcome`.
fn response(outcome: Outcome<'_>) -> Response<'_> {
    match outcome {
        Outcome::Ok(p) | Outcome::Error(p) | Outcome::Data(p) => {
            Response::Reply(Reply::from_pdu(&p))
        }
        Outcome::Timeout => Response::Timeout,
        Outcome::Disconnected => Response::Disconnected,
    }
}

/// Calls the observer methods of one event. The observer is taken out of the table while
/// it runs, so it may call the client freely.
fn tell(observers: &RefCell<Observers>, event: Event<'_>, encoding: Encoding) {
    // An unsubscribe's `Subscribed → Unsubscribing` is told when it completes: held until
    // the subscription's next event, then told before it.
    let key = match event {
        Event::SubscriptionState {
            key,
            leave: SubState::Subscribed,
            enter: SubState::Unsubscribing,
        } => {
            let mut obs = observers.borrow_mut();
            if obs.hold_leave_subscribed {
                obs.held.insert(key.to_owned());
                return;
            }
            None
        }
        Event::SubscriptionState { key, .. }
        | Event::SubscriptionFailed { key, .. }
        | Event::SubscriptionDeleted { key } => Some(key),
        _ => None,
    };
    if let Some(key) = key {
        if observers.borrow_mut().held.remove(key) {
            with_sub(observers, key, |o| {
                o.on_leave_subscribed();
                o.on_enter_unsubscribing();
            });
        }
    }
    match event {
        Event::ClientState { leave, enter } => with_client(observers, |o| {
            match leave {
                ClientState::Stopped => o.on_leave_stopped(),
                ClientState::Connecting => o.on_leave_connecting(),
                ClientState::Connected => o.on_leave_connected(),
                ClientState::Stopping => o.on_leave_stopping(),
                ClientState::Awaiting => o.on_leave_awaiting(),
                ClientState::Disposed => {}
            }
            match enter {
                ClientState::Stopped => o.on_enter_stopped(),
                ClientState::Connecting => o.on_enter_connecting(),
                ClientState::Connected => o.on_enter_connected(),
                ClientState::Stopping => o.on_enter_stopping(),
                ClientState::Awaiting => o.on_enter_awaiting(),
                ClientState::Disposed => o.on_enter_disposed(),
            }
        }),
        Event::InternalError(e) => {
            log::warn!("rtm: {e}");
            let e = e.to_string();
            with_client(observers, |o| o.on_internal_error(&e));
        }
        Event::LinkClosed(why) => {
            log::info!("rtm: connection ended: {why}");
            let why = why.to_string();
            with_client(observers, |o| o.on_link_closed(&why));
        }
        Event::FastForward { key, .. } => {
            with_sub(observers, key, |o| o.on_fast_forward());
            with_client(observers, |o| o.on_fast_forward(key));
        }
        Event::Reply { ticket, outcome } => {
            let cb = observers.borrow_mut().callbacks.remove(ticket.get());
            if let Some(mut cb) = cb {
                let last = outcome.is_final();
                cb(response(outcome));
                if !last {
                    observers.borrow_mut().callbacks.insert(ticket.get(), cb);
                }
            }
        }
        Event::Auth { ticket, result } => {
            let done = observers.borrow_mut().auth.remove(ticket.get());
            if let Some(done) = done {
                done(if result.is_done() {
                    Ok(())
                } else {
                    Err(result.to_string())
                });
            }
        }
        Event::SubscriptionCreated { key } => {
            // The record is created for the newest registration; older ones left behind
            // (superseded by an unsubscribe and a new subscribe before the old record
            // was gone) never got a record: they only see `on_deleted`.
            loop {
                let stale = {
                    let mut obs = observers.borrow_mut();
                    match obs.subs.get_mut(key) {
                        Some(slots) if slots.len() > 1 => slots.pop_front(),
                        _ => None,
                    }
                };
                match stale {
                    Some(Some(mut o)) => o.on_deleted(),
                    Some(None) => {}
                    None => break,
                }
            }
            with_sub(observers, key, |o| o.on_created());
        }
        Event::SubscriptionDeleted { key } => {
            // The front observer is done; the next registration (if any) takes over.
            let taken = {
                let mut obs = observers.borrow_mut();
                let front = obs.subs.get_mut(key).and_then(VecDeque::pop_front);
                if obs.subs.get(key).is_some_and(VecDeque::is_empty) {
                    obs.subs.remove(key);
                }
                front.flatten()
            };
            if let Some(mut o) = taken {
                o.on_deleted();
            }
        }
        Event::SubscriptionState { key, leave, enter } => with_sub(observers, key, |o| {
            match leave {
                SubState::Unsubscribed => o.on_leave_unsubscribed(),
                SubState::Subscribing => o.on_leave_subscribing(),
                SubState::Subscribed => o.on_leave_subscribed(),
                SubState::Unsubscribing => o.on_leave_unsubscribing(),
                SubState::Failed => o.on_leave_failed(),
            }
            match enter {
                SubState::Unsubscribed => o.on_enter_unsubscribed(),
                SubState::Subscribing => o.on_enter_subscribing(),
                SubState::Subscribed => o.on_enter_subscribed(),
                SubState::Unsubscribing => o.on_enter_unsubscribing(),
                // Reported with its reason by `SubscriptionFailed`.
                SubState::Failed => {}
            }
        }),
        Event::SubscriptionFailed { key, reason } => {
            let reason = reason
                .reason_text()
                .map_or_else(|| "Unknown error".to_owned(), text);
            with_sub(observers, key, |o| o.on_enter_failed(&reason));
        }
        Event::SubscriptionReply { key, reply } => {
            let reply = Reply::from_pdu(&reply);
            with_sub(observers, key, |o| o.on_reply(&reply));
        }
        Event::SubscriptionData { key, data } => {
            let data = SubscriptionData::from_core(data, encoding);
            with_sub(observers, key, |o| o.on_subscription_data(&data));
        }
        // Events a newer core reports that this client has no observer method for.
        _ => {}
    }
}

/// Runs `f` with the client observer, taken out of the table meanwhile. The observer is
/// kept even when `f` panics (the panic goes on, to stop the client).
fn with_client(observers: &RefCell<Observers>, f: impl FnOnce(&mut dyn ClientObserver)) {
    let taken = observers.borrow_mut().client.take();
    if let Some(mut o) = taken {
        let r = catch_unwind(AssertUnwindSafe(|| f(o.as_mut())));
        observers.borrow_mut().client.get_or_insert(o);
        if let Err(panic) = r {
            resume_unwind(panic);
        }
    }
}

/// Runs `f` with the observer that gets `key`'s events (the front one), taken out of the
/// table meanwhile. The observer is kept even when `f` panics (the panic goes on, to stop
/// the client), unless the callback replaced it.
fn with_sub(
    observers: &RefCell<Observers>,
    key: &str,
    f: impl FnOnce(&mut dyn SubscriptionObserver),
) {
    let taken = observers
        .borrow_mut()
        .subs
        .get_mut(key)
        .and_then(VecDeque::front_mut)
        .and_then(Option::take);
    if let Some(mut o) = taken {
        let r = catch_unwind(AssertUnwindSafe(|| f(o.as_mut())));
        // Nothing is delivered while a callback runs, so the front is still its slot.
        if let Some(slot) = observers
            .borrow_mut()
            .subs
            .get_mut(key)
            .and_then(VecDeque::front_mut)
        {
            slot.get_or_insert(o);
        }
        if let Err(panic) = r {
            resume_unwind(panic);
        }
    }
}
