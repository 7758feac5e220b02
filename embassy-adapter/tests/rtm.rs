//! The async messaging client over a real embassy-net stack, against the local RTM
//! server: publish → subscribe → receive, read/write/delete, authentication, and a
//! forced disconnect the client survives by itself (reconnect, auth restore,
//! resubscription, later messages delivered).

mod common;

use std::sync::atomic::Ordering;
use std::time::Duration as StdDuration;

use benchlink_core::rtm::{self, ClientState, Mode, SubState, SubscribeArgs};
use benchlink_embassy::rtm::{
    DisconnectReason, Event, Messaging, MessagingConfig, Outcome, RunnerBuffers,
};
use benchlink_embassy::transport::TcpTransport;
use benchlink_sandbox::rtm::{DEFAULT_APPKEY, SUPERUSER_ROLE, SUPERUSER_SECRET};
use benchlink_sandbox::{RtmServer, RtmServerConfig};
use common::{bridge, buf, network, run_test, spawn, wait_until, Net, TestRng};
use embassy_executor::Spawner;
use embassy_sync::blocking_mutex::raw::CriticalSectionRawMutex;
use embassy_time::{with_timeout, Duration};

type Rtm = Messaging<CriticalSectionRawMutex, 4, 8, 16, 512>;

const WAIT: Duration = Duration::from_secs(10);

/// The messaging client on the device stack, its runner spawned, started.
fn client(spawner: Spawner, net: &Net) -> &'static Rtm {
    client_with(
        spawner,
        net,
        MessagingConfig::new("ws://10.0.0.1:8080", DEFAULT_APPKEY),
        client_config(),
    )
}

/// Quick reconnects, no jitter.
fn client_config() -> rtm::Config {
    rtm::Config {
        reconnect_interval: core::time::Duration::from_millis(100),
        jitter_seed: 0,
        ..rtm::Config::default()
    }
}

fn client_with(
    spawner: Spawner,
    net: &Net,
    link: MessagingConfig<'static>,
    config: rtm::Config,
) -> &'static Rtm {
    let buffers = RunnerBuffers {
        rx: buf(4096),
        tx: buf(2048 + 1024),
        queue: buf(2048),
        outbox: buf(2048),
        subscription_args: buf(1024),
    };
    let rtm = Rtm::new(config, link, buffers, &mut TestRng(0x9e37_79b9_7f4a_7c15)).unwrap();
    let rtm: &'static Rtm = Box::leak(Box::new(rtm));
    let transport = TcpTransport::new(net.device, buf(4096), buf(4096));
    spawn(spawner, async move {
        rtm.run(transport, buf(1024)).await;
    });
    rtm.start();
    rtm
}

/// The next event matching `want`, within [`WAIT`].
async fn expect_event(rtm: &Rtm, what: &str, want: impl Fn(&Event<512>) -> bool) -> Event<512> {
    let found = with_timeout(WAIT, async {
        loop {
            let event = rtm.next_event().await;
            if want(&event) {
                return event;
            }
        }
    })
    .await;
    found.unwrap_or_else(|_| panic!("no {what} within {WAIT:?}"))
}

fn is_subscribed(event: &Event<512>, key: &str) -> bool {
    matches!(event, Event::Subscription { key: k, state: SubState::Subscribed } if k == key)
}

fn is_data(event: &Event<512>, key: &str, message: &str) -> bool {
    matches!(event, Event::Data { key: k, message: m } if k == key && m == message)
}

