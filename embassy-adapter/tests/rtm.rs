//! The async messaging client over a real embassy-net stack, against the local RTM
//! server: publish → subscribe → receive, read/write/delete, authentication, and a
//! forced disconnect the client survives by itself (reconnect, auth restore,
//! resubscription, later messages delivered).

mod common;

use std::sync::atomic::Ordering;
use std::time::Duration as StdDuration;

use benchlink_core::rtm::{
    self, AuthResult, ClientState, Disconnect, Event, Events, Mode, Outcome, SubState,
    SubscribeArgs,
};
use benchlink_embassy::rtm::{Messaging, MessagingConfig, RunnerBuffers};
use benchlink_embassy::transport::TcpTransport;
use benchlink_sandbox::rtm::{DEFAULT_APPKEY, SUPERUSER_ROLE, SUPERUSER_SECRET};
use benchlink_sandbox::{RtmServer, RtmServerConfig};
use common::{bridge, buf, network, run_test, spawn, wait_until, Net, TestRng};
use embassy_executor::Spawner;
use embassy_futures::join::join;
use embassy_sync::blocking_mutex::raw::CriticalSectionRawMutex;
use embassy_time::{with_timeout, Duration};

type Rtm = Messaging<CriticalSectionRawMutex, 4, 8>;

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
    let events = buf(Events::<&mut [u8]>::capacity_for(4, 8, 0));
    let rtm = Rtm::new(
        config,
        link,
        buffers,
        events,
        &mut TestRng(0x9e37_79b9_7f4a_7c15),
    )
    .unwrap();
    let rtm: &'static Rtm = Box::leak(Box::new(rtm));
    let transport = TcpTransport::new(net.device, buf(4096), buf(4096));
    spawn(spawner, async move {
        rtm.run(transport, buf(2048)).await;
    });
    rtm.start();
    rtm
}

