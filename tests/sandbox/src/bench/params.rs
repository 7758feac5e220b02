//! The parameters of `/start`: query options with their validation, the
//! environment-variable fallback for unknown keys, and the multipart script upload.

use super::erlang;
use super::error::ApiError;
use super::multipart::{self, Part};
use super::query::{QValue, Query};

/// `nodes`: a count to allocate from a cloud, or preallocated hosts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Nodes {
    /// One value that parses as an integer.
    Count(i64),
    /// One other value: a comma-separated host list.
    Hosts(String),
    /// Two or more values (the benchmark fails at `allocating_hosts`).
    Repeated(Vec<String>),
}

/// Everything `/restart` needs to clone a benchmark (the real server's `params.bin`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct StartParams {
    pub(crate) script_name: String,
    pub(crate) script: String,
    pub(crate) includes: Vec<(String, Vec<u8>)>,
    pub(crate) nodes: Nodes,
    pub(crate) emails: Vec<String>,
    pub(crate) node_git: Option<String>,
    pub(crate) node_commit: Option<String>,
    pub(crate) emulate_bench_crash: bool,
    pub(crate) deallocate_after_bench: bool,
    pub(crate) provision_nodes: bool,
    pub(crate) benchmark_name: Option<String>,
    pub(crate) cloud: Option<String>,
    pub(crate) exclusive: Vec<String>,
    pub(crate) vm_args: Vec<String>,
    pub(crate) metric_update_interval_ms: Option<i64>,
    pub(crate) tags: Vec<String>,
    pub(crate) parent: Option<i64>,
    /// Caller-supplied env, sorted by key, first value of a repeated key kept; `None`
    /// values are bare keys (which crash initialisation: 500).
    pub(crate) env: Vec<(String, Option<String>)>,
}

/// Query keys that are parameters, never environment variables.
const RESERVED: [&str; 14] = [
    "nodes",
    "email",
    "node_git",
    "node_commit",
    "emulate_bench_crash",
    "deallocate_after_bench",
    "provision_nodes",
    "benchmark_name",
    "cloud",
    "exclusive",
    "vm_args",
    "metric_update_interval_ms",
    "tags",
    "parent",
];

/// Splits on any comma or space, dropping empty pieces (`tags`, `exclusive`).
pub(crate) fn split_labels(s: &str) -> Vec<String> {
    s.split([',', ' '])
        .filter(|p| !p.is_empty())
        .map(str::to_owned)
        .collect()
}

fn invalid(value: &str, param: &str) -> ApiError {
    ApiError::badarg(format!("Invalid value \"{value}\" for {param}"))
}

fn single<'a>(q: &'a Query, key: &str) -> Option<&'a QValue> {
    q.first(key)
}

fn string_param(q: &Query, key: &str) -> Result<Option<String>, ApiError> {
    match single(q, key) {
        None => Ok(None),
        Some(QValue::Str(s)) => Ok(Some(s.clone())),
        Some(QValue::True) => Err(invalid("true", key)),
    }
}

fn bool_param(q: &Query, key: &str, default: bool) -> Result<bool, ApiError> {
    match single(q, key).map(QValue::text) {
        None => Ok(default),
        Some("true") => Ok(true),
        Some("false") => Ok(false),
        Some(other) => Err(invalid(other, key)),
    }
}

fn int_param(q: &Query, key: &str) -> Result<Option<i64>, ApiError> {
    match single(q, key) {
        None => Ok(None),
        Some(v) => v
            .text()
            .parse::<i64>()
            .map(Some)
            .map_err(|_| invalid(v.text(), key)),
    }
}

/// A list parameter: every value must be a string; otherwise the reason shows the
/// `~p` rendering of the whole list.
fn list_param(q: &Query, key: &str) -> Result<Vec<String>, ApiError> {
    let values = q.all(key);
    if values.iter().any(|v| matches!(v, QValue::True)) {
        let rendered: Vec<String> = values
            .iter()
            .map(|v| match v {
                QValue::Str(s) => erlang::binary(s.as_bytes()),
                QValue::True => "true".to_owned(),
            })
            .collect();
        return Err(invalid(&format!("[{}]", rendered.join(",")), key));
    }
    Ok(values.iter().map(|v| v.text().to_owned()).collect())
}

