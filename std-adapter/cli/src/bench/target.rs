//! Which benchmark server `benchlink bench` talks to: `--host`, else `MZBENCH_API_HOST`
//! (clap reads both into one value), else a server already answering on
//! `localhost:4800` — where `benchlink sandbox` and a real MZBench listen by default, so
//! `benchlink sandbox &` followed by `bench start` and `bench status` meet there. Only
//! when nothing answers is a throw-away server started in the process, and the command
//! says on stderr that its benchmarks end with it.

use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

use benchlink_sandbox::bench::{BenchServer, BenchServerConfig};

use crate::fail::Fail;
use benchlink_std::bench::ServerAddress;

/// Where a running server is looked for when no host is given (the official CLI's
/// default host).
pub(super) const DEFAULT_PROBE: &str = "localhost:4800";
/// Environment variable that moves the probe elsewhere (`HOST:PORT`), or turns it off
/// (`off`). Meant for tests and for machines where port 4800 belongs to something else.
pub(super) const PROBE_ENV: &str = "BENCHLINK_BENCH_PROBE";
/// How long each address of the probe may take to accept a TCP connection.
const PROBE_TIMEOUT: Duration = Duration::from_millis(300);

/// The resolved server.
pub(super) struct Target {
    pub(super) address: ServerAddress,
    /// The in-process server, when nothing else was found; it lives as long as this.
    pub(super) local: Option<BenchServer>,
}

impl Target {
    /// Resolves the server from the host given on the command line or in the environment
    /// (`host`), then the probe address (`probe`, `None` for no probe).
    pub(super) fn resolve(host: Option<&str>, probe: Option<&str>) -> Result<Target, Fail> {
        let parse = |h: &str| ServerAddress::parse(h).map_err(|e| Fail(1, e.to_string()));
        if let Some(host) = host {
            return Ok(Target {
                address: parse(host)?,
                local: None,
            });
        }
        if let Some(probe) = probe {
            if answers(probe) {
                eprintln!("no --host or MZBENCH_API_HOST: using the server answering at {probe}");
                return Ok(Target {
                    address: parse(probe)?,
                    local: None,
                });
            }
        }
        let server = BenchServer::start(BenchServerConfig::default()).map_err(|e| {
            Fail(
                1,
                format!("could not start the local benchmark server: {e}"),
            )
        })?;
        let nowhere = probe.map_or(String::new(), |p| format!(" and nothing answers at {p}"));
        eprintln!(
            "no --host or MZBENCH_API_HOST{nowhere}: using a local benchmark server at {} \
             whose benchmarks end with this command (run `benchlink sandbox` to keep one)",
            server.host()
        );
        Ok(Target {
            address: parse(&server.host())?,
            local: Some(server),
        })
    }

    /// The probe address from [`PROBE_ENV`]: unset or empty gives [`DEFAULT_PROBE`],
    /// `off` gives none.
    pub(super) fn probe_from_env() -> Option<String> {
        match std::env::var(PROBE_ENV) {
            Ok(v) if v.eq_ignore_ascii_case("off") => None,
            Ok(v) if !v.trim().is_empty() => Some(v.trim().to_owned()),
            _ => Some(DEFAULT_PROBE.to_owned()),
        }
    }
}

/// True when some address of `host_port` accepts a TCP connection.
fn answers(host_port: &str) -> bool {
    let Ok(addrs) = host_port.to_socket_addrs() else {
        return false;
    };
    addrs
        .into_iter()
        .any(|a| TcpStream::connect_timeout(&a, PROBE_TIMEOUT).is_ok())
}

#[cfg(test)]
mod tests {
    use super::Target;
    use benchlink_sandbox::bench::{BenchServer, BenchServerConfig};

    /// A port on 127.0.0.1 where nothing listens (bound, then released).
    fn closed_port() -> String {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        drop(listener);
        addr.to_string()
    }

    #[test]
    fn host_then_probe_then_in_process() {
        let running = BenchServer::start(BenchServerConfig::fast()).unwrap();
        let given = Target::resolve(Some("example.org:1"), Some(&running.host())).unwrap();
        assert_eq!(given.address.authority, "example.org:1");
        assert!(given.local.is_none(), "a given host wins over the probe");

        let probed = Target::resolve(None, Some(&running.host())).unwrap();
        assert_eq!(probed.address.authority, running.host());
        assert!(probed.local.is_none(), "the running server is used");

        let closed = closed_port();
        let fallback = Target::resolve(None, Some(&closed)).unwrap();
        let local = fallback.local.as_ref().expect("an in-process server");
        assert_eq!(fallback.address.authority, local.host());
        assert_ne!(fallback.address.authority, closed);

        let unprobed = Target::resolve(None, None).unwrap();
        assert!(unprobed.local.is_some(), "no probe: straight to in-process");
    }
}
