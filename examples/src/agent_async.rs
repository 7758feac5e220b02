//! The benchmark agent of [`agent`](crate::agent) written against the async API
//! (`benchlink_std::tokio`, on a multi-threaded tokio runtime): the same job, the same
//! output and summary line, the same exit codes — `cargo run -- --async`.
//!
//! What is async's own: the status is followed and the samples are read and published
//! concurrently in one task each instead of threads; each sample's publish is a task
//! that publishes it again when its connection dropped before the acknowledgement
//! (its `seq` lets the subscriber count a copy once); the subscriber is a
//! [`Subscription`](benchlink_std::tokio::rtm::Subscription) stream read by a task.

use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use benchlink_std::bench::StartOptions;
use benchlink_std::rtm::{
    ClientObserver, ClientOptions, ClientState, Error as RtmError, Mode, SharedObserver, SubState,
    SubscribeOptions,
};
use benchlink_std::tokio::bench::BenchClient;
use benchlink_std::tokio::rtm::{Client, Update};
use tokio::task::JoinSet;
use tokio::time::timeout;

use crate::agent::{
    bench_client, ctx, servers, AgentError, AgentOptions, Metric, RtmTarget, Summary, Tally,
    RTM_PATIENCE, SUBSCRIBER_PATIENCE,
};

/// Runs the agent on the current tokio runtime (multi-threaded: the blocking pool
/// carries the benchmark client), writing its progress to `out`.
///
/// ```no_run
/// use benchlink_examples::agent::AgentOptions;
/// # #[tokio::main] async fn main() -> Result<(), benchlink_examples::agent::AgentError> {
/// let summary = benchlink_examples::agent_async::run(&AgentOptions::local(), &mut std::io::stdout()).await?;
/// println!("{}", summary.line());
/// # Ok(()) }
/// ```
pub async fn run(options: &AgentOptions, out: &mut dyn Write) -> Result<Summary, AgentError> {
    let scenario = benchlink_std::bench::Scenario::from_file(&options.scenario)
        .map_err(ctx(&options.scenario.display().to_string()))?;
    let (host, target, _local) = servers(options, out)?;

    let bench = BenchClient::new(bench_client(&host, options.token.as_deref())?);
    let start = StartOptions {
        env: options.env.clone(),
        ..StartOptions::default()
    };
    let id = bench
        .start(&scenario, &start)
        .await
        .map_err(ctx("starting the benchmark"))?;
    let channel = format!("benchmarks.{id}.metrics");
    let _ = writeln!(
        out,
        "started benchmark {id} ({}) on {host}; publishing its metrics to {channel}",
        scenario.name
    );

    // The messaging side: the subscriber is listening before the first sample goes out.
    let (publisher, publisher_connects) = connect(&target).await?;
    let (subscriber, subscriber_connects) = connect(&target).await?;
    let mut subscription = subscriber
        .subscribe(&channel, Mode::Reliable, SubscribeOptions::default())
        .await
        .map_err(ctx("subscribing"))?;
    let subscribed = timeout(RTM_PATIENCE, async {
        while let Some(update) = subscription.next().await {
            match update {
                Update::State(SubState::Subscribed) => return Ok(()),
                Update::Failed(why) => return Err(AgentError(format!("subscribing: {why}"))),
                _ => {}
            }
        }
        Err(AgentError("subscribing: the subscription ended".into()))
    });
    subscribed
        .await
        .map_err(|_| AgentError("subscribing: no answer in time".into()))??;
    let tally = Arc::new(Mutex::new(Tally::default()));
    let counted = Arc::new(tokio::sync::Notify::new());
    let counting = tokio::spawn({
        let (tally, counted) = (tally.clone(), counted.clone());
        async move {
            let mut invalid = 0u64;
            while let Some(update) = subscription.next().await {
                match update {
                    Update::Message(m) => match serde_json::from_str::<Metric>(m.json()) {
                        Ok(metric) => tally
                            .lock()
                            .unwrap_or_else(PoisonError::into_inner)
                            .count([metric.seq]),
                        Err(_) => invalid += 1,
                    },
                    Update::Failed(why) => return Err(why),
                    _ => {}
                }
                counted.notify_one();
            }
            Ok(invalid)
        }
    });

    // The samples, on a connection of their own (a stream silent for a minute is dead:
    // the real server reports every 10 s), published as they come; the status, followed
    // meanwhile until it is final.
    let data_client = BenchClient::new(
        bench_client(&host, options.token.as_deref())?
            .with_stream_idle_timeout(Some(std::time::Duration::from_secs(60))),
    );
    let mut publishes = JoinSet::new();
    let reading = async {
        let mut data = data_client.data(id).await.map_err(ctx("reading /data"))?;
        let mut samples = 0u64;
        while let Some(sample) = data.next().await {
            let sample = sample.map_err(ctx("reading /data"))?;
            let message = serde_json::json!({
                "ts": sample.timestamp,
                "metric": sample.name,
                "value": sample.value_json(),
                "seq": samples,
            });
            let (client, channel) = (publisher.clone(), channel.clone());
            // Queued in order here (waiting for room if need be); acknowledged in the
            // background.
            let first = client.try_publish(&channel, &message);
            publishes.spawn(acknowledged(client, channel, message, first));
            samples += 1;
        }
        Ok::<_, AgentError>((samples, data.resumptions()))
    };
    let began = Instant::now();
    let mut last = String::new();
    let following = bench.wait(id, options.status_poll, |s| {
        if s.status_text != last {
            last.clone_from(&s.status_text);
            let _ = writeln!(
                out,
                "status: {last:<24} {:>5.1} s",
                began.elapsed().as_secs_f64()
            );
        }
    });
    let (read, status) = tokio::join!(reading, following);
    let (samples, resumed) = read?;
    let status = status.map_err(ctx("following the status"))?;

    let mut published = 0u64;
    let acks = timeout(RTM_PATIENCE, async {
        while let Some(ack) = publishes.join_next().await {
            published += u64::from(ack.unwrap_or(false));
        }
    });
    let _ = acks.await;

    // Until every acknowledged sample came back, or the subscriber made no progress
    // for a while.
    loop {
        let wait = counted.notified();
        if tally
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .seen
            .len() as u64
            >= published
        {
            break;
        }
        if timeout(SUBSCRIBER_PATIENCE, wait).await.is_err() {
            break;
        }
    }
    if counting.is_finished() {
        match counting.await {
            Ok(Err(why)) => return Err(AgentError(format!("the subscription failed: {why}"))),
            Ok(Ok(invalid)) if invalid > 0 => {
                let _ = writeln!(out, "warning: {invalid} messages of another shape");
            }
            _ => {}
        }
    } else {
        counting.abort();
    }
    let (received, duplicated) = {
        let tally = tally.lock().unwrap_or_else(PoisonError::into_inner);
        (tally.seen.len() as u64, tally.duplicated)
    };
    let reconnected = publisher_connects.load(Ordering::Relaxed).saturating_sub(1)
        + subscriber_connects
            .load(Ordering::Relaxed)
            .saturating_sub(1);
    let results = bench
        .results(id)
        .await
        .map_err(ctx("reading the results"))?;
    let _ = publisher.dispose().await;
    let _ = subscriber.dispose().await;
    Ok(Summary {
        id,
        channel,
        status,
        results,
        samples,
        published,
        received,
        duplicated,
        resumed,
        reconnected,
    })
}

