//! The error every command ends with, [`Fail`], and the exit codes it carries, shared by
//! `benchlink bench …` ([`crate::bench`]) and `benchlink rtm …` ([`crate::rtm`]).

use std::io;

/// Exit code of a benchmark that ended `failed` under `run` or `status --wait` (as the
/// official CLI; `results --wait` prints the results and exits 0).
pub(crate) const EXIT_FAILED_BENCH: u8 = 3;
/// Exit code of a missing scenario or nodes file (as the official CLI).
pub(crate) const EXIT_MISSING_FILE: u8 = 2;
/// Exit code of invalid or contradictory options, refused before anything is sent; for
/// `rtm` also a config file value, an input line that is not the JSON it looks like, a
/// bad recording.
pub(crate) const EXIT_INVALID: u8 = 4;
/// Exit code after Ctrl-C (the shell's 128 + SIGINT, as the official CLI).
pub(crate) const EXIT_INTERRUPTED: u8 = 130;

/// A failure with the exit code it maps to; under `bench`, an empty message prints
/// nothing.
#[derive(Debug)]
pub(crate) struct Fail(pub(crate) u8, pub(crate) String);

impl From<benchlink_std::bench::Error> for Fail {
    fn from(e: benchlink_std::bench::Error) -> Fail {
        let mut message = e.to_string();
        if e.http_status() == Some(403) {
            let server = e.server().unwrap_or("HOST:PORT");
            message.push_str(&format!(
                "\nhint: the server wants a valid token: pass --token TOKEN (or set \
                 BENCHLINK_TOKEN), or add the line `{server} TOKEN` to the token file \
                 ($MZBENCHTOKEN, else ~/.config/mzbench/token)"
            ));
        }
        Fail(1, message)
    }
}

impl From<benchlink_std::rtm::Error> for Fail {
    fn from(e: benchlink_std::rtm::Error) -> Fail {
        Fail(1, e.to_string())
    }
}

impl Fail {
    /// A write to stdout failed: a closed stdout (`| head`) ends the command quietly.
    pub(crate) fn output(e: io::Error) -> Fail {
        if e.kind() == io::ErrorKind::BrokenPipe {
            Fail(0, String::new())
        } else {
            Fail(1, format!("cannot write the output: {e}"))
        }
    }
}
