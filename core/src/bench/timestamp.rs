//! Timestamps as the benchmark server writes them.
//!
//! Inside the server every time is whole Unix seconds; JSON replies render them as
//! `YYYY-MM-DDTHH:MM:SSZ` (UTC, zero-padded, no fraction) and `/data` and `/clusters_info`
//! carry the raw integer. [`Timestamp`] is the integer, with a strict parser and a
//! `Display` for the text form, so both renderings round-trip without a date-time
//! dependency: the calendar arithmetic is Howard Hinnant's days-from-civil algorithm.

use core::fmt;

/// A point in time in whole seconds since the Unix epoch (UTC), as the server keeps it.
///
/// ```
/// use benchlink_core::bench::Timestamp;
/// let t: Timestamp = "2015-11-03T13:39:27Z".parse().unwrap();
/// assert_eq!(t.unix_seconds(), 1_446_557_967);
/// assert_eq!(Timestamp::from_unix_seconds(1_446_557_967), t);
/// assert_eq!(t.to_string(), "2015-11-03T13:39:27Z");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Timestamp(u64);

/// Why a text is not a server timestamp.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum TimestampError {
    /// The text is not exactly `YYYY-MM-DDTHH:MM:SSZ`: the byte at `offset` is not what the
    /// format requires there (`offset` equal to the length means the text is too short).
    Syntax {
        /// Byte offset of the first byte that does not fit the format.
        offset: usize,
    },
    /// The fields have the right shape but name no real time, such as month 13, February
    /// 30th, hour 24 or a year before 1970 (Unix seconds are unsigned here).
    OutOfRange {
        /// The offending field: `"year"`, `"month"`, `"day"`, `"hour"`, `"minute"` or
        /// `"second"`.
        field: &'static str,
    },
}

impl fmt::Display for TimestampError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TimestampError::Syntax { offset } => {
                write!(f, "timestamp is not YYYY-MM-DDTHH:MM:SSZ (byte {offset})")
            }
            TimestampError::OutOfRange { field } => write!(f, "timestamp {field} out of range"),
        }
    }
}

impl core::error::Error for TimestampError {}

const SECONDS_PER_DAY: u64 = 86_400;
/// Days from 0000-03-01 (the start of the algorithm's era 0) to 1970-01-01.
const EPOCH_DAYS: u32 = 719_468;
const DAYS_PER_ERA: u32 = 146_097;

impl Timestamp {
    /// The timestamp `secs` seconds after 1970-01-01T00:00:00Z, as `/clusters_info` and
    /// `/data` carry it.
    ///
    /// ```
    /// use benchlink_core::bench::Timestamp;
    /// assert_eq!(Timestamp::from_unix_seconds(0).unix_seconds(), 0);
    /// ```
    pub const fn from_unix_seconds(secs: u64) -> Self {
        Timestamp(secs)
    }

    /// Seconds since the Unix epoch.
    ///
    /// ```
    /// use benchlink_core::bench::Timestamp;
    /// assert_eq!(Timestamp::from_unix_seconds(1_479_139_259).unix_seconds(), 1_479_139_259);
    /// ```
    pub const fn unix_seconds(self) -> u64 {
        self.0
    }

    /// Parses the server's text form `YYYY-MM-DDTHH:MM:SSZ` strictly: exactly 20 bytes,
    /// zero-padded fields, literal `T` and `Z`, no fraction, no offset, no leap second.
    /// Strictness keeps `parse` and `Display` exact inverses.
    ///
    /// ```
    /// use benchlink_core::bench::{Timestamp, TimestampError};
    /// assert_eq!(Timestamp::parse("1970-01-01T00:00:00Z"), Ok(Timestamp::from_unix_seconds(0)));
    /// assert_eq!(Timestamp::parse("2015-11-03 13:39:27Z"), Err(TimestampError::Syntax { offset: 10 }));
    /// assert_eq!(Timestamp::parse("2015-02-29T00:00:00Z"), Err(TimestampError::OutOfRange { field: "day" }));
    /// ```
    pub fn parse(text: &str) -> Result<Self, TimestampError> {
        const SHAPE: &[u8; 20] = b"dddd-dd-ddTdd:dd:ddZ";
        let bytes = text.as_bytes();
        // The shape is checked and the six fields read in one pass: each is all ASCII
        // digits, so at most 9999, and the calendar arithmetic fits 32 bits, which a
        // Cortex-M does in single instructions.
        let mut fields = [0u32; 6];
        let mut field = 0;
        for (offset, &want) in SHAPE.iter().enumerate() {
            match bytes.get(offset) {
                Some(&b) if want == b'd' && b.is_ascii_digit() => {
                    if let Some(value) = fields.get_mut(field) {
                        *value = *value * 10 + u32::from(b - b'0');
                    }
                }
                Some(&b) if want != b'd' && b == want => field += 1,
                _ => return Err(TimestampError::Syntax { offset }),
            }
        }
        if bytes.len() > SHAPE.len() {
            return Err(TimestampError::Syntax {
                offset: SHAPE.len(),
            });
        }
        let [year, month, day, hour, minute, second] = fields;
        let in_range = |value: u32, min: u32, max: u32, name: &'static str| {
            if (min..=max).contains(&value) {
                Ok(())
            } else {
                Err(TimestampError::OutOfRange { field: name })
            }
        };
        in_range(year, 1970, 9999, "year")?;
        in_range(month, 1, 12, "month")?;
        in_range(day, 1, days_in_month(year, month), "day")?;
        in_range(hour, 0, 23, "hour")?;
        in_range(minute, 0, 59, "minute")?;
        in_range(second, 0, 59, "second")?;
        let days = days_from_civil(year, month, day);
        Ok(Timestamp(
            u64::from(days) * SECONDS_PER_DAY + u64::from(hour * 3600 + minute * 60 + second),
        ))
    }
}

impl core::str::FromStr for Timestamp {
    type Err = TimestampError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Timestamp::parse(s)
    }
}

/// Prints `YYYY-MM-DDTHH:MM:SSZ`, the form the server writes. Years past 9999 (only
/// reachable through [`Timestamp::from_unix_seconds`]) print with more digits instead of
/// wrapping.
impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (year, month, day) = civil_from_days(self.0 / SECONDS_PER_DAY);
        let secs = self.0 % SECONDS_PER_DAY;
        let (hour, minute, second) = (secs / 3600, secs / 60 % 60, secs % 60);
        write!(
            f,
            "{year:04}-{month:02}-{day:02}T{hour:02}:{minute:02}:{second:02}Z"
        )
    }
}

fn is_leap(year: u32) -> bool {
    year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
}

fn days_in_month(year: u32, month: u32) -> u32 {
    match month {
        2 if is_leap(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a valid date with `year >= 1970`. Years start in March so
/// that the leap day is the last day of the shifted year.
fn days_from_civil(year: u32, month: u32, day: u32) -> u32 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year / 400;
    let year_of_era = year % 400;
    let shifted_month = if month > 2 { month - 3 } else { month + 9 };
    let day_of_year = (153 * shifted_month + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * DAYS_PER_ERA + day_of_era - EPOCH_DAYS
}

/// The inverse of [`days_from_civil`] for any `days` a `u64` of seconds can produce
/// (below 2^48, so no step can overflow).
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + u64::from(EPOCH_DAYS);
    let era = z / u64::from(DAYS_PER_ERA);
    let day_of_era = z % u64::from(DAYS_PER_ERA);
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let shifted_month = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * shifted_month + 2) / 5 + 1;
    let month = if shifted_month < 10 {
        shifted_month + 3
    } else {
        shifted_month - 9
    };
    let year = year_of_era + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests;
