//! The host harness: two real embassy-net stacks back to back through
//! `embassy-net-driver-channel` (IP medium, no root, no TAP), a wire task per direction
//! that can drop, delay or cut frames, and a bridge on the gateway stack that forwards
//! accepted embassy TCP connections to the local std servers over loopback sockets.
//!
//! ```text
//!  device stack 10.0.0.2 ── wire (drop %, delay, cut) ── gateway stack 10.0.0.1
//!   (benchlink clients)                                   bridge :4800 / :8080
//!                                                           │ std threads
//!                                                           ▼
//!                                              BenchServer / RtmServer (127.0.0.1)
//! ```
//!
//! Everything embassy runs on one `embassy-executor` (std platform) thread per test;
//! the std servers and the bridge's socket I/O run on their own threads.
#![allow(dead_code)]

use std::future::Future;
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{mpsc, Arc};

use embassy_executor::{Executor, Spawner};
use embassy_futures::select::select;
use embassy_net::tcp::TcpSocket;
use embassy_net::{Config, Ipv4Address, Ipv4Cidr, Stack, StackResources, StaticConfigV4};
use embassy_net_driver_channel as ch;
use embassy_sync::blocking_mutex::raw::CriticalSectionRawMutex;
use embassy_sync::channel::{Channel, TrySendError};
use embassy_time::{with_timeout, Duration, Timer};

pub const MTU: usize = 1500;
pub const DEVICE_IP: Ipv4Address = Ipv4Address::new(10, 0, 0, 2);
pub const GATEWAY_IP: Ipv4Address = Ipv4Address::new(10, 0, 0, 1);

type BoxFuture = Pin<Box<dyn Future<Output = ()>>>;

#[embassy_executor::task(pool_size = 96)]
async fn boxed_task(future: BoxFuture) {
    future.await
}

/// Spawns any `'static` future as an embassy task.
pub fn spawn(spawner: Spawner, future: impl Future<Output = ()> + 'static) {
    spawner.spawn(boxed_task(Box::pin(future)).expect("task pool exhausted"));
}

/// Polls `cond` (every 5 ms, yielding to the executor) until it holds; fails the test,
/// naming `what`, if it still does not after 10 s: a guard against a hang, not a measure.
pub async fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let limit = Duration::from_secs(10);
    let polled = with_timeout(limit, async {
        while !cond() {
            Timer::after_millis(5).await;
        }
    })
    .await;
    polled.unwrap_or_else(|_| panic!("timed out after {limit:?} waiting for {what}"));
}

/// Leaks a zeroed buffer: tasks need `'static` memory, and a test process is short.
pub fn buf(len: usize) -> &'static mut [u8] {
    Box::leak(vec![0u8; len].into_boxed_slice())
}

/// Runs `body` on a fresh embassy executor thread; fails the test on panic or timeout.
pub fn run_test<F, Fut>(timeout: std::time::Duration, body: F)
where
    F: FnOnce(Spawner) -> Fut + Send + 'static,
    Fut: Future<Output = ()> + 'static,
{
    let (done_tx, done_rx) = mpsc::channel::<()>();
    let finished = Arc::new(AtomicBool::new(false));
    let flag = finished.clone();
    std::thread::spawn(move || {
        let executor: &'static mut Executor = Box::leak(Box::new(Executor::new()));
        executor.run_until(
            move |spawner| {
                spawn(spawner, async move {
                    body(spawner).await;
                    flag.store(true, Ordering::SeqCst);
                    let _ = done_tx.send(());
                })
            },
            move || finished.load(Ordering::SeqCst),
        );
    });
    match done_rx.recv_timeout(timeout) {
        Ok(()) => {}
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("test timed out after {timeout:?}"),
        Err(mpsc::RecvTimeoutError::Disconnected) => panic!("test body panicked (see above)"),
    }
}

/// What the wire does to frames, changeable while the test runs.
#[derive(Default)]
pub struct Wire {
    /// Percentage of frames dropped (each direction, independently).
    pub drop_percent: AtomicU32,
    /// Every frame is dropped.
    pub cut: AtomicBool,
    /// Each frame waits this long before delivery.
    pub delay_ms: AtomicU32,
    /// Frames dropped so far.
    pub dropped: AtomicU64,
    /// Frames delivered so far.
    pub delivered: AtomicU64,
}

/// The two stacks and the wire between them.
pub struct Net {
    pub device: Stack<'static>,
    pub gateway: Stack<'static>,
    pub wire: Arc<Wire>,
}

fn stack(
    spawner: Spawner,
    device: ch::Device<'static, MTU>,
    ip: Ipv4Address,
    gateway: Option<Ipv4Address>,
    seed: u64,
) -> Stack<'static> {
    let config = Config::ipv4_static(StaticConfigV4 {
        address: Ipv4Cidr::new(ip, 24),
        gateway,
        dns_servers: Default::default(),
    });
    let resources = Box::leak(Box::new(StackResources::<16>::new()));
    let (stack, mut runner) = embassy_net::new(device, config, resources, seed);
    spawn(spawner, async move {
        runner.run().await;
    });
    stack
}

