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
