//! Verbose logging to stderr, switched on by `DEBUG_BENCHLINK_SDK=debug` (like the
//! reference SDK's `DEBUG_SATORI_SDK`). benchlink logs through the `log` crate; an
//! application with its own logger keeps it, and this one is installed only when the
//! variable asks for it and no logger is set yet.

use std::io::Write;

/// The environment variable that turns on verbose logging.
pub const DEBUG_ENV: &str = "DEBUG_BENCHLINK_SDK";

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

/// Installs the stderr logger at debug level if `DEBUG_BENCHLINK_SDK=debug`; returns
/// whether verbose logging is on. Called by the clients' constructors; safe to call
/// any number of times.
///
/// ```
/// // Without the variable nothing changes.
/// std::env::remove_var("DEBUG_BENCHLINK_SDK");
/// assert!(!benchlink_std::logging::init_from_env());
/// ```
pub fn init_from_env() -> bool {
    if std::env::var(DEBUG_ENV).as_deref() != Ok("debug") {
        return false;
    }
    if log::set_logger(&LOGGER).is_ok() {
        log::set_max_level(log::LevelFilter::Debug);
    }
    true
}
