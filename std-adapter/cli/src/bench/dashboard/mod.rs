//! A live dashboard in the browser, as MZBench's users know it: the list of benchmarks
//! with their status, times and tags; a page per benchmark with its status timeline,
//! its charts growing while it runs (grouped as in `bench report`), a readout of the
//! values under the pointer, the tail of its log, its results, environment and tags;
//! and the comparison of several benchmarks' metrics over the time since each started.
//!
//! It is read-only, serves only what is in the binary (no CDN, no web font; a content
//! security policy forbids the pages anything else), listens on loopback unless told
//! otherwise, and keeps a bounded amount of everything ([`Board`]). The charts are drawn
//! here, by the same code as `bench plot`'s SVG files and `bench report`'s page (which is
//! this page frozen into one file), and thinned to about two points per pixel column
//! before they leave: a page's cost depends on its number of charts, not on how long
//! the benchmark ran.
//!
//! Pages learn of news by asking for it: the dashboard holds the request until the
//! benchmark changed (or 20 s passed), waits a moment more for the changes that come
//! with it, and answers with the page's sections rendered anew.
//!
//! A program that runs a benchmark itself feeds the board directly:
//!
//! ```
//! use benchlink_cli::dashboard::{Dashboard, Meta};
//! use benchlink_std::bench::StatusInfo;
//!
//! let dashboard = Dashboard::serve("127.0.0.1:0".parse()?)?;
//! let board = dashboard.board();
//! board.add_fed(1, Meta { name: Some("agent".into()), ..Meta::default() });
//! board.set_status(1, StatusInfo {
//!     status_text: "running".into(),
//!     create_time: None, start_time: None, finish_time: None, reason: None,
//! });
//! board.push_samples(1, [("latency.50", 1_700_000_000, 1.5), ("latency.99", 1_700_000_000, 4.0)]);
//! println!("dashboard: {}", dashboard.benchmark_url(1));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod board;
mod http;
pub(crate) mod page;
mod watch;

use std::collections::HashMap;
use std::net::{SocketAddr, TcpListener};
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub(crate) use self::board::Bench;
use self::board::State;
pub use self::board::{Board, Meta};
use self::http::{Reply, Request};
use self::page::{Mode, Sections, MAX_COMPARED};
use benchlink_std::bench::BenchClient;

/// How long a page's request for news is held when nothing changes.
const NEWS_WAIT: Duration = Duration::from_secs(20);
/// After a change, how long the answer waits for the changes that come with it (the
/// other series of the same second): a page is redrawn a few times a second at most.
const NEWS_SETTLE: Duration = Duration::from_millis(300);
/// Answers kept for other pages that ask for the same news.
const CACHED: usize = 32;

/// A dashboard being served.
#[derive(Debug)]
pub struct Dashboard {
    board: Arc<Board>,
    url: String,
}

impl Dashboard {
    /// Serves a dashboard on `listen` (port 0: any free port) from a thread of its own,
    /// for as long as the process runs.
    ///
    /// ```
    /// let dashboard = benchlink_cli::dashboard::Dashboard::serve("127.0.0.1:0".parse()?)?;
    /// assert!(dashboard.url().starts_with("http://127.0.0.1:"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn serve(listen: SocketAddr) -> std::io::Result<Dashboard> {
        let listener = TcpListener::bind(listen)?;
        let address = listener.local_addr()?;
        let board = Board::new();
        let site = Arc::new(Site {
            board: Arc::clone(&board),
            cache: Mutex::new(HashMap::new()),
        });
        std::thread::Builder::new()
            .name("dashboard".into())
            .spawn(move || http::serve(listener, Arc::new(move |r: &Request| site.route(r))))?;
        Ok(Dashboard {
            board,
            url: format!("http://{address}/"),
        })
    }

    /// The list page's address.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Benchmark `id`'s page.
    pub fn benchmark_url(&self, id: u64) -> String {
        format!("{}benchmarks/{id}", self.url)
    }

    /// What the pages show; feeders write here.
    pub fn board(&self) -> &Arc<Board> {
        &self.board
    }

    /// Shows the log of benchmark `id` as the server behind `client` streams it (with a
    /// connection of its own), for a feeder that pushes the benchmark's samples itself.
    ///
    /// ```no_run
    /// # let dashboard = benchlink_cli::dashboard::Dashboard::serve("127.0.0.1:0".parse()?)?;
    /// let client = benchlink_std::bench::BenchClient::from_host("localhost:4800")?;
    /// dashboard.follow_log(&client, 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn follow_log(&self, client: &BenchClient, id: u64) {
        watch::follow_log(&self.board, client, id);
    }

    /// Shows the server behind `client`: the benchmarks `ids` (followed at once), its
    /// newest ones and every one it starts from now on.
    pub(crate) fn watch(&self, client: BenchClient, ids: &[u64]) {
        watch::watch_server(&self.board, client, ids);
    }
}

/// The pages, over the board.
struct Site {
    board: Arc<Board>,
    /// The last answers to requests for news, by request and version.
    cache: Mutex<Answers>,
}

/// Answers to requests for news, by request and version.
type Answers = HashMap<(String, u64), Arc<Vec<u8>>>;

/// What a page shows, for [`Site::page`] and [`Site::news`].
enum View {
    List,
    Benchmark(u64),
    Compare(Vec<u64>),
}

impl View {
    fn version(&self, state: &State) -> u64 {
        let of = |id: &u64| state.benches.get(id).map_or(0, |b| b.version);
        match self {
            View::List => state.version,
            View::Benchmark(id) => of(id),
            View::Compare(ids) => ids.iter().map(of).fold(0, u64::wrapping_add),
        }
    }

