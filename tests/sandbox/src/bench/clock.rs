//! Wall-clock readings and their renderings (ISO 8601 for JSON, RFC 7231 for the
//! `date` header, `HH:MM:SS.mmm` for log lines).

use std::time::{SystemTime, UNIX_EPOCH};

use benchlink_core::bench::Timestamp;

/// Milliseconds since the Unix epoch (0 if the clock is before 1970).
pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// Whole seconds since the Unix epoch, as the server stores every time.
pub(crate) fn now_secs() -> u64 {
    now_ms() / 1000
}

/// `2015-11-03T13:39:27Z`.
pub(crate) fn iso(secs: u64) -> String {
    Timestamp::from_unix_seconds(secs).to_string()
}

/// `HH:MM:SS.mmm` (UTC), the time prefix of lager log lines.
pub(crate) fn time_of_day(ms: u64) -> String {
    let day_ms = ms % 86_400_000;
    format!(
        "{:02}:{:02}:{:02}.{:03}",
        day_ms / 3_600_000,
        day_ms / 60_000 % 60,
        day_ms / 1000 % 60,
        day_ms % 1000
    )
}

/// The `date` header: `Tue, 03 Nov 2015 13:39:27 GMT`, derived from the ISO rendering
/// so that the calendar arithmetic lives in one place (core's `Timestamp`).
pub(crate) fn http_date(secs: u64) -> String {
    const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let iso = iso(secs);
    let field = |range: std::ops::Range<usize>| iso.get(range).unwrap_or("00");
    let month = field(5..7).parse::<usize>().unwrap_or(1);
    let weekday = usize::try_from(secs / 86_400 % 7).unwrap_or(0);
    format!(
        "{}, {} {} {} {} GMT",
        DAYS.get(weekday).unwrap_or(&"Thu"),
        field(8..10),
        MONTHS.get(month.wrapping_sub(1)).unwrap_or(&"Jan"),
        field(0..4),
        field(11..19)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renderings() {
        assert_eq!(time_of_day(1_446_557_967_080), "13:39:27.080");
        assert_eq!(iso(1_446_557_967), "2015-11-03T13:39:27Z");
        assert_eq!(http_date(1_446_557_967), "Tue, 03 Nov 2015 13:39:27 GMT");
    }
}
