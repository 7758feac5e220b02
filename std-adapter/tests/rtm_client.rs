//! The std messaging client against the local RTM server over real sockets.

use std::sync::mpsc;
use std::time::Duration;

use benchlink_std::rtm::{
    Client, ClientOptions, Mode, SubscribeOptions, SubscriptionData, SubscriptionObserver,
};
use benchlink_std::sandbox::rtm::{
    RtmServer, RtmServerConfig, DEFAULT_APPKEY, SUPERUSER_ROLE, SUPERUSER_SECRET,
};

const WAIT: Duration = Duration::from_secs(10);

struct Forward(mpsc::Sender<String>);

impl SubscriptionObserver for Forward {
    fn on_subscription_data(&mut self, data: &SubscriptionData) {
        for m in data.messages() {
            let _ = self.0.send(m.to_owned());
        }
    }
}

fn client(server: &RtmServer) -> Client {
    let options = ClientOptions::new(server.endpoint(), DEFAULT_APPKEY);
    Client::new(options).unwrap()
}

#[test]
fn publish_subscribe_read_write() {
    let server = RtmServer::start(RtmServerConfig::default()).unwrap();
    let c = client(&server);
    c.start().unwrap();
    let (tx, rx) = mpsc::channel();
    c.subscribe(
        "animals",
        Mode::Reliable,
        Forward(tx),
        SubscribeOptions::default(),
    )
    .unwrap();
    let position = c
        .publish_sync("animals", &serde_json::json!({"who": "zebra"}), WAIT)
        .unwrap();
    assert!(position.contains(':'), "{position}");
    assert_eq!(rx.recv_timeout(WAIT).unwrap(), r#"{"who":"zebra"}"#);
    assert_eq!(c.read_sync("kv", WAIT).unwrap(), serde_json::Value::Null);
    let (wtx, wrx) = mpsc::channel();
    c.write("kv", &42, Some(Box::new(move |r| wtx.send(r).unwrap())))
        .unwrap();
    wrx.recv_timeout(WAIT).unwrap();
    assert_eq!(c.read_sync("kv", WAIT).unwrap(), serde_json::json!(42));
    assert!(c.is_connected());
    c.authenticate_sync(SUPERUSER_ROLE, SUPERUSER_SECRET, WAIT)
        .unwrap();
    c.dispose().unwrap();
}
