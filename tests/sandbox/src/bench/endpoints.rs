//! Request pre-processing (Authorization prefix, `id` parsing, token check) and the
//! exact (method, path) dispatch of the API, with the JSON endpoints. Streaming
//! endpoints live in `streams`.

use std::io;
use std::sync::Arc;

use super::clock;
use super::erlang;
use super::error::ApiError;
use super::http::{Conn, Flow, Request};
use super::json::Json;
use super::logfile::LogFile;
use super::metrics::Metrics;
use super::multipart;
use super::params::{self, StartParams};
use super::pipeline;
use super::query::{QValue, Query};
use super::scenario::{self, Scenario};
use super::server_log::Severity;
use super::state::{is_final, Bench, EmailReport, Shared};
use super::streams;

/// Sends a JSON reply.
pub(crate) fn reply(
    conn: &mut Conn,
    status: u16,
    body: &Json,
    keep_alive: bool,
) -> io::Result<Flow> {
    conn.respond(
        status,
        &[("content-type", "application/json".to_owned())],
        body.encode().as_bytes(),
        keep_alive,
    )
}

/// Sends an error reply.
pub(crate) fn reply_err(conn: &mut Conn, err: &ApiError, keep_alive: bool) -> io::Result<Flow> {
    reply(conn, err.status, &err.body(), keep_alive)
}

/// 404 for anything not routed.
fn wrong_endpoint(req: &Request) -> ApiError {
    ApiError::not_found(format!(
        "Wrong endpoint: {} {}",
        erlang::binary(req.method.as_bytes()),
        erlang::binary(req.path.as_bytes())
    ))
}

/// A required query parameter is missing: 500 on a modern server, 400 on OTP 17.
fn missing(shared: &Shared, name: &str) -> ApiError {
    if shared.config.quirks.missing_param_500 {
        ApiError::internal(&format!("{{badkey,{name}}}"))
    } else {
        ApiError::badarg(format!("Missing {name} argument"))
    }
}

/// Who sent a request.
#[derive(Clone, Copy, Debug)]
struct Caller<'a> {
    /// `anonymous` when authentication is off.
    login: &'a str,
    /// In `admin_list`: may act on every benchmark (everyone may when auth is off).
    admin: bool,
}

/// The real server's pre-processing of every API request, in its order: the
/// Authorization header must start with `Bearer ` (else 500, even with auth off), `id`
/// must be one integer (else 500), then the token is checked (403) and, on the endpoints
/// restricted to a benchmark's author, the author (404 for an unknown benchmark, 403
/// for someone else's unless an admin). Returns the `id` if one was given, and the caller.
fn preprocess<'a>(
    shared: &'a Shared,
    req: &Request,
    q: &Query,
) -> Result<(Option<i64>, Caller<'a>), ApiError> {
    let auth = req.header("authorization");
    let token = match auth {
        None => "",
        Some(h) => h
            .strip_prefix("Bearer ")
            .ok_or_else(|| ApiError::internal("{badmatch,<<\"authorization header\">>}"))?,
    };
    let ids = q.all("id");
    let id = match ids.as_slice() {
        [] => None,
        [QValue::Str(s)] => Some(s.parse::<i64>().map_err(|_| {
            ApiError::internal(&format!(
                "{{case_clause,{{error,{{id,int,{}}}}}}}",
                erlang::binary(s.as_bytes())
            ))
        })?),
        _ => {
            return Err(ApiError::internal(
                "{case_clause,{error,{id,int,bad_value}}}",
            ))
        }
    };
    let anonymous = Caller {
        login: "anonymous",
        admin: true,
    };
    let Some(users) = &shared.config.users else {
        return Ok((id, anonymous));
    };
    if matches!(req.path.as_str(), "/auth" | "/github_auth") {
        return Ok((id, anonymous));
    }
    let user = users
        .iter()
        .find(|u| !u.token.is_empty() && u.token == token)
        .ok_or_else(ApiError::forbidden)?;
    let caller = Caller {
        login: &user.login,
        admin: user.admin,
    };
    let author_only = matches!(req.path.as_str(), "/stop" | "/change_env" | "/run_command");
    if let (true, false, Some(id)) = (author_only, caller.admin, id) {
        let st = shared.lock();
        let bench = st.benches.get(&id).ok_or_else(|| ApiError::no_bench(id))?;
        if bench.author != caller.login {
            return Err(ApiError::forbidden());
        }
    }
    Ok((id, caller))
}

