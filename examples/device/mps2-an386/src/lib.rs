//! Board support for QEMU's `mps2-an386` (Cortex-M4): embassy-net over the board's
//! LAN9118 Ethernet, embassy-time on its timers, and the harness of the protocol-only
//! firmware (semihosting output, exit code, panic handler) for the images.
//!
//! An image's `main` runs on this crate's [`Executor`] and calls [`init`] first, then
//! uses the returned [`Stack`] for TCP:
//!
//! ```ignore
//! #[embassy_executor::main(entry = "cortex_m_rt::entry", executor = "benchlink_mps2_an386::Executor")]
//! async fn main(spawner: embassy_executor::Spawner) {
//!     let config = embassy_net::Config::dhcpv4(Default::default());
//!     let Ok(stack) = benchlink_mps2_an386::init(spawner, config, SEED).await else {
//!         benchlink_mps2_an386::exit(false)
//!     };
//!     // …
//! }
//! ```
//!
//! Under `run-in-qemu` the device reaches the host's loopback only through QEMU's
//! user-mode network with `restrict=on`: DHCP gives it 10.0.2.15/24 (and, under
//! `restrict=on`, no gateway: [`HOST`] is on the link), and each `--fwd` maps a port of
//! [`HOST`] to one on 127.0.0.1.
//!
//! This crate owns the interrupt vectors the board needs: it defines cortex-m-rt's
//! `DefaultHandler` (every device interrupt lands there, no PAC is needed) and `HardFault`,
//! so an image defines neither; and embassy-executor's `__pender`, for [`Executor`].
#![no_std]

pub mod lan9118;
mod time;

use core::marker::PhantomData;
use core::net::Ipv4Addr;
use core::sync::atomic::{AtomicBool, Ordering};

use cortex_m::interrupt::InterruptNumber;
use cortex_m_rt::{exception, ExceptionFrame};
use embassy_executor::{raw, Spawner};
use embassy_net::{Runner, Stack, StackResources};
use embassy_time::{with_timeout, Duration};
use static_cell::ConstStaticCell;

pub use benchlink_firmware::{exit, Host};
use lan9118::Lan9118;

/// The device's MAC address (locally administered, unicast).
pub const MAC: [u8; 6] = [0x02, 0x00, 0xbe, 0x4c, 0x03, 0x86];

/// The address `run-in-qemu --fwd GUEST_PORT=HOST_PORT` forwards from: a connection to
/// `HOST:GUEST_PORT` reaches `127.0.0.1:HOST_PORT` on the host.
pub const HOST: Ipv4Addr = Ipv4Addr::new(10, 0, 2, 100);

/// Where `run-in-qemu` puts the host's entropy and clock for the image (QEMU's
/// `-device loader`): the last 4 KiB of the code memory, far above any image.
pub const HOST_SEED_ADDR: usize = 0x003F_F000;

/// What the host handed in at start: 32 bytes from its entropy source (`/dev/urandom`)
/// and its clock.
#[derive(Clone, Copy)]
pub struct HostSeed {
    /// Fresh random bytes, different at every run.
    pub entropy: [u8; 32],
    /// Seconds since 1970 on the host when the run started.
    pub unix_time: u64,
}

/// The seed `run-in-qemu` loaded at [`HOST_SEED_ADDR`]: `BLSEED1\n`, 32 random bytes,
/// the time as 20 ASCII digits. `None` when there is none (the image was started some
/// other way): the device then has no entropy and must not run TLS or mask frames.
///
/// The board has no RNG peripheral; a seed compiled into the image would make every
/// run's TLS key shares and WebSocket masks the same and known to anyone with the
/// image, so the host's entropy is handed in fresh at every start.
pub fn host_seed() -> Option<HostSeed> {
    let mut blob = [0u8; 8 + 32 + 20];
    for (i, byte) in blob.iter_mut().enumerate() {
        // SAFETY: the address range is inside the board's code memory (SSRAM1, 4 MiB at
        // 0), always readable; it is only read.
        *byte = unsafe { core::ptr::read_volatile((HOST_SEED_ADDR + i) as *const u8) };
    }
    let (magic, rest) = blob.split_at(8);
    let (entropy, time) = rest.split_at(32);
    if magic != b"BLSEED1\n" {
        return None;
    }
    let unix_time = time.iter().try_fold(0u64, |t, d| {
        d.is_ascii_digit().then(|| t * 10 + u64::from(d - b'0'))
    })?;
    let mut seed = HostSeed {
        entropy: [0; 32],
        unix_time,
    };
    seed.entropy.copy_from_slice(entropy);
    // Read once: wipe it, so that nothing later finds the key material's seed.
    for i in 0..blob.len() {
        // SAFETY: as above; the region is RAM (QEMU models SSRAM1 as writable).
        unsafe { core::ptr::write_volatile((HOST_SEED_ADDR + i) as *mut u8, 0) };
    }
    Some(seed)
}

