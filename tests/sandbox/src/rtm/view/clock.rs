//! The clock of aggregated views: one thread per server sleeps until the next window
//! end, closes the windows that are due and sends their rows.
//!
//! Window ends wait in a [`Schedule`] ordered by time. An entry names its subscription
//! and the serial of the view that made it; when the subscription has gone or was
//! replaced by then, the entry is stale and is dropped. Stale entries are also purged
//! whenever the schedule has doubled since the last purge, so it never holds more than
//! about twice the live aggregated views.

use std::collections::BTreeMap;
use std::sync::{Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

use super::super::pdu::Positions;
use super::super::state::{send_rows, Conn, Shared, State};

/// Smallest size at which the schedule is purged of stale entries.
const PURGE_FLOOR: usize = 64;

/// The window ends to come.
#[derive(Debug, Default)]
pub(crate) struct Schedule {
    /// `(end, serial)` → `(connection, subscription_id)`.
    due: BTreeMap<(Instant, u64), (u64, String)>,
    next_serial: u64,
    purge_at: usize,
}

impl Schedule {
    /// A serial for a new aggregated view.
    pub(crate) fn serial(&mut self) -> u64 {
        self.next_serial += 1;
        self.next_serial
    }
}

/// Wakes the clock thread when a window end is scheduled or the server stops.
#[derive(Debug, Default)]
pub(crate) struct Wake {
    woken: Mutex<bool>,
    cv: Condvar,
}

impl Wake {
    pub(crate) fn wake(&self) {
        *self.woken.lock().unwrap_or_else(PoisonError::into_inner) = true;
        self.cv.notify_one();
    }

    /// Sleeps until `until` (forever if `None`) or a [`wake`](Self::wake).
    fn wait(&self, until: Option<Instant>) {
        let mut woken = self.woken.lock().unwrap_or_else(PoisonError::into_inner);
        if !*woken {
            woken = match until {
                None => self.cv.wait(woken).unwrap_or_else(PoisonError::into_inner),
                Some(t) => {
                    let left = t.saturating_duration_since(Instant::now());
                    self.cv
                        .wait_timeout(woken, left)
                        .unwrap_or_else(PoisonError::into_inner)
                        .0
                }
            };
        }
        *woken = false;
    }
}

/// Whether subscription `sid` of connection `conn` still runs the view `serial`.
fn live(conns: &BTreeMap<u64, Conn>, conn: u64, sid: &str, serial: u64) -> bool {
    conns
        .get(&conn)
        .and_then(|c| c.subs.get(sid))
        .and_then(|s| s.view.as_ref())
        .and_then(|v| v.windowing())
        .is_some_and(|(s, _)| s == serial)
}

/// Schedules the first window end (`at`) of the aggregated view `serial` of
/// subscription `sid` on connection `conn`.
pub(crate) fn start(st: &mut State, wake: &Wake, at: Instant, serial: u64, conn: u64, sid: &str) {
    let State { views, conns, .. } = st;
    if views.due.len() >= views.purge_at {
        views
            .due
            .retain(|(_, serial), (conn, sid)| live(conns, *conn, sid, *serial));
        views.purge_at = (2 * views.due.len()).max(PURGE_FLOOR);
    }
    views.due.insert((at, serial), (conn, sid.to_owned()));
    wake.wake();
}

/// The clock thread's body, until the server shuts down.
pub(crate) fn run(shared: &Shared) {
    while !shared.is_shutdown() {
        let next = fire(&mut shared.lock(), shared.positions, Instant::now());
        shared.view_clock.wait(next);
    }
}

/// Closes every window due by `now`; returns when the next one is due.
pub(crate) fn fire(st: &mut State, positions: Positions, now: Instant) -> Option<Instant> {
    loop {
        let (&(at, _), _) = st.views.due.first_key_value()?;
        if at > now {
            return Some(at);
        }
        let ((at, serial), (conn, sid)) = st.views.due.pop_first()?;
        if let Some(period) = emit(st, positions, conn, &sid, serial) {
            // Windows the clock slept through (a stalled machine) are skipped, not
            // replayed back to back.
            let mut next = at + period;
            while next <= now {
                next += period;
            }
            st.views.due.insert((next, serial), (conn, sid));
        }
    }
}

/// Closes the open window of view `serial` (if still live) and sends its rows. Returns
/// the view's period while the subscription goes on.
fn emit(
    st: &mut State,
    positions: Positions,
    conn: u64,
    sid: &str,
    serial: u64,
) -> Option<Duration> {
    if !live(&st.conns, conn, sid, serial) {
        return None;
    }
    let c = st.conns.get_mut(&conn)?;
    let sub = c.subs.get_mut(sid)?;
    let view = sub.view.as_mut()?;
    let (_, period) = view.windowing()?;
    if let Some((seq, rows)) = view.close_window() {
        let rows = rows.into_iter().map(|row| (seq, row)).collect();
        if !send_rows(&c.outbox, positions, sid, sub, rows) {
            c.subs.remove(sid);
            return None;
        }
    }
    Some(period)
}

/// Closes the open window of every aggregated view now (their schedules stay as they
/// were). Returns how many views there were.
pub(crate) fn close_all(st: &mut State, positions: Positions) -> usize {
    let open: Vec<(u64, String, u64)> = st
        .conns
        .iter()
        .flat_map(|(id, c)| {
            c.subs.iter().filter_map(move |(sid, s)| {
                let (serial, _) = s.view.as_ref()?.windowing()?;
                Some((*id, sid.clone(), serial))
            })
        })
        .collect();
    let n = open.len();
    for (conn, sid, serial) in open {
        emit(st, positions, conn, &sid, serial);
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stale_entries_do_not_pile_up() {
        // A client that subscribes and unsubscribes aggregated views as fast as it can
        // leaves only stale entries behind: the schedule stays small.
        let mut st = State::default();
        let wake = Wake::default();
        let at = Instant::now() + Duration::from_secs(60);
        for i in 0..10_000 {
            let serial = st.views.serial();
            start(&mut st, &wake, at, serial, i, "v");
            assert!(st.views.due.len() <= PURGE_FLOOR, "{}", st.views.due.len());
        }
    }

    #[test]
    fn due_entries_of_gone_views_are_dropped_and_the_next_end_is_reported() {
        let mut st = State::default();
        let wake = Wake::default();
        let now = Instant::now();
        let positions = Positions { epoch: 1 };
        for (i, secs) in [(1, 0), (2, 1), (3, 5)] {
            let serial = st.views.serial();
            start(
                &mut st,
                &wake,
                now + Duration::from_secs(secs),
                serial,
                i,
                "v",
            );
        }
        let next = fire(&mut st, positions, now + Duration::from_secs(2));
        assert_eq!(next, Some(now + Duration::from_secs(5)));
        assert_eq!(
            st.views.due.len(),
            1,
            "the due ones were stale and are gone"
        );
        assert_eq!(fire(&mut st, positions, now + Duration::from_secs(9)), None);
        assert_eq!(close_all(&mut st, positions), 0);
    }
}
