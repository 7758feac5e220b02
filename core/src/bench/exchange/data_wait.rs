//! The `/data` step every client takes first: wait until the benchmark runs.

use core::time::Duration;

use crate::bench::Status;
use crate::time::Instant;

/// What to do next on the way to a `/data` stream ([`DataWait::handle_status`]).
///
/// ```
/// use benchlink_core::bench::exchange::{DataStep, DataWait};
/// use benchlink_core::bench::Status;
/// use benchlink_core::time::Instant;
/// let step = DataWait::new().handle_status(Instant::ZERO, &Status::Init);
/// let sleep_until = match step {
///     DataStep::PollStatusAt(at) => at, // then ask /status again
///     DataStep::SendData | DataStep::Empty => unreachable!("not running yet"),
/// };
/// assert_eq!(sleep_until, Instant::from_millis(20));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum DataStep {
    /// Not running yet: ask `/status` again at this instant.
    PollStatusAt(Instant),
    /// Running, or over: send `/data` now (a finished benchmark's stream holds all its
    /// samples and ends).
    SendData,
    /// The benchmark failed: its stream is empty (the server would never answer `/data`).
    Empty,
}

/// The wait before `/data`. The server answers `/data` only once a benchmark runs, and
/// never for one that failed; so a client polls `/status` first, backing off from
/// [`FIRST_POLL`](Self::FIRST_POLL) doubling up to [`MAX_POLL`](Self::MAX_POLL), and
/// takes a failed benchmark as an empty stream. Sans IO: the caller asks `/status`,
/// hands the status in with the time, and waits as told.
///
/// ```
/// use benchlink_core::bench::exchange::{DataStep, DataWait};
/// use benchlink_core::bench::Status;
/// use benchlink_core::time::Instant;
///
/// let mut wait = DataWait::new();
/// let t = Instant::from_secs(5);
/// assert_eq!(wait.handle_status(t, &Status::Provisioning), DataStep::PollStatusAt(Instant::from_millis(5_020)));
/// assert_eq!(wait.handle_status(t, &Status::Starting), DataStep::PollStatusAt(Instant::from_millis(5_040)));
/// assert_eq!(wait.handle_status(t, &Status::Running), DataStep::SendData);
/// assert_eq!(DataWait::new().handle_status(t, &Status::Failed), DataStep::Empty);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DataWait {
    next_poll: Duration,
}

impl Default for DataWait {
    fn default() -> Self {
        DataWait::new()
    }
}

impl DataWait {
    /// The first wait between two polls of `/status`.
    ///
    /// ```
    /// use benchlink_core::bench::exchange::DataWait;
    /// assert!(DataWait::FIRST_POLL < DataWait::MAX_POLL);
    /// ```
    pub const FIRST_POLL: Duration = Duration::from_millis(20);
    /// The longest wait between two polls.
    ///
    /// ```
    /// use benchlink_core::bench::exchange::DataWait;
    /// assert_eq!(DataWait::MAX_POLL.as_millis(), 1000);
    /// ```
    pub const MAX_POLL: Duration = Duration::from_secs(1);

    /// A wait that has not polled yet: ask `/status` now.
    ///
    /// ```
    /// use benchlink_core::bench::exchange::DataWait;
    /// const WAIT: DataWait = DataWait::new(); // usable in a static
    /// assert_eq!(WAIT, DataWait::default());
    /// ```
    pub const fn new() -> Self {
        DataWait {
            next_poll: Self::FIRST_POLL,
        }
    }

    /// `/status` said `status` at `now`: what to do next.
    ///
    /// ```
    /// use benchlink_core::bench::exchange::{DataStep, DataWait};
    /// use benchlink_core::bench::Status;
    /// use benchlink_core::time::Instant;
    /// let mut wait = DataWait::new();
    /// // post_hooks may still fail, so it is waited out like a stage before running.
    /// assert!(matches!(wait.handle_status(Instant::ZERO, &Status::PostHooks), DataStep::PollStatusAt(_)));
    /// assert_eq!(wait.handle_status(Instant::ZERO, &Status::Complete), DataStep::SendData);
    /// ```
    pub fn handle_status(&mut self, now: Instant, status: &Status<'_>) -> DataStep {
        match status {
            Status::Failed => DataStep::Empty,
            // Running, a status this client does not know, or over.
            Status::Running | Status::Other(_) => DataStep::SendData,
            s if s.is_final() => DataStep::SendData,
            // A stage before `running`, or `post_hooks`.
            _ => {
                let at = now.saturating_add(self.next_poll);
                self.next_poll = self.next_poll.saturating_mul(2).min(Self::MAX_POLL);
                DataStep::PollStatusAt(at)
            }
        }
    }
}
