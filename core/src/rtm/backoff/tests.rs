use super::*;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

#[test]
fn delay_doubles_then_caps() {
    let mut b = Backoff::new(0);
    let mut seen = [0; 6];
    for slot in seen.iter_mut() {
        *slot = b.base_delay(ms(250), ms(3000));
        b.record_failure();
    }
    assert_eq!(
        seen,
        [250_000, 500_000, 1_000_000, 2_000_000, 3_000_000, 3_000_000]
    );
    for _ in 0..1000 {
        b.record_failure();
    }
    assert_eq!(b.base_delay(ms(250), ms(3000)), 3_000_000);
    let mut huge = Backoff::new(0);
    for _ in 0..200 {
        huge.record_failure();
    }
    assert_eq!(huge.base_delay(Duration::MAX, Duration::MAX), u64::MAX);
    assert_eq!(huge.base_delay(ms(1), Duration::MAX), u64::MAX);
    assert_eq!(huge.base_delay(Duration::ZERO, ms(5)), 0);
}

#[test]
fn measured_from_attempt_start() {
    let mut b = Backoff::new(0);
    b.attempt_started(Instant::from_millis(1000), false);
    b.record_failure();
    // A slow failing attempt: only the rest of the delay remains.
    assert_eq!(
        b.next_attempt_at(Instant::from_millis(1200), ms(250), ms(3000)),
        Instant::from_millis(1500)
    );
    // Already late: go now.
    assert_eq!(
        b.next_attempt_at(Instant::from_millis(9000), ms(250), ms(3000)),
        Instant::from_millis(9000)
    );
}

#[test]
fn jitter_stays_within_a_quarter_below_base() {
    let mut b = Backoff::new(0xDEAD_BEEF);
    b.attempt_started(Instant::ZERO, false);
    for _ in 0..4 {
        b.record_failure(); // base 16 s
    }
    let mut distinct = 0;
    let mut last = Instant::ZERO;
    for _ in 0..100 {
        let at = b.next_attempt_at(
            Instant::ZERO,
            Duration::from_secs(1),
            Duration::from_secs(300),
        );
        assert!(
            at >= Instant::from_secs(12) && at <= Instant::from_secs(16),
            "{at:?}"
        );
        if at != last {
            distinct += 1;
        }
        last = at;
    }
    assert!(distinct > 50);
}

#[test]
fn attempt_budget() {
    let mut b = Backoff::new(0);
    b.reset(Some(1));
    assert!(b.may_retry());
    b.attempt_started(Instant::ZERO, true);
    assert!(!b.may_retry());
    b.attempt_started(Instant::ZERO, true);
    assert!(!b.may_retry());
    b.reset(None);
    b.attempt_started(Instant::ZERO, true);
    assert!(b.may_retry());
    b.set_attempts(Some(0));
    assert!(!b.may_retry());
}