/// The board's generator in the image without TLS: the host's 32 bytes as four words,
/// each handed out through splitmix64's output mix (the first four draws are fresh
/// entropy, later ones keep mixing the same words). That image draws four: the stack's
/// seed, then the agent's multipart boundaries, retry jitter and the seed of the
/// messaging link's masks and keys (core's own generator is splitmix64 too), so no
/// ChaCha20 is linked for it. Not cryptographic: the TLS image seeds ChaCha20 from the
/// host's bytes instead (each TLS connection's key exchange needs a CSPRNG).
#[derive(Debug)]
pub struct SeedWords {
    words: [u64; 4],
    next: usize,
}

impl SeedWords {
    /// The generator over `entropy` (the host's bytes, [`HostSeed::entropy`]).
    pub fn new(entropy: &[u8; 32]) -> Self {
        let mut words = [0; 4];
        for (word, bytes) in words.iter_mut().zip(entropy.chunks_exact(8)) {
            let mut le = [0; 8];
            le.copy_from_slice(bytes);
            *word = u64::from_le_bytes(le);
        }
        SeedWords { words, next: 0 }
    }
}

impl rand_core::RngCore for SeedWords {
    fn next_u32(&mut self) -> u32 {
        self.next_u64() as u32
    }

    fn next_u64(&mut self) -> u64 {
        let word = &mut self.words[self.next % 4];
        self.next = self.next.wrapping_add(1);
        *word = word.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = *word;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn fill_bytes(&mut self, dst: &mut [u8]) {
        rand_core::impls::fill_bytes_via_next(self, dst);
    }
}

/// Sockets the stack holds: the DHCP client's and two TCP sockets (the agent's benchmark
/// and messaging connections). No DNS: the board's servers are addresses
/// ([`HOST`]), so no resolver is linked.
pub const SOCKETS: usize = 3;

/// How long [`init`] waits for an IPv4 configuration (DHCP from QEMU answers at once).
pub const CONFIG_TIMEOUT: Duration = Duration::from_secs(10);

/// Why the network did not come up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Error {
    /// [`init`] already ran.
    AlreadyStarted,
    /// No LAN9118 answered at its address, or it did not come out of reset.
    NoController,
    /// The network task could not be spawned (its one slot is taken).
    Spawn,
    /// No IPv4 configuration within [`CONFIG_TIMEOUT`].
    NoAddress,
}

impl Error {
    /// What went wrong, in a few words (for [`Host`] output, which has no `core::fmt`).
    pub fn as_str(self) -> &'static str {
        match self {
            Error::AlreadyStarted => "the board is already started",
            Error::NoController => "no LAN9118 answers at 0x4020_0000",
            Error::Spawn => "cannot spawn the network task",
            Error::NoAddress => "no IPv4 configuration (DHCP) in time",
        }
    }
}