/// Waits for a sample's acknowledgement: `first` is its publish queued in order; one
/// whose connection dropped before the reply may or may not have reached the hub, so it
/// is published again (the client queues it until it has reconnected). True when
/// acknowledged.
async fn acknowledged(
    client: Client,
    channel: String,
    message: serde_json::Value,
    first: Result<benchlink_std::tokio::rtm::Ack, RtmError>,
) -> bool {
    let mut result = match first {
        Ok(ack) => ack.await.map(|_| ()),
        Err(e) => Err(e),
    };
    loop {
        match result {
            Ok(()) => return true,
            Err(
                RtmError::Disconnected | RtmError::Request(benchlink_std::rtm::RequestError::Full),
            ) => {
                result = client.publish(&channel, &message).await.map(|_| ());
            }
            Err(_) => return false,
        }
    }
}

/// Counts the client's connections.
struct Connects(Arc<AtomicU64>);

impl ClientObserver for Connects {
    fn on_enter_connected(&mut self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}

/// A connected (and authenticated) async client, and its count of connections.
async fn connect(target: &RtmTarget) -> Result<(Client, Arc<AtomicU64>), AgentError> {
    let connects = Arc::new(AtomicU64::new(0));
    // An agent's run lasts minutes: reconnect waits capped at 8 s, as the blocking agent.
    let mut options = ClientOptions {
        max_reconnect_interval: std::time::Duration::from_secs(8),
        observer: Some(SharedObserver::new(Connects(connects.clone()))),
        ..ClientOptions::new(target.endpoint.clone(), target.appkey.clone())
    };
    options.transport.tls = crate::agent::tls()?;
    let client = Client::new(options).map_err(ctx("RTM client"))?;
    client.start().map_err(ctx("RTM client"))?;
    let state = timeout(
        RTM_PATIENCE,
        client.wait_for_state(|s| s != ClientState::Connecting),
    )
    .await;
    if state != Ok(ClientState::Connected) {
        let why = client
            .last_connecting_error()
            .map_or_else(|| "no connection in time".into(), |e| e.to_string());
        return Err(AgentError(format!(
            "connecting to {}: {why}",
            target.endpoint
        )));
    }
    if let Some((role, secret)) = &target.role {
        timeout(RTM_PATIENCE, client.authenticate(role, secret))
            .await
            .map_err(|_| AgentError(format!("authenticating as {role}: no answer in time")))?
            .map_err(ctx(&format!("authenticating as {role}")))?;
    }
    Ok((client, connects))
}