/// Builds the device and gateway stacks and the wire tasks.
pub fn network(spawner: Spawner) -> Net {
    let wire = Arc::new(Wire::default());
    let dev_state = Box::leak(Box::new(ch::State::<MTU, 16, 16>::new()));
    let gw_state = Box::leak(Box::new(ch::State::<MTU, 16, 16>::new()));
    let (dev_runner, dev_device) = ch::new(dev_state, ch::driver::HardwareAddress::Ip);
    let (gw_runner, gw_device) = ch::new(gw_state, ch::driver::HardwareAddress::Ip);
    let (dev_link, dev_rx, dev_tx) = dev_runner.split();
    let (gw_link, gw_rx, gw_tx) = gw_runner.split();
    dev_link.set_link_state(ch::driver::LinkState::Up);
    gw_link.set_link_state(ch::driver::LinkState::Up);
    spawn(
        spawner,
        carry(dev_tx, gw_rx, wire.clone(), 0x1234_5678_9abc_def1),
    );
    spawn(
        spawner,
        carry(gw_tx, dev_rx, wire.clone(), 0x0fed_cba9_8765_4321),
    );
    Net {
        device: stack(spawner, dev_device, DEVICE_IP, Some(GATEWAY_IP), 1),
        gateway: stack(spawner, gw_device, GATEWAY_IP, None, 2),
        wire,
    }
}

fn xorshift(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

/// One direction of the wire: frames from one stack's transmit queue to the other's
/// receive queue, dropped or delayed on demand.
async fn carry(
    mut from: ch::TxRunner<'static, MTU>,
    mut to: ch::RxRunner<'static, MTU>,
    wire: Arc<Wire>,
    mut seed: u64,
) {
    loop {
        let frame = from.tx_buf().await;
        let percent = u64::from(wire.drop_percent.load(Ordering::Relaxed));
        let lost = wire.cut.load(Ordering::Relaxed) || xorshift(&mut seed) % 100 < percent;
        if lost {
            wire.dropped.fetch_add(1, Ordering::Relaxed);
        } else {
            let delay = wire.delay_ms.load(Ordering::Relaxed);
            if delay > 0 {
                Timer::after_millis(u64::from(delay)).await;
            }
            let dst = to.rx_buf().await;
            let n = frame.len().min(dst.len());
            dst[..n].copy_from_slice(&frame[..n]);
            to.rx_done(n);
            wire.delivered.fetch_add(1, Ordering::Relaxed);
        }
        from.tx_done();
    }
}

/// Accepts embassy TCP connections on `port` of the gateway stack (`acceptors` at a
/// time) and forwards each to `target` over a real loopback socket.
pub fn bridge(
    spawner: Spawner,
    gateway: Stack<'static>,
    port: u16,
    target: SocketAddr,
    acceptors: usize,
) {
    for _ in 0..acceptors {
        spawn(spawner, acceptor(gateway, port, target));
    }
}

async fn acceptor(stack: Stack<'static>, port: u16, target: SocketAddr) {
    let rx = buf(16 * 1024);
    let tx = buf(16 * 1024);
    loop {
        let mut socket = TcpSocket::new(stack, &mut *rx, &mut *tx);
        if socket.accept(port).await.is_err() {
            continue;
        }
        proxy(&mut socket, target).await;
        socket.close();
        let _ = with_timeout(Duration::from_secs(2), socket.flush()).await;
        socket.abort();
        let _ = with_timeout(Duration::from_millis(200), socket.flush()).await;
    }
}

type Downstream = Channel<CriticalSectionRawMutex, Option<Vec<u8>>, 8>;

async fn proxy(socket: &mut TcpSocket<'_>, target: SocketAddr) {
    let Ok(stream) = TcpStream::connect(target) else {
        return;
    };
    let _ = stream.set_nodelay(true);
    let (Ok(mut reader), Ok(mut writer)) = (stream.try_clone(), stream.try_clone()) else {
        return;
    };
    let down: Arc<Downstream> = Arc::new(Channel::new());
    let down_in = down.clone();
    std::thread::spawn(move || {
        let mut chunk = [0u8; 4096];
        loop {
            let item = match reader.read(&mut chunk) {
                Ok(0) | Err(_) => None,
                Ok(n) => Some(chunk[..n].to_vec()),
            };
            let end = item.is_none();
            let mut pending = item;
            loop {
                match down_in.try_send(pending) {
                    Ok(()) => break,
                    Err(TrySendError::Full(back)) => {
                        pending = back;
                        std::thread::sleep(std::time::Duration::from_millis(1));
                    }
                }
            }
            if end {
                return;
            }
        }
    });
    let (up_tx, up_rx) = mpsc::channel::<Vec<u8>>();
    std::thread::spawn(move || {
        for bytes in up_rx {
            if writer.write_all(&bytes).is_err() {
                break;
            }
        }
        let _ = writer.shutdown(Shutdown::Write);
    });
    let (mut r, mut w) = socket.split();
    let upstream = async {
        let mut chunk = [0u8; 4096];
        loop {
            match r.read(&mut chunk).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if up_tx.send(chunk[..n].to_vec()).is_err() {
                        break;
                    }
                }
            }
        }
    };
    let downstream = async {
        while let Some(bytes) = down.receive().await {
            if embedded_io_async::Write::write_all(&mut w, &bytes)
                .await
                .is_err()
            {
                break;
            }
        }
        let _ = w.flush().await;
    };
    select(upstream, downstream).await;
    let _ = stream.shutdown(Shutdown::Both);
}

/// A deterministic RNG for WebSocket masks and keys (tests need no entropy).
pub struct TestRng(pub u64);

impl rand_core::RngCore for TestRng {
    fn next_u32(&mut self) -> u32 {
        (xorshift(&mut self.0) >> 16) as u32
    }

    fn next_u64(&mut self) -> u64 {
        xorshift(&mut self.0)
    }

    fn fill_bytes(&mut self, dst: &mut [u8]) {
        for b in dst {
            *b = (xorshift(&mut self.0) >> 24) as u8;
        }
    }
}
