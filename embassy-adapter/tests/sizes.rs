//! Memory figures of the embassy clients on this host (x86_64: pointers are twice the
//! size of a Cortex-M's, so these are upper bounds for thumbv7em), printed with
//! `--nocapture` and bounded so that a regression fails the build.

mod common;

use benchlink_embassy::bench::{BenchClient, Buffers, Server};
use benchlink_embassy::rtm::{Messaging, MessagingConfig, RunnerBuffers};
use benchlink_embassy::transport::TcpTransport;
use common::TestRng;
use embassy_sync::blocking_mutex::raw::NoopRawMutex;

type Rtm = Messaging<NoopRawMutex, 4, 8>;

#[test]
fn client_and_future_sizes() {
    let rtm_static = size_of::<Rtm>();
    let bench_client = size_of::<BenchClient<'static, TcpTransport<'static>>>();
    let transport = size_of::<TcpTransport<'static>>();
    // Future sizes need values; build them without running them.
    let run_future = {
        fn size_of_run<T: benchlink_embassy::transport::Transport>(rtm: &Rtm, t: T) -> usize {
            let mut chunk = [0u8; 1];
            let future = rtm.run(t, &mut chunk);
            size_of_val(&future)
        }
        let buffers = RunnerBuffers {
            rx: Box::leak(Box::new([0u8; 1])),
            tx: Box::leak(Box::new([0u8; 2048])),
            queue: Box::leak(Box::new([0u8; 1024])),
            outbox: Box::leak(Box::new([0u8; 1024])),
            subscription_args: Box::leak(Box::new([0u8; 0])),
        };
        let link = MessagingConfig::new("ws://h", "k");
        let events = Box::leak(Box::new([0u8; 1]));
        let rtm = Rtm::new(Default::default(), link, buffers, events, &mut TestRng(1)).unwrap();
        size_of_run(&rtm, Fake)
    };
    let call_future = {
        let (mut a, mut b, mut c, mut d, mut e) =
            ([0u8; 1], [0u8; 1], [0u8; 1], [0u8; 1], [0u8; 1]);
        let buffers = Buffers {
            rx: &mut a,
            tx: &mut b,
            head: &mut c,
            body: &mut d,
            line: &mut e,
        };
        let mut client = BenchClient::new(Fake, Server::new("h", 1), buffers).unwrap();
        let status = benchlink_core::bench::request::Status { id: 1 };
        let n = size_of_val(&client.call(&status));
        n
    };
    eprintln!(
        "Messaging<4,8>: {rtm_static} B; run() future: {run_future} B; \
         BenchClient: {bench_client} B; call() future: {call_future} B; TcpTransport: {transport} B"
    );
    assert!(rtm_static < 16 * 1024, "{rtm_static}");
    assert!(run_future < 4 * 1024, "{run_future}");
    assert!(bench_client < 1024, "{bench_client}");
    assert!(call_future < 4 * 1024, "{call_future}");
}

/// A transport that is never connected: only its type matters here.
struct Fake;

impl embedded_io_async::ErrorType for Fake {
    type Error = embedded_io_async::ErrorKind;
}

impl embedded_io_async::Read for Fake {
    async fn read(&mut self, _: &mut [u8]) -> Result<usize, Self::Error> {
        Ok(0)
    }
}

impl embedded_io_async::Write for Fake {
    async fn write(&mut self, buf: &[u8]) -> Result<usize, Self::Error> {
        Ok(buf.len())
    }

    async fn flush(&mut self) -> Result<(), Self::Error> {
        Ok(())
    }
}

impl benchlink_embassy::transport::Transport for Fake {
    async fn connect(
        &mut self,
        _: &str,
        _: u16,
    ) -> Result<(), benchlink_embassy::transport::ConnectError> {
        Ok(())
    }

    async fn close(&mut self) {}
}