/// Handles one request; the returned flow says whether the connection stays open.
pub(crate) fn handle(shared: &Arc<Shared>, conn: &mut Conn, req: &Request) -> io::Result<Flow> {
    let ka = req.keep_alive;
    {
        let mut st = shared.lock();
        *st.requests.entry(req.path.clone()).or_default() += 1;
        let target = if req.query.is_empty() {
            req.path.clone()
        } else {
            format!("{}?{}", req.path, req.query)
        };
        st.log(
            Severity::Debug,
            &format!("[ API ] Request: {} {}", req.method, target),
        );
    }
    if req.method == "GET" && req.path == "/" {
        let page = "<!DOCTYPE html><html><head><title>MZBench</title></head><body>benchlink MZBench emulator</body></html>";
        return conn.respond(
            200,
            &[("content-type", "text/html".to_owned())],
            page.as_bytes(),
            ka,
        );
    }
    let q = Query::parse(&req.query);
    let (id, caller) = match preprocess(shared, req, &q) {
        Ok(pre) => pre,
        Err(e) => return reply_err(conn, &e, ka),
    };
    let need_id = |name: &str| id.ok_or_else(|| missing(shared, name));
    let result: Result<Json, ApiError> = match (req.method.as_str(), req.path.as_str()) {
        ("POST", "/start") => start(shared, req, &q, caller.login),
        ("GET", "/status") => {
            need_id("id").and_then(|id| with_bench(shared, id, Bench::status_json))
        }
        ("GET", "/stop") => need_id("id").and_then(|id| stop(shared, id)),
        ("GET", "/restart") => need_id("id").and_then(|id| restart(shared, id, caller.login)),
        ("GET", "/change_env") => need_id("id").and_then(|id| change_env(shared, id, &q)),
        ("GET", "/run_command") => need_id("id").and_then(|id| run_command(shared, id, &q)),
        ("GET", "/results") => need_id("id").and_then(|id| {
            with_bench(shared, id, |b| {
                b.results
                    .clone()
                    .filter(|_| is_final(b.status))
                    .unwrap_or_else(Json::empty)
            })
        }),
        ("GET", "/email_report") => need_id("id").and_then(|id| email_report(shared, id, &q)),
        ("GET", "/clusters_info") => Ok(clusters_info(shared)),
        ("GET", "/deallocate_cluster") => {
            need_id("id").and_then(|id| deallocate_cluster(shared, id))
        }
        ("GET", "/remove_cluster_info") => need_id("id").and_then(|id| {
            let mut st = shared.lock();
            if st.clusters.remove(&id).is_some() {
                st.log(
                    Severity::Info,
                    &format!("[ API ] Cluster {id} info removed"),
                );
            } else if !shared.config.quirks.remove_unknown_cluster_ok {
                return Err(ApiError::not_found(format!("Cluster {id} is not found")));
            }
            Ok(Json::empty())
        }),
        ("GET", "/add_tags") => need_id("id").and_then(|id| tags(shared, id, &q, true)),
        ("GET", "/remove_tags") => need_id("id").and_then(|id| tags(shared, id, &q, false)),
        ("POST", "/typecheck") => {
            if shared.config.quirks.typecheck_closes_connection {
                conn.close_after();
            }
            return match typecheck(req) {
                Ok(()) => reply(conn, 200, &Json::obj([("result", Json::str("ok"))]), ka),
                Err(e) => reply_err(conn, &e, ka),
            };
        }
        ("GET", "/graphs") => {
            let location = format!("/#/bench/{}/overview", id.unwrap_or(0));
            return conn.respond(302, &[("location", location)], b"", ka);
        }
        ("GET", "/github_auth") => {
            let (Some(_code), Some(url)) = (q.first("code"), q.first("url")) else {
                return reply_err(conn, &missing(shared, "code"), ka);
            };
            return conn.respond(
                303,
                &[("location", url.text().to_owned())],
                b"Authenticated",
                ka,
            );
        }
        ("POST", "/auth") => match q.first("type").map(QValue::text) {
            None => Err(missing(shared, "type")),
            Some("ref") => Ok(Json::obj([
                ("reason", Json::str("User not found")),
                ("res", Json::str("error")),
                ("use", Json::empty()),
            ])),
            Some(_) => Err(ApiError::forbidden()),
        },
        ("POST", "/sign-out") => Ok(Json::empty()),
        ("GET", "/log") => {
            return need_stream(shared, conn, id, ka, |c, id| {
                streams::log(shared, c, id, false, ka)
            })
        }
        ("GET", "/userlog") => {
            return need_stream(shared, conn, id, ka, |c, id| {
                streams::log(shared, c, id, true, ka)
            })
        }
        ("GET", "/data") => {
            return need_stream(shared, conn, id, ka, |c, id| {
                streams::data(shared, c, id, ka)
            })
        }
        ("GET", "/server_logs") if !shared.config.quirks.server_logs_removed => {
            return streams::server_logs(shared, conn, &q, ka);
        }
        _ => Err(wrong_endpoint(req)),
    };
    match result {
        Ok(body) => reply(conn, 200, &body, ka),
        Err(e) => {
            if e.status >= 500 {
                let mut st = shared.lock();
                st.log(
                    Severity::Error,
                    &format!("[ API ] {} {} failed: {}", req.method, req.path, e.code),
                );
            }
            reply_err(conn, &e, ka)
        }
    }
}