/// What `pick` makes of the first event it accepts, within [`WAIT`].
async fn expect_event<T>(rtm: &Rtm, what: &str, mut pick: impl FnMut(Event<'_>) -> Option<T>) -> T {
    let found = with_timeout(WAIT, async {
        loop {
            if let Some(found) = rtm.next_event(&mut pick).await {
                return found;
            }
        }
    })
    .await;
    found.unwrap_or_else(|_| panic!("no {what} within {WAIT:?}"))
}

fn is_subscribed(event: Event<'_>, key: &str) -> Option<()> {
    let subscribed = matches!(event,
        Event::SubscriptionState { key: k, enter: SubState::Subscribed, .. } if k == key);
    subscribed.then_some(())
}

fn is_data(event: Event<'_>, key: &str, message: &str) -> Option<()> {
    let Event::SubscriptionData { key: k, data } = event else {
        return None;
    };
    let found = k == key
        && data
            .messages
            .elements()
            .any(|m| m.raw().as_json() == Some(message));
    found.then_some(())
}

/// Authenticates with the local hub's superuser role, which must succeed.
async fn authenticate_as_superuser(rtm: &Rtm) {
    let secret = SUPERUSER_SECRET.as_bytes();
    let done = rtm.authenticate(SUPERUSER_ROLE, secret, Some(WAIT), |r| r.is_done());
    assert_eq!(done.await, Ok(true));
}

/// `member` of an `Ok` reply's body, as JSON text.
fn ok_member(outcome: Outcome<'_>, member: &str) -> Option<String> {
    let Outcome::Ok(reply) = outcome else {
        return None;
    };
    Some(reply.body?.get(member)?.raw().as_json()?.to_owned())
}

/// Publishes `message` acknowledged on subscribed `channel` and receives it, the events
/// taken while the reply is awaited (the message may come first, and holds the link's
/// input until it is taken): the reply's position.
async fn publish_and_receive(rtm: &Rtm, channel: &str, message: &str) -> String {
    let (position, ()) = join(
        rtm.publish_acked(channel, message, Some(WAIT), |o| ok_member(o, "position")),
        expect_event(rtm, message, |e| is_data(e, channel, message)),
    )
    .await;
    position
        .expect("queued")
        .expect("an ok reply with a position")
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

        let position = publish_and_receive(rtm, "animals", r#"{"who":"zebra"}"#).await;
        assert!(position.starts_with('"'), "{position}");

        // Fire-and-forget, and a message published by someone else.
        rtm.publish("animals", "[1,2,3]").unwrap();
        expect_event(rtm, "array", |e| is_data(e, "animals", "[1,2,3]")).await;
        server.publish("animals", r#""from the server side""#);
        expect_event(rtm, "server message", |e| {
            is_data(e, "animals", r#""from the server side""#)
        })
        .await;

        // Key-value.
        let is_ok = |o: Outcome<'_>| matches!(o, Outcome::Ok(_));
        let written = rtm.write("kv", r#"{"v":42}"#, Some(WAIT), is_ok).await;
        assert_eq!(written, Ok(true));
        let read = rtm
            .read("kv", Some(WAIT), |o| ok_member(o, "message"))
            .await;
        assert_eq!(read, Ok(Some(r#"{"v":42}"#.to_owned())));
        assert_eq!(rtm.delete("kv", Some(WAIT), is_ok).await, Ok(true));
        let read = rtm
            .read("kv", Some(WAIT), |o| ok_member(o, "message"))
            .await;
        assert_eq!(read, Ok(Some("null".to_owned())));

        // Replies whose tasks went away (the futures dropped right after submitting) are
        // dropped when they come: they hold neither the link's input nor their slot
        // among the 8 awaited requests (two rounds of 6 need the first round's back).
        for round in 0..2 {
            for _ in 0..6 {
                let gone = with_timeout(
                    Duration::from_micros(1),
                    rtm.publish_acked("elsewhere", "0", Some(WAIT), |_| ()),
                )
                .await;
                assert!(gone.is_err(), "round {round}: dropped before its reply");
            }
            publish_and_receive(rtm, "animals", r#""after the dropped ones""#).await;
        }

        // Authentication: a wrong secret is refused (with the server's reason), the
        // right one accepted.
        let wrong = rtm
            .authenticate(SUPERUSER_ROLE, b"not the secret", Some(WAIT), |r| match r {
                AuthResult::Rejected { error, .. } => error.reason.map(|r| r.as_raw().to_owned()),
                _ => None,
            })
            .await
            .unwrap();
        assert!(wrong.is_some_and(|reason| !reason.is_empty()));
        authenticate_as_superuser(rtm).await;

        rtm.unsubscribe("animals").unwrap();
        expect_event(rtm, "deleted", |e| {
            matches!(e, Event::SubscriptionDeleted { key } if key == "animals").then_some(())
        })
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
        authenticate_as_superuser(rtm).await;
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
            matches!(e, Event::LinkClosed(Disconnect::TransportClosed)).then_some(())
        })
        .await;
        expect_event(rtm, "awaiting", |e| {
            matches!(
                e,
                Event::ClientState {
                    enter: ClientState::Awaiting,
                    ..
                }
            )
            .then_some(())
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
        publish_and_receive(rtm, channel, r#"{"n":3}"#).await;
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
        let silent = expect_event(rtm, "dead peer", |e| match e {
            Event::LinkClosed(Disconnect::DeadPeer { silent }) => Some(silent),
            _ => None,
        })
        .await;
        assert!(
            silent >= core::time::Duration::from_millis(700),
            "{silent:?}"
        );
        expect_event(rtm, "awaiting", |e| {
            matches!(
                e,
                Event::ClientState {
                    enter: ClientState::Awaiting,
                    ..
                }
            )
            .then_some(())
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
            buf(Events::<&mut [u8]>::capacity_for(4, 8, 0)),
            &mut TestRng(1),
        )
        .map(|_| ())
    };
    assert!(matches!(
        new("http://10.0.0.1:8080", 4096),
        Err(rtm::LinkError::Url(_))
    ));
    assert_eq!(
        new("ws://10.0.0.1:8080", 500),
        Err(rtm::LinkError::TxTooSmall { min: 512 })
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
            matches!(
                e,
                Event::ClientState {
                    enter: ClientState::Stopped,
                    ..
                }
            )
            .then_some(())
        })
        .await;
    });
}
