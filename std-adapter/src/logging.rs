//! Verbose logging to stderr, switched on by `DEBUG_BENCHLINK_SDK=debug`, or by the
//! reference SDK's own `DEBUG_SATORI_SDK=debug` (so a program ported from Python keeps
//! its switch). benchlink logs through the `log` crate; an application with its own
//! logger keeps it, and this one is installed only when a variable asks for it and no
//! logger is set yet.

use std::io::Write;

/// The environment variable that turns on verbose logging.
pub const DEBUG_ENV: &str = "DEBUG_BENCHLINK_SDK";

/// The reference SDK's spelling of [`DEBUG_ENV`], honoured the same way.
pub const DEBUG_ENV_REFERENCE: &str = "DEBUG_SATORI_SDK";

struct Stderr;

impl log::Log for Stderr {
    fn enabled(&self, metadata: &log::Metadata<'_>) -> bool {
        metadata.target().starts_with("benchlink") || metadata.level() <= log::Level::Warn
    }

    fn log(&self, record: &log::Record<'_>) {
        if self.enabled(record.metadata()) {
            let _ = writeln!(
                std::io::stderr().lock(),
                "[{} {}] {}",
                record.level(),
                record.target(),
                record.args()
            );
        }
    }

    fn flush(&self) {}
}

static LOGGER: Stderr = Stderr;

/// Installs the stderr logger at debug level if `DEBUG_BENCHLINK_SDK=debug` or
/// `DEBUG_SATORI_SDK=debug`; returns whether verbose logging is on. Called by the
/// clients' constructors; safe to call any number of times.
///
/// ```
/// // Without the variables nothing changes.
/// std::env::remove_var("DEBUG_BENCHLINK_SDK");
/// std::env::remove_var("DEBUG_SATORI_SDK");
/// assert!(!benchlink_std::logging::init_from_env());
/// // The reference SDK's variable turns it on too.
/// std::env::set_var("DEBUG_SATORI_SDK", "debug");
/// assert!(benchlink_std::logging::init_from_env());
/// ```
pub fn init_from_env() -> bool {
    let asks = |var| std::env::var(var).as_deref() == Ok("debug");
    if !asks(DEBUG_ENV) && !asks(DEBUG_ENV_REFERENCE) {
        return false;
    }
    if log::set_logger(&LOGGER).is_ok() {
        log::set_max_level(log::LevelFilter::Debug);
    }
    true
}
