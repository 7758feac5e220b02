//! What the sandbox's test files share.

use std::time::{Duration, Instant};

/// How long a wait may last before the test calls it a hang: generous, because a
/// loaded two-core machine running the suite twice over can stall a stage for seconds.
/// A guard, not a measure.
pub const HANG_GUARD: Duration = Duration::from_secs(60);

/// Polls `cond` until it holds; fails the test, naming `what`, after [`HANG_GUARD`].
pub fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + HANG_GUARD;
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Runs `f` on a thread of its own and returns its result; fails the test, naming
/// `what`, if `f` has not returned after [`HANG_GUARD`] (a shutdown that waits for
/// connections to end by themselves, say). A guard against hanging, never a measure;
/// a panic inside `f` is re-raised here.
pub fn returns<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    let _watched = std::thread::spawn(move || {
        let _ = tx.send(std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)));
    });
    match rx.recv_timeout(HANG_GUARD) {
        Ok(Ok(value)) => value,
        Ok(Err(payload)) => std::panic::resume_unwind(payload),
        Err(_) => panic!("{what} never returned (waited {HANG_GUARD:?})"),
    }
}
