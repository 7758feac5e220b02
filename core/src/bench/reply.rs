//! Reading a whole JSON reply body into its typed, borrowed form.
//!
//! Every reply type reads members by name (the server's alphabetical key order is not
//! relied upon), tolerates members it does not know, and treats a member that is `null`
//! like one that is absent.

use super::error::{Error, REPLY_MAX_DEPTH};
use super::status::Status;
use crate::json::{self, Object, Value};

/// A reply body type: built from the validated JSON value of a 200 reply.
///
/// ```
/// use benchlink_core::bench::{FromReply, Stopped};
/// let v = benchlink_core::json::parse(r#"{"status":"stopped"}"#, 4).unwrap();
/// assert_eq!(Stopped::from_value(v), Ok(Stopped));
/// ```
pub trait FromReply<'a>: Sized {
    /// Reads the reply from its JSON value.
    fn from_value(value: Value<'a>) -> Result<Self, Error<'a>>;
}

/// Turns an HTTP status and the whole (decoded) body into the typed reply: a 200 is
/// parsed as `T`, anything else becomes the typed error via [`Error::from_reply`].
///
/// ```
/// use benchlink_core::bench::{read_reply, BenchStatus, Error, ReasonCode, Status};
/// let ok: BenchStatus = read_reply(200, br#"{"create_time":"2015-11-03T13:39:20Z","status":"checking_script"}"#).unwrap();
/// assert_eq!(ok.status, Status::CheckingScript);
/// let err = read_reply::<BenchStatus>(404, br#"{"reason":"Benchmark 12 is not found","reason_code":"not_found"}"#);
/// assert!(matches!(err, Err(Error::Server(e)) if e.reason_code == ReasonCode::NotFound));
/// ```
pub fn read_reply<'a, T: FromReply<'a>>(status: u16, body: &'a [u8]) -> Result<T, Error<'a>> {
    if status != 200 {
        return Err(Error::from_reply(status, body));
    }
    T::from_value(json::parse_bytes(body, REPLY_MAX_DEPTH)?)
}

/// The value as an object, or an error naming what was expected.
pub(crate) fn object<'a>(
    value: Value<'a>,
    expected: &'static str,
) -> Result<Object<'a>, Error<'a>> {
    value.as_object().ok_or(Error::UnexpectedReply { expected })
}

/// Member `key` converted by `convert`: `Ok(None)` when absent or `null`, an error naming
/// `expected` when present but not convertible.
pub(crate) fn member<'a, T>(
    obj: Object<'a>,
    key: &str,
    expected: &'static str,
    convert: impl FnOnce(Value<'a>) -> Option<T>,
) -> Result<Option<T>, Error<'a>> {
    match obj.get(key) {
        None => Ok(None),
        Some(v) if v.is_null() => Ok(None),
        Some(v) => convert(v)
            .map(Some)
            .ok_or(Error::UnexpectedReply { expected }),
    }
}

/// A member that must be present.
pub(crate) fn required<'a, T>(
    obj: Object<'a>,
    key: &str,
    expected: &'static str,
    convert: impl FnOnce(Value<'a>) -> Option<T>,
) -> Result<T, Error<'a>> {
    member(obj, key, expected, convert)?.ok_or(Error::UnexpectedReply { expected })
}

/// Reply of `/start` and `/restart`: the new benchmark's id and `pending`.
///
/// ```
/// use benchlink_core::bench::{read_reply, Started, Status};
/// let r: Started = read_reply(200, br#"{"id":12,"status":"pending"}"#).unwrap();
/// assert_eq!((r.id, r.status), (12, Status::Pending));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Started<'a> {
    /// The id of the new benchmark (ids start at 0 on a fresh server).
    pub id: u64,
    /// Always `pending` on the reference server.
    pub status: Status<'a>,
}

impl<'a> FromReply<'a> for Started<'a> {
    fn from_value(value: Value<'a>) -> Result<Self, Error<'a>> {
        let obj = object(value, "an object with `id` and `status`")?;
        Ok(Started {
            id: required(obj, "id", "`id` as an unsigned integer", |v| v.as_u64())?,
            status: required(obj, "status", "`status` as a string", |v| {
                v.as_str().map(Status::from_json)
            })?,
        })
    }
}

/// Defines a unit reply type that checks one member for one exact string.
macro_rules! ack {
    ($(#[$doc:meta])* $name:ident: $key:literal = $value:literal) => {
        $(#[$doc])*
        #[doc = concat!(
            "\n\nThe body is `{\"", $key, "\":\"", $value, "\"}`.\n\n",
            "```\nuse benchlink_core::bench::{read_reply, ", stringify!($name), "};\n",
            "assert_eq!(read_reply(200, br#\"{\"", $key, "\":\"", $value, "\"}\"#), Ok(",
            stringify!($name), "));\n",
            "assert!(read_reply::<", stringify!($name), ">(200, b\"{}\").is_err());\n```"
        )]
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[cfg_attr(feature = "defmt", derive(defmt::Format))]
        pub struct $name;

        impl<'a> FromReply<'a> for $name {
            fn from_value(value: Value<'a>) -> Result<Self, Error<'a>> {
                const EXPECTED: &str = concat!("`", $key, "` = \"", $value, "\"");
                let obj = object(value, EXPECTED)?;
                match obj.get($key).and_then(|v| v.as_str()) {
                    Some(text) if text == $value => Ok($name),
                    _ => Err(Error::UnexpectedReply { expected: EXPECTED }),
                }
            }
        }
    };
}

ack! {
    /// Reply of `/stop`, also for a benchmark that had already finished (a no-op then).
    Stopped: "status" = "stopped"
}

ack! {
    /// Reply of `/change_env`: the new values reached the running benchmark.
    EnvSet: "status" = "set"
}

ack! {
    /// Reply of `/run_command`: the command was sent to the workers.
    CommandSent: "status" = "ok"
}

ack! {
    /// Reply of `/typecheck`: the scenario is well-typed (errors come as
    /// [`ReasonCode::Error`](crate::bench::ReasonCode::Error)).
    TypecheckOk: "result" = "ok"
}

/// The `{}` reply of `/add_tags`, `/remove_tags`, `/email_report`,
/// `/deallocate_cluster` and `/remove_cluster_info`. Any object is accepted, so a future
/// server adding members does not break the call.
///
/// ```
/// use benchlink_core::bench::{read_reply, Empty};
/// assert_eq!(read_reply(200, b"{}"), Ok(Empty));
/// assert!(read_reply::<Empty>(200, b"[]").is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Empty;

impl<'a> FromReply<'a> for Empty {
    fn from_value(value: Value<'a>) -> Result<Self, Error<'a>> {
        object(value, "an object").map(|_| Empty)
    }
}
