//! What the sandbox's test files share.

use std::time::{Duration, Instant};

/// Polls `cond` until it holds; fails the test, naming `what`, after 30 s (a guard
/// against a hang, not a measure).
pub fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}