    /// Nothing will change any more.
    fn over(&self, state: &State) -> bool {
        let over = |id: &u64| {
            state
                .benches
                .get(id)
                .is_some_and(|b| b.is_final() && b.results.is_some())
        };
        match self {
            View::List => false,
            View::Benchmark(id) => over(id),
            View::Compare(ids) => ids.iter().all(over),
        }
    }

    fn sections(&self, state: &State) -> Sections {
        match self {
            View::List => page::list_sections(state),
            View::Benchmark(id) => match state.benches.get(id) {
                Some(bench) => page::benchmark_sections(*id, bench, Mode::Live),
                None => vec![("head", format!("<h1>Benchmark {id}: not known</h1>\n"))],
            },
            View::Compare(ids) => page::compare_sections(ids, state),
        }
    }

    fn title(&self, state: &State) -> String {
        match self {
            View::List => "Benchmarks".to_owned(),
            View::Benchmark(id) => match state.benches.get(id) {
                Some(bench) => page::benchmark_title(*id, bench),
                None => format!("Benchmark {id}"),
            },
            View::Compare(ids) => {
                let ids: Vec<String> = ids.iter().map(u64::to_string).collect();
                format!("Comparison of {}", ids.join(", "))
            }
        }
    }

    /// Where its page asks for news.
    fn news(&self) -> String {
        match self {
            View::List => "/news/list".to_owned(),
            View::Benchmark(id) => format!("/news/benchmarks/{id}"),
            View::Compare(ids) => format!("/news/compare?ids={}", ids_text(ids)),
        }
    }
}

fn ids_text(ids: &[u64]) -> String {
    ids.iter().map(u64::to_string).collect::<Vec<_>>().join(",")
}

impl Site {
    fn route(&self, request: &Request) -> Reply {
        let path = request.path.as_str();
        match path {
            "/dashboard.js" => {
                return Reply::new(200, "text/javascript; charset=utf-8", page::SCRIPT)
            }
            "/dashboard.css" => return Reply::new(200, "text/css; charset=utf-8", page::STYLE),
            "/favicon.ico" => return Reply::new(204, "text/plain", ""),
            _ => {}
        }
        let (news, path) = match path.strip_prefix("/news") {
            Some(rest) => (true, rest),
            None => (false, path),
        };
        let view = match path {
            "/" | "/list" => View::List,
            "/compare" => {
                let mut ids: Vec<u64> = request
                    .query
                    .iter()
                    .filter(|(k, _)| k == "ids")
                    .flat_map(|(_, v)| v.split(',').filter_map(|id| id.trim().parse().ok()))
                    .collect();
                ids.dedup();
                ids.truncate(MAX_COMPARED);
                if ids.is_empty() {
                    return Reply::text(400, "compare what? give ids=1,2\n");
                }
                View::Compare(ids)
            }
            _ => match path
                .strip_prefix("/benchmarks/")
                .and_then(|id| id.parse::<u64>().ok())
            {
                Some(id) => View::Benchmark(id),
                None => return Reply::text(404, "no such page\n"),
            },
        };
        // A page shown follows its benchmarks.
        let shown: &[u64] = match &view {
            View::Benchmark(id) => std::slice::from_ref(id),
            View::Compare(ids) => ids,
            View::List => &[],
        };
        for id in shown {
            self.board.want(*id);
        }
        if news {
            let seen = request
                .param("version")
                .and_then(|v| v.parse().ok())
                .unwrap_or(u64::MAX);
            self.news(&view, seen)
        } else {
            let state = self.board.lock();
            let version = view.version(&state);
            let sections = view.sections(&state);
            let title = format!("{} · benchlink", view.title(&state));
            drop(state);
            let news = view.news();
            Reply::html(page::document(
                &title,
                &sections,
                Mode::Live,
                Some((&news, version)),
            ))
        }
    }

    /// The page's sections once they changed past version `seen` (204 when they did not
    /// within [`NEWS_WAIT`]).
    fn news(&self, view: &View, seen: u64) -> Reply {
        let changed = view.version(&self.board.wait_past(seen, NEWS_WAIT, |s| view.version(s)));
        if changed == seen {
            return Reply::new(204, "application/json", "");
        }
        std::thread::sleep(NEWS_SETTLE);
        let key = view.news();
        let state = self.board.lock();
        let version = view.version(&state);
        let cached = self
            .cache
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&(key.clone(), version))
            .cloned();
        let body = match cached {
            Some(body) => body,
            None => {
                let sections: serde_json::Map<String, serde_json::Value> = view
                    .sections(&state)
                    .into_iter()
                    .map(|(name, html)| (name.to_owned(), html.into()))
                    .collect();
                let body = Arc::new(
                    serde_json::json!({
                        "version": version,
                        "over": view.over(&state),
                        "sections": sections,
                    })
                    .to_string()
                    .into_bytes(),
                );
                let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
                if cache.len() >= CACHED {
                    cache.clear();
                }
                cache.insert((key, version), Arc::clone(&body));
                body
            }
        };
        drop(state);
        Reply::new(200, "application/json", body.as_ref().clone())
    }
}

/// The frozen page of one benchmark, for `bench report`.
pub(crate) fn frozen_benchmark(id: u64, bench: &Bench) -> (String, usize) {
    let sections = page::benchmark_sections(id, bench, Mode::Frozen);
    let charts = sections
        .iter()
        .find(|(name, _)| *name == "charts")
        .map_or(0, |(_, html)| {
            html.matches("<figure class=\"chart\"").count()
        });
    let title = page::benchmark_title(id, bench);
    (
        page::document(&title, &sections, Mode::Frozen, None),
        charts,
    )
}
