use super::*;
use crate::json::testing::Buf;

fn text(t: Timestamp) -> Buf<32> {
    Buf::display(t)
}

#[test]
fn spec_examples_round_trip() {
    for (expected, secs) in [
        ("1970-01-01T00:00:00Z", 0),
        ("2015-11-03T13:39:27Z", 1_446_557_967),
        ("2015-11-03T13:39:20Z", 1_446_557_960),
        ("2016-11-14T16:00:59Z", 1_479_139_259),
        ("2000-02-29T23:59:59Z", 951_868_799),
        ("2038-01-19T03:14:08Z", 2_147_483_648),
        ("9999-12-31T23:59:59Z", 253_402_300_799),
    ] {
        let t = Timestamp::parse(expected).unwrap();
        assert_eq!(t.unix_seconds(), secs, "{expected}");
        assert_eq!(text(t), expected);
    }
}

#[test]
fn every_day_round_trips() {
    // 1970 to 2100 day by day, covering every month length and the 2000/2100 rules.
    for day in 0..47_482u64 {
        let t = Timestamp::from_unix_seconds(day * SECONDS_PER_DAY + 3_723);
        assert_eq!(Timestamp::parse(text(t).as_str()), Ok(t));
    }
}

#[test]
fn huge_values_print_without_panicking() {
    let s = text(Timestamp::from_unix_seconds(u64::MAX));
    assert!(s.as_str().ends_with('Z'), "{s:?}");
}

#[test]
fn strict_syntax() {
    use TimestampError::*;
    for (text, offset) in [
        ("", 0),
        ("2015-11-03T13:39:27", 19),
        ("2015-11-03T13:39:27z", 19),
        ("2015-11-03T13:39:27.5Z", 19),
        ("2015-11-03T13:39:27Z ", 20),
        ("2015-11-03T13:39:27+00:00", 19),
        ("15-11-03T13:39:27Z", 2),
        ("+015-11-03T13:39:27Z", 0),
        ("2015-1-03T13:39:27Z", 6),
        ("２015-11-03T13:39:27Z", 0),
    ] {
        assert_eq!(Timestamp::parse(text), Err(Syntax { offset }), "{text}");
    }
    for (text, field) in [
        ("1969-12-31T23:59:59Z", "year"),
        ("2015-00-03T13:39:27Z", "month"),
        ("2015-13-03T13:39:27Z", "month"),
        ("2015-11-00T13:39:27Z", "day"),
        ("2015-11-31T13:39:27Z", "day"),
        ("2100-02-29T13:39:27Z", "day"),
        ("2015-11-03T24:00:00Z", "hour"),
        ("2015-11-03T13:60:27Z", "minute"),
        ("2015-11-03T13:39:60Z", "second"),
    ] {
        assert_eq!(Timestamp::parse(text), Err(OutOfRange { field }), "{text}");
    }
}
