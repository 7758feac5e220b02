//! The scenarios of `rtm-bench --async`: the same measurements with the async client
//! (`benchlink_std::tokio::rtm`) on a multi-threaded tokio runtime, one connection each,
//! reported as client `benchlink-async`.
//!
//! - `publish-ack`: [`Client::try_publish`] queues each publish in order and returns
//!   its [`Ack`] future; the window stays full by awaiting the oldest acknowledgement
//!   before each publish past the window (on one connection they come in order).
//! - `publish-noack`: [`Client::publish_unacked`] (which waits for room by itself), then
//!   one acknowledged publish as the end marker.
//! - `subscribe`: the [`Subscription`](benchlink_std::tokio::rtm::Subscription) stream
//!   read by this task while `rtm-bench flood` publishes.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use benchlink_core::rtm::RequestError;
use benchlink_std::rtm::{ClientOptions, ClientState, Error, Mode, SubState, SubscribeOptions};
use benchlink_std::tokio::rtm::{Ack, Client, Update};
use serde_json::json;

use super::{channel, flood_process, subscribe_report, Args, Message, Meter, PAD};

async fn connect(args: &Args) -> Result<Client, String> {
    let client = Client::new(ClientOptions::new(&args.endpoint, &args.appkey))
        .map_err(|e| format!("client: {e}"))?;
    client.start().map_err(|e| format!("start: {e}"))?;
    let state = tokio::time::timeout(
        Duration::from_secs(10),
        client.wait_for_state(|s| matches!(s, ClientState::Connected | ClientState::Stopped)),
    )
    .await;
    if state != Ok(ClientState::Connected) {
        let why = client
            .last_connecting_error()
            .map(|e| e.to_string())
            .unwrap_or_default();
        return Err(format!("could not connect to {}: {why}", args.endpoint));
    }
    Ok(client)
}

/// Queues publish `n` with its acknowledgement asked for, waiting for room while the
/// client is full; returns its [`Ack`] and how many times it waited.
async fn queue(client: &Client, channel: &str, n: u64) -> Result<(Ack, u64), String> {
    let message = Message { n, pad: PAD };
    let mut waits = 0;
    loop {
        match client.try_publish(channel, &message) {
            Ok(ack) => return Ok((ack, waits)),
            Err(Error::Request(RequestError::Full)) => {
                waits += 1;
                client
                    .wait_for_room()
                    .await
                    .map_err(|e| format!("publish {n}: {e}"))?;
            }
            Err(e) => return Err(format!("publish {n}: {e}")),
        }
    }
}

async fn acked(ack: Ack, n: u64) -> Result<(), String> {
    ack.await
        .map(|_| ())
        .map_err(|e| format!("publish {n} was not acknowledged with success: {e}"))
}

async fn publish_ack(args: &Args, window: u64) -> Result<serde_json::Value, String> {
    let client = connect(args).await?;
    let channel = channel(args, "ack");
    let window = window.max(1);
    let mut in_flight: VecDeque<(u64, Ack)> = VecDeque::new();
    let mut full = 0u64;
    let meter = Meter::start();
    for n in 0..args.count {
        if in_flight.len() as u64 >= window {
            if let Some((m, ack)) = in_flight.pop_front() {
                acked(ack, m).await?;
            }
        }
        let (ack, waits) = queue(&client, &channel, n).await?;
        full += waits;
        in_flight.push_back((n, ack));
    }
    for (m, ack) in in_flight {
        acked(ack, m).await?;
    }
    let seconds = meter.wall.elapsed().as_secs_f64();
    let report = meter.report(
        "publish_ack",
        args.count,
        seconds,
        json!({"window": window, "full_retries": full}),
    );
    let _ = client.dispose().await;
    Ok(report)
}

async fn publish_noack(args: &Args) -> Result<serde_json::Value, String> {
    let client = connect(args).await?;
    let channel = channel(args, "noack");
    let meter = Meter::start();
    for n in 0..args.count {
        client
            .publish_unacked(&channel, &Message { n, pad: PAD })
            .await
            .map_err(|e| format!("publish {n}: {e}"))?;
    }
    // The end marker: the server handles one connection's requests in order.
    let (ack, _) = queue(&client, &channel, args.count).await?;
    acked(ack, args.count).await?;
    let seconds = meter.wall.elapsed().as_secs_f64();
    let report = meter.report("publish_noack", args.count, seconds, json!({}));
    let _ = client.dispose().await;
    Ok(report)
}

async fn subscribe(
    args: &Args,
    idle: f64,
    flood_bin: Option<&std::path::Path>,
) -> Result<serde_json::Value, String> {
    let client = connect(args).await?;
    let channel = channel(args, "sub");
    let mut sub = client
        .subscribe(&channel, Mode::Simple, SubscribeOptions::default())
        .await
        .map_err(|e| format!("subscribe: {e}"))?;
    let subscribed = tokio::time::timeout(Duration::from_secs(10), async {
        while let Some(update) = sub.next().await {
            match update {
                Update::State(SubState::Subscribed) => return Ok(()),
                Update::Failed(why) => return Err(format!("subscription failed: {why}")),
                _ => {}
            }
        }
        Err("the subscription ended".to_owned())
    });
    subscribed
        .await
        .map_err(|_| "not subscribed within 10 s".to_owned())??;
    let meter = Meter::start();
    let flood = {
        let (args, channel, exe) = (
            (
                args.endpoint.clone(),
                args.appkey.clone(),
                args.count,
                args.timeout,
            ),
            channel.clone(),
            flood_bin.map(ToOwned::to_owned),
        );
        tokio::task::spawn_blocking(move || flood_process(args, &channel, exe.as_deref()))
    };
    let expected = args.count + 1; // with the flood's end marker
    let idle = Duration::from_secs_f64(idle);
    let (mut received, mut first, mut last) = (0u64, None, Instant::now());
    while received < expected {
        match tokio::time::timeout(idle, sub.next_message()).await {
            Ok(Some(_)) => {
                last = Instant::now();
                first.get_or_insert(last);
                received += 1;
            }
            Ok(None) => break,
            // Quiet for `idle`: done once the publisher is, else keep counting.
            Err(_) if flood.is_finished() => break,
            Err(_) => {}
        }
    }
    let publisher = flood.await.map_err(|e| format!("flood publisher: {e}"))??;
    let span = first.map_or(0.0, |f| last.duration_since(f).as_secs_f64());
    let report = subscribe_report(&meter, received, span, expected, &publisher);
    drop(sub);
    let _ = client.dispose().await;
    if received == 0 {
        return Err("the subscription received nothing".to_owned());
    }
    Ok(report)
}

/// Runs `scenario` of `args` with the async client.
pub(crate) fn run(args: &Args) -> Result<serde_json::Value, String> {
    let mut builder = if std::env::var_os("RTM_BENCH_CURRENT_THREAD").is_some() {
        tokio::runtime::Builder::new_current_thread()
    } else {
        tokio::runtime::Builder::new_multi_thread()
    };
    let runtime = builder
        .enable_all()
        .build()
        .map_err(|e| format!("tokio runtime: {e}"))?;
    let report = runtime.block_on(async {
        match &args.scenario {
            super::Scenario::PublishAck { window } => publish_ack(args, *window).await,
            super::Scenario::PublishNoack => publish_noack(args).await,
            super::Scenario::Subscribe { idle, flood_bin } => {
                subscribe(args, *idle, flood_bin.as_deref()).await
            }
            _ => Err("--async runs publish-ack, publish-noack and subscribe".to_owned()),
        }
    });
    report.map(|mut r| {
        r["client"] = json!("benchlink-async");
        r
    })
}