fn need_stream(
    shared: &Shared,
    conn: &mut Conn,
    id: Option<i64>,
    ka: bool,
    f: impl FnOnce(&mut Conn, i64) -> io::Result<Flow>,
) -> io::Result<Flow> {
    match id {
        Some(id) => f(conn, id),
        None => reply_err(conn, &missing(shared, "id"), ka),
    }
}

fn with_bench<T>(shared: &Shared, id: i64, f: impl FnOnce(&Bench) -> T) -> Result<T, ApiError> {
    shared
        .lock()
        .benches
        .get(&id)
        .map(f)
        .ok_or_else(|| ApiError::no_bench(id))
}

fn start(shared: &Arc<Shared>, req: &Request, q: &Query, author: &str) -> Result<Json, ApiError> {
    if shared.is_shutdown() {
        return Err(ApiError::unavailable());
    }
    let params = StartParams::parse(q, req.header("content-type"), &req.body)?;
    let id = create(shared, params, author)?;
    Ok(Json::obj([
        ("id", Json::int(id)),
        ("status", Json::str("pending")),
    ]))
}

/// Creates a benchmark and starts its pipeline. The id is taken first, so it is used
/// up even when creation fails (like the real server).
fn create(shared: &Arc<Shared>, params: StartParams, author: &str) -> Result<i64, ApiError> {
    let mut st = shared.lock();
    let id = st.next_id;
    st.next_id += 1;
    let mut env: Vec<(String, String)> = Vec::new();
    for (k, v) in &params.env {
        match v {
            Some(v) => env.push((k.clone(), v.clone())),
            None => {
                st.log(
                    Severity::Error,
                    &format!("[ API ] Benchmark #{id} initialisation crashed: bad env {k}"),
                );
                return Err(ApiError::internal(&format!(
                    "{{bad_env_value,{}}}",
                    erlang::binary(k.as_bytes())
                )));
            }
        }
    }
    for (k, v) in [
        ("mzb_script_name", params.script_name.clone()),
        ("mzb_bench_id", id.to_string()),
    ] {
        if !env.iter().any(|(e, _)| e == k) {
            env.push((k.to_owned(), v));
        }
    }
    env.sort();
    let now_ms = clock::now_ms();
    let compression = shared.config.log_compression;
    let mut bench = Bench {
        id,
        scenario: Scenario::analyze(&params.script),
        name: params
            .benchmark_name
            .clone()
            .unwrap_or_else(|| params.script_name.clone()),
        author: author.to_owned(),
        status: "init",
        crashed: false,
        create_time: now_ms / 1000,
        start_time: None,
        finish_time: None,
        tags: params.tags.clone(),
        env,
        stop_requested: false,
        abort: false,
        process_alive: true,
        director_connected: false,
        log: LogFile::new(compression, now_ms),
        user_log: LogFile::new(compression, now_ms),
        metrics: Metrics::default(),
        results: None,
        commands: Vec::new(),
        pid: format!("<0.{}.0>", 400 + id.rem_euclid(10_000) * 3),
        exclusive_checks: 0,
        data_waits: 0,
        params,
    };
    bench.api_log(
        Severity::Info,
        &format!(
            "Starting benchmark #{id} '{}' by {}",
            bench.name, bench.author
        ),
    );
    let name = bench.name.clone();
    st.benches.insert(id, bench);
    st.log(
        Severity::Info,
        &format!("[ API ] Starting benchmark #{id} '{name}'"),
    );
    // Housekeeping: forget old finished benchmarks unless tagged `favorites`.
    let keep = i64::try_from(shared.config.max_bench_num).unwrap_or(i64::MAX);
    let limit = st.next_id.saturating_sub(keep);
    st.benches.retain(|bid, b| {
        *bid >= limit || b.process_alive || b.tags.iter().any(|t| t == "favorites")
    });
    shared.notify();
    drop(st);
    pipeline::spawn(shared, id);
    Ok(id)
}