impl StartParams {
    /// Validates the query (400 `badarg` on a bad value), then the multipart body
    /// (400 `Missing script file` if not multipart, 500 for a non-file part or not
    /// exactly one `bench` part).
    pub(crate) fn parse(
        q: &Query,
        content_type: Option<&str>,
        body: &[u8],
    ) -> Result<StartParams, ApiError> {
        let nodes_values = list_param(q, "nodes")?;
        let nodes = match nodes_values.as_slice() {
            [] => Nodes::Count(1),
            [one] => one
                .parse::<i64>()
                .map_or_else(|_| Nodes::Hosts(one.clone()), Nodes::Count),
            many => Nodes::Repeated(many.to_vec()),
        };
        let emails = list_param(q, "email")?;
        let node_git = string_param(q, "node_git")?;
        let node_commit = string_param(q, "node_commit")?;
        let emulate_bench_crash = bool_param(q, "emulate_bench_crash", false)?;
        let deallocate_after_bench = bool_param(q, "deallocate_after_bench", true)?;
        let provision_nodes = bool_param(q, "provision_nodes", true)?;
        let benchmark_name = string_param(q, "benchmark_name")?;
        let cloud = string_param(q, "cloud")?;
        let exclusive = string_param(q, "exclusive")?
            .map(|s| split_labels(&s))
            .unwrap_or_default();
        let vm_args = list_param(q, "vm_args")?;
        let metric_update_interval_ms = int_param(q, "metric_update_interval_ms")?;
        if let Some(ms) = metric_update_interval_ms.filter(|ms| *ms < 1000) {
            return Err(invalid(&ms.to_string(), "metric_update_interval_ms"));
        }
        let tags = string_param(q, "tags")?
            .map(|s| split_labels(&s))
            .unwrap_or_default();
        let parent = int_param(q, "parent")?;
        let mut env: Vec<(String, Option<String>)> = Vec::new();
        for (k, v) in &q.pairs {
            if RESERVED.contains(&k.as_str()) || env.iter().any(|(e, _)| e == k) {
                continue;
            }
            env.push((
                k.clone(),
                match v {
                    QValue::Str(s) => Some(s.clone()),
                    QValue::True => None,
                },
            ));
        }
        env.sort_by(|a, b| a.0.cmp(&b.0));

        let boundary = multipart::boundary(content_type)
            .ok_or_else(|| ApiError::badarg("Missing script file"))?;
        let parts = multipart::parse(body, &boundary)
            .map_err(|e| ApiError::internal(&format!("{{badmatch,{}}}", e.0)))?;
        let Upload {
            script_name,
            script,
            includes,
        } = script_parts(parts)?;
        Ok(StartParams {
            script_name,
            script,
            includes,
            nodes,
            emails,
            node_git,
            node_commit,
            emulate_bench_crash,
            deallocate_after_bench,
            provision_nodes,
            benchmark_name,
            cloud,
            exclusive,
            vm_args,
            metric_update_interval_ms,
            tags,
            parent,
            env,
        })
    }
}

/// The files of a multipart upload.
pub(crate) struct Upload {
    /// The `bench` part's file name.
    pub(crate) script_name: String,
    /// The scenario text.
    pub(crate) script: String,
    /// `include` parts: file name and content.
    pub(crate) includes: Vec<(String, Vec<u8>)>,
}

/// Script name and text and the include files of a multipart upload.
pub(crate) fn script_parts(parts: Vec<Part>) -> Result<Upload, ApiError> {
    if parts.iter().any(|p| p.filename.is_none()) {
        return Err(ApiError::internal(
            "{badmatch,{ok,[{<<\"content-disposition\">>,<<\"form-data\">>}]}}",
        ));
    }
    let mut bench = None;
    let mut includes = Vec::new();
    for part in parts {
        let filename = part.filename.unwrap_or_default();
        match part.name.as_str() {
            "bench" if bench.is_none() => bench = Some((filename, part.body)),
            "bench" => return Err(ApiError::internal("{badmatch,[bench,bench]}")),
            "include" => includes.push((filename, part.body)),
            _ => {}
        }
    }
    let (name, body) = bench.ok_or_else(|| ApiError::internal("{badmatch,[]}"))?;
    Ok(Upload {
        script_name: name,
        script: String::from_utf8_lossy(&body).into_owned(),
        includes,
    })
}
