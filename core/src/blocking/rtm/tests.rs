use super::*;
use crate::rtm::{
    Buffers, ClientState, Config, LinkConfig, NoopHandler, Pending, SubscriptionSlot,
};
use core::time::Duration;
use std::vec::Vec;

/// A peer that accepts the connection and then takes no bytes; the clock moves 1 ms
/// a look.
struct Stuck {
    now: Instant,
    connects: usize,
}

impl embedded_io::ErrorType for Stuck {
    type Error = embedded_io::ErrorKind;
}

impl embedded_io::Read for Stuck {
    fn read(&mut self, _buf: &mut [u8]) -> Result<usize, Self::Error> {
        Ok(0)
    }
}

impl embedded_io::Write for Stuck {
    fn write(&mut self, _buf: &[u8]) -> Result<usize, Self::Error> {
        Ok(0)
    }

    fn flush(&mut self) -> Result<(), Self::Error> {
        Ok(())
    }
}

impl Transport for Stuck {
    fn now(&mut self) -> Instant {
        self.now = self.now.saturating_add(Duration::from_millis(1));
        self.now
    }

    fn wait_readable(&mut self, deadline: Option<Instant>) -> Result<bool, Self::Error> {
        if let Some(d) = deadline {
            self.now = self.now.max(d);
        }
        Ok(false)
    }

    fn connect(&mut self, _host: &str, _port: u16, _tls: bool) -> Result<(), Self::Error> {
        self.connects += 1;
        Ok(())
    }

    fn close(&mut self) {}
}

#[test]
fn a_peer_that_takes_no_bytes_is_dropped_not_spun_on() {
    let config = Config {
        retry_first_connect: true,
        reconnect_interval: Duration::from_millis(100),
        jitter_seed: 0,
        ..Config::default()
    };
    let mut link: Link<Vec<u8>, _, _> = Link::new(
        config,
        LinkConfig::DEFAULT,
        "ws://h:1",
        "k",
        Buffers {
            rx: std::vec![0; 1024],
            tx: std::vec![0; 2048],
            queue: std::vec![0; 256],
            outbox: std::vec![0; 256],
            subscription_args: std::vec![],
        },
        [SubscriptionSlot::EMPTY; 1],
        [Pending::EMPTY; 1],
    )
    .unwrap();
    let mut t = Stuck {
        now: Instant::ZERO,
        connects: 0,
    };
    let h = &mut NoopHandler;
    link.client_mut().start(Instant::ZERO, h);
    let mut chunk = [0u8; 64];
    // Returns at its deadline (the old behaviour spun on the zero-byte write).
    run(&mut link, &mut t, &mut chunk, h, Instant::from_secs(2));
    // Every attempt failed at its first write and the next one followed the backoff.
    assert!(t.connects >= 2, "{} attempts", t.connects);
    assert_ne!(link.client().state(), ClientState::Connected);
}