fn stop(shared: &Shared, id: i64) -> Result<Json, ApiError> {
    let mut st = shared.lock();
    let b = st
        .benches
        .get_mut(&id)
        .ok_or_else(|| ApiError::no_bench(id))?;
    if !is_final(b.status) && b.process_alive {
        b.stop_requested = true;
        b.finish("stopped");
        b.api_log(Severity::Info, "Benchmark stopped by request");
        st.log(Severity::Info, &format!("[ API ] Stopping benchmark #{id}"));
        shared.notify();
    }
    Ok(Json::obj([("status", Json::str("stopped"))]))
}

fn restart(shared: &Arc<Shared>, id: i64, author: &str) -> Result<Json, ApiError> {
    if shared.is_shutdown() {
        return Err(ApiError::unavailable());
    }
    let mut params = with_bench(shared, id, |b| b.params.clone())?;
    params.parent = Some(id);
    let new_id = create(shared, params, author)?;
    Ok(Json::obj([
        ("id", Json::int(new_id)),
        ("status", Json::str("pending")),
    ]))
}

fn change_env(shared: &Shared, id: i64, q: &Query) -> Result<Json, ApiError> {
    let mut st = shared.lock();
    let b = st
        .benches
        .get_mut(&id)
        .ok_or_else(|| ApiError::no_bench(id))?;
    if is_final(b.status) {
        return Err(ApiError::internal("{error,finished}"));
    }
    if b.status != "running" {
        return Err(if shared.config.quirks.change_env_not_running_500 {
            ApiError::internal("{{not_running,{gen_server,call,[mzb_api_server,change_env]}}}")
        } else {
            ApiError::not_running()
        });
    }
    for (k, v) in q.pairs.iter().filter(|(k, _)| k != "id") {
        let v = v.text().to_owned();
        match b.env.iter_mut().find(|(e, _)| e == k) {
            Some(slot) => slot.1 = v,
            None => b.env.push((k.clone(), v)),
        }
    }
    b.env.sort();
    b.api_log(Severity::Info, "Environment changed");
    shared.notify();
    Ok(Json::obj([("status", Json::str("set"))]))
}

fn run_command(shared: &Shared, id: i64, q: &Query) -> Result<Json, ApiError> {
    let pool = q.first("pool").ok_or_else(|| missing(shared, "pool"))?;
    let percent = q
        .first("percent")
        .ok_or_else(|| missing(shared, "percent"))?;
    let command = q
        .first("command")
        .ok_or_else(|| missing(shared, "command"))?;
    let not_int = || ApiError::badarg("Provided percent or pool is not an int");
    let pool: i64 = pool.text().parse().map_err(|_| not_int())?;
    let percent: i64 = percent.text().parse().map_err(|_| not_int())?;
    let command = match command {
        QValue::Str(s) if !s.is_empty() => s.clone(),
        _ => {
            return Err(ApiError::internal(
                "{case_clause,{error,{command,nonempty,<<>>}}}",
            ))
        }
    };
    let mut st = shared.lock();
    let b = st
        .benches
        .get_mut(&id)
        .ok_or_else(|| ApiError::no_bench(id))?;
    if is_final(b.status) {
        return Err(ApiError::badarg(format!("Benchmark {id} is finished")));
    }
    if b.status != "running" {
        return Err(ApiError::not_running());
    }
    let size = usize::try_from(pool.saturating_sub(1))
        .ok()
        .and_then(|i| b.scenario.pools.get(i))
        .map(|p| p.size)
        .ok_or_else(|| ApiError::internal(&format!("{{error,{{bad_pool,{pool}}}}}")))?;
    if let Some(arg) = command
        .trim()
        .strip_prefix("print(")
        .and_then(|c| c.strip_suffix(')'))
    {
        let text = arg.trim();
        let text = text
            .strip_prefix('"')
            .and_then(|t| t.strip_suffix('"'))
            .map_or(text.to_owned(), erlang::string);
        let workers =
            ((i64::try_from(size).unwrap_or(1) * percent.clamp(0, 100) + 99) / 100).min(100);
        for w in 0..workers {
            b.user_log_line(
                &format!("<0.{}.0>", 300 + w % 7),
                &format!("Dummy print: {text}"),
            );
        }
    }
    b.api_log(
        Severity::Info,
        &format!("Command on pool {pool} ({percent}%): {command}"),
    );
    b.commands.push(command);
    shared.notify();
    Ok(Json::obj([("status", Json::str("ok"))]))
}