/// Starts the board's network: the time driver, the LAN9118 (address [`MAC`]), and
/// embassy-net on it with `config` (`embassy_net::Config::dhcpv4(Default::default())`
/// for QEMU's DHCP server, or a static configuration); spawns the one task that runs the
/// stack, and waits up to [`CONFIG_TIMEOUT`] for an IPv4 configuration.
///
/// `seed` seeds the stack's TCP initial sequence numbers and local ports; the board has
/// no entropy source of its own. The stack has room for [`SOCKETS`] sockets.
pub async fn init(
    spawner: Spawner,
    config: embassy_net::Config,
    seed: u64,
) -> Result<Stack<'static>, Error> {
    static BUFFERS: ConstStaticCell<lan9118::Buffers> =
        ConstStaticCell::new(lan9118::Buffers::new());
    static RESOURCES: ConstStaticCell<StackResources<SOCKETS>> =
        ConstStaticCell::new(StackResources::new());
    let (Some(buffers), Some(resources)) = (BUFFERS.try_take(), RESOURCES.try_take()) else {
        return Err(Error::AlreadyStarted);
    };
    time::init();
    let device = Lan9118::new(MAC, buffers).ok_or(Error::NoController)?;
    let (stack, runner) = embassy_net::new(device, config, resources, seed);
    spawner.spawn(net_task(runner).map_err(|_| Error::Spawn)?);
    with_timeout(CONFIG_TIMEOUT, stack.wait_config_up())
        .await
        .map_err(|_| Error::NoAddress)?;
    Ok(stack)
}

/// Runs the stack: polls the LAN9118 and smoltcp whenever an interrupt or a timer wakes it.
#[embassy_executor::task]
async fn net_task(mut runner: Runner<'static, Lan9118<'static>>) -> ! {
    runner.run().await
}

/// The thread-mode executor of every image: polls the woken tasks, then sleeps with WFI
/// until an interrupt. (embassy-executor's own cortex-m executor sleeps with WFE, which
/// QEMU 7.2 runs as a no-op on M-profile cores: it would keep a host core busy while the
/// device waits for the network.) For `#[embassy_executor::main(entry =
/// "cortex_m_rt::entry", executor = "benchlink_mps2_an386::Executor")]`.
pub struct Executor {
    inner: raw::Executor,
    /// Thread mode only.
    not_send: PhantomData<*mut ()>,
}

/// A task was woken since the executor last looked: poll before sleeping.
static WOKEN: AtomicBool = AtomicBool::new(false);

/// embassy-executor calls this whenever a task is woken (from a task or an interrupt).
#[unsafe(export_name = "__pender")]
fn pender(_context: *mut ()) {
    WOKEN.store(true, Ordering::Release);
}

impl Executor {
    /// An executor; `run` it from a `'static` place (the `main` macro does).
    pub fn new() -> Self {
        Executor {
            inner: raw::Executor::new(core::ptr::null_mut()),
            not_send: PhantomData,
        }
    }

    /// Calls `init` to spawn the first tasks, then runs them forever.
    pub fn run(&'static mut self, init: impl FnOnce(Spawner)) -> ! {
        init(self.inner.spawner());
        loop {
            // SAFETY: `poll` runs only here, never re-entered (it is not called from an
            // interrupt).
            unsafe { self.inner.poll() };
            // With interrupts masked, so that a wake between the check and the WFI is not
            // lost: a pending interrupt ends WFI even while masked, and is taken right after.
            cortex_m::interrupt::free(|_| {
                if !WOKEN.swap(false, Ordering::Acquire) {
                    cortex_m::asm::wfi();
                }
            });
        }
    }
}

impl Default for Executor {
    fn default() -> Self {
        Self::new()
    }
}

/// A device interrupt number, for the NVIC.
#[derive(Clone, Copy)]
struct Irq(u16);

// SAFETY: the only `Irq` values are the board's interrupt lines 8 and 13, which exist.
unsafe impl InterruptNumber for Irq {
    fn number(self) -> u16 {
        self.0
    }
}

/// Every device interrupt (cortex-m-rt points the whole table here): the alarm timer and
/// the Ethernet controller. No other line is unmasked.
#[exception]
unsafe fn DefaultHandler(irqn: i16) {
    if irqn == time::TIMER0_IRQ.0 as i16 {
        time::on_alarm();
    } else if irqn == lan9118::IRQ.0 as i16 {
        lan9118::on_interrupt();
    }
}

/// A fault ends the run as a failure instead of hanging until the caller's timeout.
#[exception]
unsafe fn HardFault(_frame: &ExceptionFrame) -> ! {
    Host::open().str("HARD FAULT\n");
    exit(false)
}
