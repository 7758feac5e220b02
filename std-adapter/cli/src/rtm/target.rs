//! Which messaging service `benchlink rtm` talks to, and as whom, resolved the way
//! satori-rtm-cli users expect: the command line, then the environment
//! (`BENCHLINK_RTM_*`, then satori-rtm-cli's `SATORI_*`), then satori-rtm-cli's config
//! file, then a server already answering on `ws://127.0.0.1:8080` (where
//! `benchlink sandbox` listens). Only when all of these are silent is a throw-away
//! server started in the process, and the command says so on stderr.

use std::collections::BTreeMap;
use std::fmt::Display;
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use super::{Log, RtmArgs, Secret};
use crate::fail::{Fail, EXIT_INVALID};
use benchlink_sandbox::rtm::{RtmServer, RtmServerConfig, DEFAULT_APPKEY};

/// Where `benchlink sandbox` serves RTM by default.
const LOCAL_ENDPOINT: &str = "ws://127.0.0.1:8080";
/// How long to wait for a server on [`LOCAL_ENDPOINT`] to accept a TCP connection.
const PROBE: Duration = Duration::from_millis(300);

/// The resolved service.
pub(super) struct Target {
    pub endpoint: String,
    pub appkey: String,
    pub auth: Option<(String, Secret)>,
    /// The in-process server, when nothing else was found.
    pub local: Option<RtmServer>,
}

/// Values of satori-rtm-cli's config file, by option name.
type ConfigValues = BTreeMap<String, String>;

/// satori-rtm-cli's config file, read once: any long option can be set there under its
/// underscore name (`delivery = "simple"`, `count = 10`, `prettify_json = true`); the
/// command line wins over it.
#[derive(Default)]
pub(super) struct Settings {
    values: ConfigValues,
}

impl Settings {
    /// Reads the file named by `-c`, else the default one; says on stderr what it read.
    pub(super) fn read(explicit: Option<&Path>) -> Settings {
        Settings {
            values: read_config(explicit),
        }
    }

    /// `given` when the command line has it, else the file's `key`, checked.
    pub(super) fn or<T: FromStr>(&self, given: Option<T>, key: &str) -> Result<Option<T>, Fail>
    where
        T::Err: Display,
    {
        if given.is_some() {
            return Ok(given);
        }
        self.values
            .get(key)
            .map(|v| {
                v.parse()
                    .map_err(|e| Fail(EXIT_INVALID, format!("config file: {key} = {v}: {e}")))
            })
            .transpose()
    }

    /// A flag: on when given on the command line or set `true` in the file.
    /// (satori-rtm-cli ignores boolean keys of its file; benchlink honours them.)
    pub(super) fn flag(&self, given: bool, key: &str) -> Result<bool, Fail> {
        Ok(given || self.or(None::<bool>, key)?.unwrap_or(false))
    }
}

impl Target {
    pub(super) fn resolve(args: &RtmArgs, config: &Settings, log: Log) -> Result<Target, Fail> {
        let pick = |given: &Option<String>, env: &str, key: &str| {
            given
                .clone()
                .or_else(|| std::env::var(env).ok().filter(|v| !v.is_empty()))
                .or_else(|| config.values.get(key).cloned())
        };
        let endpoint = pick(&args.endpoint, "SATORI_ENDPOINT", "endpoint");
        let appkey = pick(&args.appkey, "SATORI_APPKEY", "appkey");
        let role = pick(&args.role, "SATORI_ROLE_NAME", "role_name");
        let secret = pick(
            &args.role_secret.as_ref().map(|s| s.0.clone()),
            "SATORI_ROLE_SECRET",
            "role_secret",
        );
        let auth = match (role, secret) {
            (Some(role), Some(secret)) => Some((role, Secret(secret))),
            (None, None) => None,
            // satori-rtm-cli silently skips authentication here.
            _ => {
                return Err(Fail(
                    1,
                    "--role_name and --role_secret go together (one of them is missing)".into(),
                ))
            }
        };
        if let Some(endpoint) = endpoint {
            let appkey = appkey.ok_or_else(|| {
                Fail(
                    1,
                    "Missing --appkey parameter (or BENCHLINK_RTM_APPKEY, SATORI_APPKEY, the \
                     config file's appkey)"
                        .into(),
                )
            })?;
            return Ok(Target {
                endpoint,
                appkey,
                auth,
                local: None,
            });
        }
        let appkey = appkey.unwrap_or_else(|| DEFAULT_APPKEY.to_owned());
        let sandbox: SocketAddr = ([127, 0, 0, 1], 8080).into();
        if TcpStream::connect_timeout(&sandbox, PROBE).is_ok() {
            log.warn(format_args!(
                "no endpoint given: using the server answering at {LOCAL_ENDPOINT}"
            ));
            return Ok(Target {
                endpoint: LOCAL_ENDPOINT.to_owned(),
                appkey,
                auth,
                local: None,
            });
        }
        let server = RtmServer::start(RtmServerConfig::default())
            .map_err(|e| Fail(1, format!("could not start the local RTM server: {e}")))?;
        log.warn(format_args!(
            "no endpoint given and nothing answers at {LOCAL_ENDPOINT}: using a local RTM \
             server at {} whose channels end with this command (run `benchlink sandbox` to \
             keep one)",
            server.endpoint()
        ));
        Ok(Target {
            endpoint: server.endpoint(),
            appkey,
            auth,
            local: Some(server),
        })
    }
}