fn email_report(shared: &Shared, id: i64, q: &Query) -> Result<Json, ApiError> {
    let addrs = q.all("addr");
    if addrs.is_empty() {
        return Err(missing(shared, "addr"));
    }
    let mut st = shared.lock();
    let b = st.benches.get(&id).ok_or_else(|| ApiError::no_bench(id))?;
    if !is_final(b.status) {
        return Err(ApiError::badarg("Benchmark in not ended yet"));
    }
    let split = !shared.config.quirks.email_addr_not_split;
    let addresses: Vec<String> = addrs
        .iter()
        .flat_map(|a| {
            let text = a.text();
            let parts: Vec<&str> = if split {
                text.split(',')
                    .map(str::trim)
                    .filter(|p| !p.is_empty())
                    .collect()
            } else {
                vec![text]
            };
            parts.into_iter().map(str::to_owned).collect::<Vec<_>>()
        })
        .collect();
    st.log(
        Severity::Info,
        &format!(
            "[ API ] Sending report for benchmark #{id} to {}",
            addresses.join(", ")
        ),
    );
    st.email_reports.push(EmailReport {
        bench_id: u64::try_from(id).unwrap_or(0),
        addresses,
        on_request: true,
    });
    Ok(Json::empty())
}

fn clusters_info(shared: &Shared) -> Json {
    let st = shared.lock();
    let mut clusters: Vec<_> = st.clusters.values().collect();
    clusters.sort_by_key(|c| (c.timestamp, c.id));
    Json::Arr(clusters.iter().map(|c| c.to_json()).collect())
}

fn deallocate_cluster(shared: &Shared, id: i64) -> Result<Json, ApiError> {
    let mut st = shared.lock();
    let cluster = st
        .clusters
        .get(&id)
        .ok_or_else(|| ApiError::not_found("Cluster not found"))?;
    if cluster.state != "allocated" {
        return Err(ApiError::not_found("Cluster is not allocated"));
    }
    st.clusters.remove(&id);
    st.log(Severity::Info, &format!("[ API ] Cluster {id} deallocated"));
    shared.notify();
    Ok(Json::empty())
}

fn tags(shared: &Shared, id: i64, q: &Query, add: bool) -> Result<Json, ApiError> {
    let tags = match q.first("tags") {
        None => return Err(missing(shared, "tags")),
        Some(QValue::Str(s)) if !s.is_empty() => params::split_labels(s),
        Some(_) => {
            return Err(ApiError::internal(
                "{case_clause,{error,{tags,nonempty,<<>>}}}",
            ))
        }
    };
    let mut st = shared.lock();
    let b = st
        .benches
        .get_mut(&id)
        .ok_or_else(|| ApiError::no_bench(id))?;
    if add {
        let existing = b.tags.clone();
        b.tags
            .extend(tags.into_iter().filter(|t| !existing.contains(t)));
    } else {
        for t in tags {
            if let Some(i) = b.tags.iter().position(|x| *x == t) {
                b.tags.remove(i);
            }
        }
    }
    shared.notify();
    Ok(Json::empty())
}

fn typecheck(req: &Request) -> Result<(), ApiError> {
    let boundary = multipart::boundary(req.header("content-type"))
        .ok_or_else(|| ApiError::badarg("Missing script file"))?;
    let parts = multipart::parse(&req.body, &boundary)
        .map_err(|e| ApiError::internal(&format!("{{badmatch,{}}}", e.0)))?;
    let upload = params::script_parts(parts)?;
    scenario::check(&upload.script)
        .map(|_| ())
        .map_err(|reason| ApiError {
            status: 400,
            code: "error",
            reason,
        })
}
