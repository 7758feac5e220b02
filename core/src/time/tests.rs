use super::*;

#[test]
fn duration_from_micros_is_core_s() {
    for m in [
        0,
        1,
        63,
        64,
        999_999,
        1_000_000,
        1_000_001,
        123_456_789_012,
        u64::MAX - 1,
        u64::MAX,
    ]
    .into_iter()
    .chain((0..64).map(|i| 1u64 << i))
    .chain((0..64).map(|i| (1u64 << i) - 1))
    {
        assert_eq!(duration_from_micros(m), Duration::from_micros(m), "{m}");
    }
}

#[test]
fn arithmetic_saturates() {
    let huge = Duration::from_secs(u64::MAX);
    assert_eq!(Instant::ZERO + huge, Instant::MAX);
    assert_eq!(Instant::MAX - huge, Instant::ZERO);
    assert_eq!(Instant::ZERO.checked_add(huge), None);
    let mut t = Instant::from_secs(1);
    t += Duration::from_millis(500);
    assert_eq!(t.as_millis(), 1_500);
    assert_eq!(
        Instant::from_secs(1) - Instant::from_secs(2),
        Duration::ZERO
    );
    assert_eq!(Instant::from_secs(u64::MAX), Instant::MAX);
}
