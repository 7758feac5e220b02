//! The benchmark lifecycle as `/status` reports it.

use super::error::Error;
use super::reply::{member, object, required, FromReply};
use super::timestamp::Timestamp;
use crate::json::{JsonStr, Value};

text_enum! {
    /// A benchmark's status: a pipeline stage while it runs, then a final status.
    /// The upstream documentation lists only five values; the server reports every stage.
    Status in "bench" (example "running" => Running) {
        /// Only in the replies of `/start` and `/restart`, never from `/status`.
        Pending = "pending",
        /// Pipeline stage.
        Init = "init",
        /// Pipeline stage.
        CheckingScript = "checking_script",
        /// Pipeline stage: waiting for benchmarks sharing an `exclusive` label.
        WaitExclusive = "wait_exclusive",
        /// Pipeline stage (cannot be interrupted; a stop takes effect after it).
        AllocatingHosts = "allocating_hosts",
        /// Pipeline stage.
        Provisioning = "provisioning",
        /// Pipeline stage.
        ConnectNodes = "connect_nodes",
        /// Pipeline stage.
        StartingCollectors = "starting_collectors",
        /// Pipeline stage.
        UploadingScript = "uploading_script",
        /// Pipeline stage.
        UploadingIncludes = "uploading_includes",
        /// Pipeline stage.
        PreHooks = "pre_hooks",
        /// Pipeline stage.
        Starting = "starting",
        /// Pipeline stage: the workers run; `/change_env` and `/run_command` work now.
        Running = "running",
        /// Pipeline stage.
        PostHooks = "post_hooks",
        /// Final: every stage succeeded.
        Complete = "complete",
        /// Final: a stage failed, or the process crashed (then `reason` is `crashed`).
        Failed = "failed",
        /// Final: stopped by `/stop`.
        Stopped = "stopped",
        /// Final in practice: the server restarted while the benchmark was in flight.
        Zombie = "zombie",
    }
}

impl Status<'_> {
    /// True once nothing will change any more: `complete`, `failed`, `stopped` or
    /// `zombie`. Unlike the official CLI, `zombie` counts, so polling loops terminate.
    /// Streams (`/log`, `/data`) may still run for a while after this (finalize stages).
    ///
    /// ```
    /// use benchlink_core::bench::Status;
    /// assert!(Status::Zombie.is_final() && Status::Complete.is_final());
    /// assert!(!Status::Running.is_final() && !Status::Other("crashed").is_final());
    /// ```
    pub fn is_final(&self) -> bool {
        matches!(
            self,
            Status::Complete | Status::Failed | Status::Stopped | Status::Zombie
        )
    }
}

/// The `/status` reply.
///
/// ```
/// use benchlink_core::bench::{read_reply, BenchStatus, Status};
/// let s: BenchStatus = read_reply(200, br#"{"reason":"crashed","status":"failed"}"#).unwrap();
/// assert_eq!(s.status, Status::Failed);
/// assert!(s.reason.is_some_and(|r| r == "crashed"));
/// assert_eq!(s.create_time, None);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct BenchStatus<'a> {
    /// Where the benchmark is in its lifecycle.
    pub status: Status<'a>,
    /// When it was created (absent only in the crashed form).
    pub create_time: Option<Timestamp>,
    /// Set once the `wait_exclusive` stage completed.
    pub start_time: Option<Timestamp>,
    /// Set together with the final status.
    pub finish_time: Option<Timestamp>,
    /// Only in `{"reason":"crashed","status":"failed"}`: the process died without
    /// saving a status.
    pub reason: Option<JsonStr<'a>>,
}

impl<'a> FromReply<'a> for BenchStatus<'a> {
    fn from_value(value: Value<'a>) -> Result<Self, Error<'a>> {
        let obj = object(value, "a status object")?;
        let time = |key: &str, expected: &'static str| {
            member(obj, key, expected, |v| {
                Timestamp::parse(v.as_str()?.as_raw()).ok()
            })
        };
        Ok(BenchStatus {
            status: required(obj, "status", "`status` as a string", |v| {
                v.as_str().map(Status::from_json)
            })?,
            create_time: time("create_time", "`create_time` as YYYY-MM-DDTHH:MM:SSZ")?,
            start_time: time("start_time", "`start_time` as YYYY-MM-DDTHH:MM:SSZ")?,
            finish_time: time("finish_time", "`finish_time` as YYYY-MM-DDTHH:MM:SSZ")?,
            reason: member(obj, "reason", "`reason` as a string", |v| v.as_str())?,
        })
    }
}
