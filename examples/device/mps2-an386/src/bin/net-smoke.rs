//! The network smoke test: DHCP, then two HTTP exchanges on two TCP connections to
//! `10.0.2.100:80` (run with `run-in-qemu net-smoke --fwd 80=PORT` and an HTTP server on
//! 127.0.0.1:PORT). Each exchange sends `GET /`, reads the reply to its end and prints its
//! first line, its size and how long it took; the second connection shows the forward
//! serves repeated connections, as the agent's reconnects need. Then the stack's
//! high-water mark. Exit code 0 when both exchanges got a reply, 1 otherwise; every step
//! has a timeout.
#![no_std]
#![no_main]

use benchlink_firmware::stack;
use benchlink_mps2_an386::{self as board, exit, Host};
use embassy_executor::Spawner;
use embassy_net::tcp::TcpSocket;
use embassy_net::Stack;
use embassy_time::{with_timeout, Duration, Instant};

/// The port the image connects to on [`board::HOST`].
const PORT: u16 = 80;
const REQUEST: &[u8] = b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
/// One whole exchange: connect, request, the reply to its end.
const EXCHANGE_TIMEOUT: Duration = Duration::from_secs(30);
/// The socket's own timeout: this long without progress resets the connection.
const IDLE_TIMEOUT: Duration = Duration::from_secs(10);

#[embassy_executor::main(entry = "cortex_m_rt::entry", executor = "board::Executor")]
async fn main(spawner: Spawner) {
    // Before any interrupt is enabled: the painter writes below the live stack.
    stack::paint();
    let mut host = Host::open();
    host.str("net-smoke: bringing up the LAN9118 and DHCP\n");
    let config = embassy_net::Config::dhcpv4(Default::default());
    let stack = match board::init(spawner, config, 0x6e65_742d_736d_6f6b).await {
        Ok(stack) => stack,
        Err(e) => {
            host.str("net-smoke: ").str(e.as_str()).str("\n");
            exit(false)
        }
    };
    if let Some(config) = stack.config_v4() {
        host.str("net-smoke: address ");
        ipv4(&mut host, config.address.address().octets());
        host.str("/").u64(config.address.prefix_len().into());
        if let Some(gateway) = config.gateway {
            host.str(", gateway ");
            ipv4(&mut host, gateway.octets());
        }
        host.str("\n");
    }

    static RX: static_cell::ConstStaticCell<[u8; 4096]> =
        static_cell::ConstStaticCell::new([0; 4096]);
    static TX: static_cell::ConstStaticCell<[u8; 1024]> =
        static_cell::ConstStaticCell::new([0; 1024]);
    let (rx, tx) = (RX.take(), TX.take());

    let mut ok = true;
    for n in 1..=2u64 {
        host.str("exchange ").u64(n).str(": ");
        let start = Instant::now();
        match with_timeout(EXCHANGE_TIMEOUT, exchange(stack, rx, tx, &mut host)).await {
            Ok(Ok(bytes)) => {
                host.str(", ").u64(bytes as u64).str(" bytes in ");
                host.u64(start.elapsed().as_millis()).str(" ms\n");
            }
            Ok(Err(what)) => {
                host.str("FAILED: ").str(what).str("\n");
                ok = false;
            }
            Err(_) => {
                host.str("FAILED: timed out\n");
                ok = false;
            }
        }
    }
    host.str("net-smoke: peak stack ")
        .u64(stack::peak() as u64)
        .str(" bytes\n");
    host.str(if ok {
        "net-smoke: OK\n"
    } else {
        "net-smoke: FAILED\n"
    });
    exit(ok)
}

/// One connection: the request, then the reply until the server closes. Prints the
/// reply's first line; returns the reply's size.
async fn exchange(
    stack: Stack<'static>,
    rx: &mut [u8],
    tx: &mut [u8],
    host: &mut Host,
) -> Result<usize, &'static str> {
    let mut socket = TcpSocket::new(stack, rx, tx);
    socket.set_timeout(Some(IDLE_TIMEOUT));
    socket
        .connect((board::HOST, PORT))
        .await
        .map_err(|_| "connect refused or reset")?;
    let mut sent = 0;
    while sent < REQUEST.len() {
        sent += socket
            .write(&REQUEST[sent..])
            .await
            .map_err(|_| "connection reset while sending")?;
    }

    let mut chunk = [0u8; 512];
    let mut total = 0;
    let mut in_first_line = true;
    loop {
        let n = socket
            .read(&mut chunk)
            .await
            .map_err(|_| "connection reset while reading")?;
        if n == 0 {
            break;
        }
        if in_first_line {
            let end = chunk[..n].iter().position(|&b| b == b'\r' || b == b'\n');
            host.bytes(&chunk[..end.unwrap_or(n)]);
            in_first_line = end.is_none();
        }
        total += n;
    }
    socket.close();
    // Let the FIN go out before the socket is dropped (dropping forgets it at once).
    let _ = with_timeout(Duration::from_secs(2), socket.flush()).await;
    if total == 0 {
        return Err("empty reply");
    }
    Ok(total)
}

/// `a.b.c.d`.
fn ipv4(host: &mut Host, octets: [u8; 4]) {
    for (i, octet) in octets.into_iter().enumerate() {
        if i > 0 {
            host.str(".");
        }
        host.u64(octet.into());
    }
}