/// The default config file: `$XDG_CONFIG_HOME/satori/rtm-cli.config`, `~/.config/…`
/// when the variable is unset or empty.
fn default_config_path() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CONFIG_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))?;
    Some(base.join("satori").join("rtm-cli.config"))
}

/// satori-rtm-cli's config file, echoed to stderr key by key as that tool does (the role
/// secret masked). A missing default file is silence; an unreadable explicit one or an
/// invalid one is said, and the command goes on without it.
fn read_config(explicit: Option<&Path>) -> ConfigValues {
    let Some(path) = explicit.map(Path::to_path_buf).or_else(default_config_path) else {
        return ConfigValues::new();
    };
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(_) => {
            if explicit.is_some() {
                eprintln!("Couldn't read the config file at {}", path.display());
            }
            return ConfigValues::new();
        }
    };
    let Some(values) = parse_config(&text) else {
        eprintln!("Invalid config file at {}", path.display());
        return ConfigValues::new();
    };
    for (key, value) in &values {
        let shown = if key == "role_secret" { "***" } else { value };
        eprintln!("From config file: {key} = {shown}");
    }
    values
}

/// The file's keys as option names: TOML, else the JSON object of the SDK's
/// `credentials.json` (`auth_role_name` and `auth_role_secret_key` are the role and its
/// secret). Values are kept as text (strings unquoted, numbers and booleans as written).
fn parse_config(text: &str) -> Option<ConfigValues> {
    if let Ok(table) = text.parse::<toml::Table>() {
        return Some(
            table
                .into_iter()
                .map(|(k, v)| {
                    let value = match v {
                        toml::Value::String(s) => s,
                        other => other.to_string(),
                    };
                    (k, value)
                })
                .collect(),
        );
    }
    let serde_json::Value::Object(map) = serde_json::from_str(text).ok()? else {
        return None;
    };
    Some(
        map.into_iter()
            .map(|(k, v)| {
                let key = match k.as_str() {
                    "auth_role_name" => "role_name".to_owned(),
                    "auth_role_secret_key" => "role_secret".to_owned(),
                    _ => k,
                };
                let value = match v {
                    serde_json::Value::String(s) => s,
                    other => other.to_string(),
                };
                (key, value)
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::parse_config;

    #[test]
    fn toml_and_json_config_files() {
        let toml = parse_config("endpoint = \"wss://e\"\nappkey = \"K\"\nverbosity = 3\n").unwrap();
        assert_eq!(toml["endpoint"], "wss://e");
        assert_eq!(toml["appkey"], "K");
        assert_eq!(toml["verbosity"], "3");
        let json = parse_config(
            r#"{"endpoint": "ws://x", "appkey": "A", "auth_role_name": "r", "auth_role_secret_key": "s"}"#,
        )
        .unwrap();
        assert_eq!(json["role_name"], "r");
        assert_eq!(json["role_secret"], "s");
        assert_eq!(json["endpoint"], "ws://x");
        assert!(parse_config("not = [valid").is_none());
        assert!(
            parse_config("").unwrap().is_empty(),
            "an empty file is an empty TOML table"
        );
    }
}