#[test]
fn publish_subscribe_receive_and_kv() {
    let server = RtmServer::start(RtmServerConfig::default()).expect("rtm server");
    let addr = server.addr();
    run_test(StdDuration::from_secs(30), move |spawner| async move {
        let net = network(spawner);
        bridge(spawner, net.gateway, 8080, addr, 2);
        let rtm = client(spawner, &net);
        with_timeout(WAIT, rtm.wait_for_state(ClientState::Connected))
            .await
            .expect("connected");

        rtm.subscribe("animals", Mode::Reliable, SubscribeArgs::default())
            .unwrap();
        expect_event(rtm, "subscribed", |e| is_subscribed(e, "animals")).await;

        let reply = rtm
            .publish_acked("animals", r#"{"who":"zebra"}"#, Some(WAIT))
            .await
            .unwrap();
        assert!(reply.is_ok(), "{reply:?}");
        assert!(reply.member("position").is_some(), "{reply:?}");
        expect_event(rtm, "zebra", |e| {
            is_data(e, "animals", r#"{"who":"zebra"}"#)
        })
        .await;

        // Fire-and-forget, and a message published by someone else.
        rtm.publish("animals", "[1,2,3]").unwrap();
        expect_event(rtm, "array", |e| is_data(e, "animals", "[1,2,3]")).await;
        server.publish("animals", r#""from the server side""#);
        expect_event(rtm, "server message", |e| {
            is_data(e, "animals", r#""from the server side""#)
        })
        .await;

        // Key-value.
        assert!(rtm
            .write("kv", r#"{"v":42}"#, Some(WAIT))
            .await
            .unwrap()
            .is_ok());
        let read = rtm.read("kv", Some(WAIT)).await.unwrap();
        assert_eq!(read.member("message"), Some(r#"{"v":42}"#), "{read:?}");
        assert!(rtm.delete("kv", Some(WAIT)).await.unwrap().is_ok());
        let read = rtm.read("kv", Some(WAIT)).await.unwrap();
        assert_eq!(read.member("message"), Some("null"), "{read:?}");

        // Authentication: a wrong secret is refused, the right one accepted.
        let wrong = rtm
            .authenticate(SUPERUSER_ROLE, b"not the secret", Some(WAIT))
            .await
            .unwrap();
        assert!(matches!(wrong, Outcome::Error(_)), "{wrong:?}");
        let auth = rtm
            .authenticate(SUPERUSER_ROLE, SUPERUSER_SECRET.as_bytes(), Some(WAIT))
            .await
            .unwrap();
        assert!(auth.is_ok(), "{auth:?}");

        rtm.unsubscribe("animals").unwrap();
        expect_event(
            rtm,
            "deleted",
            |e| matches!(e, Event::SubscriptionDeleted { key } if key == "animals"),
        )
        .await;
    });
}

#[test]
fn reconnects_restores_auth_and_resubscribes_after_a_forced_disconnect() {
    let server = RtmServer::start(RtmServerConfig::default()).expect("rtm server");
    let addr = server.addr();
    run_test(StdDuration::from_secs(40), move |spawner| async move {
        let net = network(spawner);
        bridge(spawner, net.gateway, 8080, addr, 3);
        let rtm = client(spawner, &net);
        with_timeout(WAIT, rtm.wait_for_state(ClientState::Connected))
            .await
            .expect("connected");
        let auth = rtm
            .authenticate(SUPERUSER_ROLE, SUPERUSER_SECRET.as_bytes(), Some(WAIT))
            .await
            .unwrap();
        assert!(auth.is_ok(), "{auth:?}");
        // Only the superuser may use restricted channels: proof that auth was restored.
        let channel = "restricted.metrics";
        rtm.subscribe(channel, Mode::Reliable, SubscribeArgs::default())
            .unwrap();
        expect_event(rtm, "subscribed", |e| is_subscribed(e, channel)).await;
        rtm.publish(channel, r#"{"n":1}"#).unwrap();
        expect_event(rtm, "first message", |e| is_data(e, channel, r#"{"n":1}"#)).await;

        // 1. The server drops every connection (no close frame: a transport close).
        assert!(server.faults().drop_connections() >= 1);
        expect_event(rtm, "disconnected", |e| {
            matches!(e, Event::Disconnected(DisconnectReason::TransportClosed))
        })
        .await;
        expect_event(rtm, "awaiting", |e| {
            matches!(e, Event::State(ClientState::Awaiting))
        })
        .await;
        expect_event(rtm, "resubscribed", |e| is_subscribed(e, channel)).await;
        assert_eq!(rtm.state(), ClientState::Connected);
        server.publish(channel, r#"{"n":2}"#);
        expect_event(rtm, "message after reconnect", |e| {
            is_data(e, channel, r#"{"n":2}"#)
        })
        .await;

        // 2. The wire is cut: nothing arrives, the dead-peer check is not needed because
        //    the server drops the connection; restore the wire and it reconnects.
        net.wire.cut.store(true, Ordering::Relaxed);
        assert!(server.faults().drop_connections() >= 1);
        // The wire comes back once the server has closed its side.
        wait_until("the server to close the connection", || {
            server.connections().iter().all(|c| !c.open)
        })
        .await;
        net.wire.cut.store(false, Ordering::Relaxed);
        expect_event(rtm, "resubscribed after the cut", |e| {
            is_subscribed(e, channel)
        })
        .await;
        // Requests made while offline are queued and sent after the reconnect.
        let reply = rtm
            .publish_acked(channel, r#"{"n":3}"#, Some(WAIT))
            .await
            .unwrap();
        assert!(reply.is_ok(), "{reply:?}");
        expect_event(rtm, "message after the cut", |e| {
            is_data(e, channel, r#"{"n":3}"#)
        })
        .await;
        assert!(
            server.connections().len() >= 3,
            "{}",
            server.connections().len()
        );
    });
}

#[test]
fn dead_peer_is_detected_by_pings_and_the_client_comes_back() {
    let server = RtmServer::start(RtmServerConfig::default()).expect("rtm server");
    let addr = server.addr();
    run_test(StdDuration::from_secs(40), move |spawner| async move {
        let net = network(spawner);
        bridge(spawner, net.gateway, 8080, addr, 3);
        let link = MessagingConfig {
            ping_interval: Duration::from_millis(200),
            dead_peer_timeout: Duration::from_millis(700),
            ..MessagingConfig::new("ws://10.0.0.1:8080", DEFAULT_APPKEY)
        };
        let config = rtm::Config {
            connect_timeout: core::time::Duration::from_millis(500),
            ..client_config()
        };
        let rtm = client_with(spawner, &net, link, config);
        rtm.subscribe("beats", Mode::Simple, SubscribeArgs::default())
            .unwrap();
        expect_event(rtm, "subscribed", |e| is_subscribed(e, "beats")).await;
        // Idle for several ping intervals: the server answers the pings, nothing drops.
        // Five pings (the client's own clock, seen by the server) span more than the
        // 700 ms dead-peer limit.
        wait_until("five pings", || {
            server.connections().first().is_some_and(|c| c.pings >= 5)
        })
        .await;
        assert_eq!(rtm.state(), ClientState::Connected);
        assert_eq!(server.connections().len(), 1);

        // A silent peer: the wire goes dark without any FIN or RST.
        net.wire.cut.store(true, Ordering::Relaxed);
        expect_event(
            rtm,
            "dead peer",
            |e| matches!(e, Event::Disconnected(DisconnectReason::DeadPeer { silent_ms }) if *silent_ms >= 700),
        )
        .await;
        expect_event(rtm, "awaiting", |e| {
            matches!(e, Event::State(ClientState::Awaiting))
        })
        .await;
        net.wire.cut.store(false, Ordering::Relaxed);
        expect_event(rtm, "resubscribed", |e| is_subscribed(e, "beats")).await;
        server.publish("beats", "1");
        expect_event(rtm, "message after the outage", |e| {
            is_data(e, "beats", "1")
        })
        .await;
    });
}

#[test]
fn bad_settings_are_refused_up_front_and_wss_fails_every_attempt() {
    let new = |endpoint: &'static str, tx: usize| {
        let buffers = RunnerBuffers {
            rx: buf(256),
            tx: buf(tx),
            queue: buf(2048),
            outbox: buf(2048),
            subscription_args: buf(1024),
        };
        Rtm::new(
            client_config(),
            MessagingConfig::new(endpoint, DEFAULT_APPKEY),
            buffers,
            &mut TestRng(1),
        )
        .map(|_| ())
    };
    assert!(matches!(
        new("http://10.0.0.1:8080", 4096),
        Err(rtm::LinkError::Url(_))
    ));
    assert_eq!(
        new("ws://10.0.0.1:8080", 2048),
        Err(rtm::LinkError::TxTooSmall { min: 2048 + 512 })
    );

    // TLS is not this crate's: the attempt fails without touching the network, and a
    // first connect that fails stops the client (the core's default).
    run_test(StdDuration::from_secs(20), move |spawner| async move {
        let net = network(spawner);
        let rtm = client_with(
            spawner,
            &net,
            MessagingConfig::new("wss://10.0.0.1:8443", DEFAULT_APPKEY),
            rtm::Config {
                retry_first_connect: false,
                ..client_config()
            },
        );
        expect_event(rtm, "stopped", |e| {
            matches!(e, Event::State(ClientState::Stopped))
        })
        .await;
    });
}
