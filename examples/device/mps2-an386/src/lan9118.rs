//! The SMSC LAN9118 Ethernet controller as an embassy-net device (QEMU's model of the
//! MPS2 board's LAN9220, at 0x4020_0000 with its interrupt on IRQ 13).
//!
//! Frames go through the chip's FIFOs by programmed I/O, one 32-bit word at a time:
//! - receive: the RX status FIFO gives each frame's length (with its 4-byte FCS), then
//!   that many bytes, rounded up to words, are read from the RX data FIFO (no offset, no
//!   padding: `RX_CFG` stays 0). A frame that is flagged bad or does not fit the buffer
//!   is read and dropped, so the FIFOs stay in step.
//! - transmit: TX command A and B, then the frame's words into the TX data FIFO, once
//!   `TX_FIFO_INF` shows room for a whole frame.
//!
//! Nothing is polled in a loop: when there is no frame, no room or a PHY event to read,
//! the driver acknowledges and unmasks the matching interrupt (RX status FIFO level, TX
//! data FIFO available, PHY) and looks once more; the interrupt handler masks what fired
//! (the line is level-triggered) and wakes the embassy-net runner. Every wait on the chip
//! is bounded, and nothing the chip or the network delivers can make the driver panic.
use core::sync::atomic::{AtomicBool, Ordering};
use core::task::Context;

use cortex_m::peripheral::NVIC;
use embassy_net_driver::{Capabilities, HardwareAddress, LinkState};
use embassy_sync::waitqueue::AtomicWaker;

use crate::Irq;

/// Where hw/arm/mps2.c maps the controller.
const BASE: usize = 0x4020_0000;
/// Its interrupt line (hw/arm/mps2.c: 13 on AN385/AN386, 47 only on AN511).
pub(crate) const IRQ: Irq = Irq(13);

/// The largest frame, without its FCS: 1500 bytes of payload and the Ethernet header.
pub const FRAME: usize = 1514;

// System control and status registers (byte offsets into the 256-byte window).
const RX_DATA_FIFO: usize = 0x00;
const TX_DATA_FIFO: usize = 0x20;
const RX_STATUS_FIFO: usize = 0x40;
const IRQ_CFG: usize = 0x54;
const INT_STS: usize = 0x58;
const INT_EN: usize = 0x5C;
const BYTE_TEST: usize = 0x64;
const FIFO_INT: usize = 0x68;
const RX_CFG: usize = 0x6C;
const TX_CFG: usize = 0x70;
const HW_CFG: usize = 0x74;
const RX_FIFO_INF: usize = 0x7C;
const TX_FIFO_INF: usize = 0x80;
const PMT_CTRL: usize = 0x84;
const MAC_CSR_CMD: usize = 0xA4;
const MAC_CSR_DATA: usize = 0xA8;

/// What `BYTE_TEST` reads on every LAN911x/LAN92xx: the chip is there and the bus is
/// 32-bit little-endian.
const BYTE_TEST_VALUE: u32 = 0x8765_4321;
const HW_CFG_SRST: u32 = 1 << 0;
const PMT_CTRL_READY: u32 = 1 << 0;
/// Interrupt output enabled, active high, push-pull: QEMU's model drives the line
/// active-low unless both of the last two are set.
const IRQ_CFG_VALUE: u32 = (1 << 8) | (1 << 4) | (1 << 0);
/// RX status FIFO level reached (level 0: at least one frame).
const INT_RSFL: u32 = 1 << 3;
/// TX data FIFO free space above its level.
const INT_TDFA: u32 = 1 << 9;
/// The PHY's interrupt.
const INT_PHY: u32 = 1 << 18;
/// TX data available level, in 64-byte units, in `FIFO_INT` bits 31:24: room for a
/// whole frame and its two command words. The RX status level (bits 7:0) stays 0.
const FIFO_INT_VALUE: u32 = (FRAME as u32 + 8).div_ceil(64) << 24;
const TX_CFG_TX_ON: u32 = 1 << 1;
/// Discard TX statuses instead of stopping when their FIFO is full: nobody reads them.
const TX_CFG_TXSAO: u32 = 1 << 2;
/// RX status: the error summary bit and the frame length (with FCS) in bits 29:16.
const RX_STS_ERROR: u32 = 1 << 15;
const TX_CMD_A_FIRST: u32 = 1 << 13;
const TX_CMD_A_LAST: u32 = 1 << 12;

// MAC control and status registers, reached through MAC_CSR_CMD/MAC_CSR_DATA.
const MAC_CR: u32 = 1;
const MAC_ADDRH: u32 = 2;
const MAC_ADDRL: u32 = 3;
const MII_ACC: u32 = 6;
const MII_DATA: u32 = 7;
const MAC_CSR_BUSY: u32 = 1 << 31;
const MAC_CSR_READ: u32 = 1 << 30;
/// Transmitter and receiver on; not promiscuous (the reset default): frames to our
/// address and broadcasts.
const MAC_CR_VALUE: u32 = (1 << 3) | (1 << 2);
const MII_BUSY: u32 = 1 << 0;
const MII_WRITE: u32 = 1 << 1;

// The internal PHY (MII address 1) and its registers.
const PHY_ADDR: u32 = 1;
const PHY_BCR: u32 = 0;
const PHY_BSR: u32 = 1;
const PHY_ISR: u32 = 29;
const PHY_IMR: u32 = 30;
/// Autonegotiation on and restarted.
const PHY_BCR_AUTONEG: u16 = (1 << 12) | (1 << 9);
const PHY_BSR_LINK: u16 = 1 << 2;
/// PHY interrupts: autonegotiation complete, link down.
const PHY_EVENTS: u16 = (1 << 6) | (1 << 4);

/// Polls of a busy bit (MAC CSR, MII, reset) before the chip counts as not answering.
const BUSY_POLLS: u32 = 100_000;
/// Frames looked at per `receive` call, bad ones included (the runner calls again).
const RX_BATCH: u32 = 8;

/// The embassy-net runner, woken by the interrupt handler.
static WAKER: AtomicWaker = AtomicWaker::new();
/// The PHY interrupted: the link state must be read again.
static PHY_EVENT: AtomicBool = AtomicBool::new(false);

fn read(offset: usize) -> u32 {
    // SAFETY: every caller passes one of the register offsets above, inside the
    // controller's MMIO window; reads of the FIFO ports pop a word, which is the point.
    unsafe { core::ptr::read_volatile((BASE + offset) as *const u32) }
}

fn write(offset: usize, value: u32) {
    // SAFETY: as in `read`: a register of the controller's MMIO window.
    unsafe { core::ptr::write_volatile((BASE + offset) as *mut u32, value) }
}

/// Polls `done` up to [`BUSY_POLLS`] times.
fn wait(done: impl Fn() -> bool) -> Option<()> {
    (0..BUSY_POLLS).any(|_| done()).then_some(())
}

fn mac_idle() -> Option<()> {
    wait(|| read(MAC_CSR_CMD) & MAC_CSR_BUSY == 0)
}

fn mac_read(index: u32) -> Option<u32> {
    mac_idle()?;
    write(MAC_CSR_CMD, MAC_CSR_BUSY | MAC_CSR_READ | index);
    mac_idle()?;
    Some(read(MAC_CSR_DATA))
}

fn mac_write(index: u32, value: u32) -> Option<()> {
    mac_idle()?;
    write(MAC_CSR_DATA, value);
    write(MAC_CSR_CMD, MAC_CSR_BUSY | index);
    mac_idle()
}

fn mii_idle() -> Option<()> {
    wait(|| mac_read(MII_ACC).is_some_and(|acc| acc & MII_BUSY == 0))
}

fn phy_read(reg: u32) -> Option<u16> {
    mii_idle()?;
    mac_write(MII_ACC, (PHY_ADDR << 11) | (reg << 6) | MII_BUSY)?;
    mii_idle()?;
    Some(mac_read(MII_DATA)? as u16)
}

fn phy_write(reg: u32, value: u16) -> Option<()> {
    mii_idle()?;
    mac_write(MII_DATA, u32::from(value))?;
    mac_write(
        MII_ACC,
        (PHY_ADDR << 11) | (reg << 6) | MII_WRITE | MII_BUSY,
    )?;
    mii_idle()
}

/// Unmasks interrupt `events` (the handler masks them from interrupt context: this
/// read-modify-write must not interleave with it).
fn unmask(events: u32) {
    critical_section::with(|_| write(INT_EN, read(INT_EN) | events));
}

/// `ready()`, or else acknowledges and unmasks `event` and asks `ready()` once more:
/// whatever became ready before the acknowledgement is seen by the second look, whatever
/// comes after raises the interrupt.
fn ready_or_arm(event: u32, ready: impl Fn() -> bool) -> bool {
    if ready() {
        return true;
    }
    write(INT_STS, event);
    unmask(event);
    ready()
}

/// Frames waiting in the RX status FIFO.
fn rx_frames() -> u32 {
    (read(RX_FIFO_INF) >> 16) & 0xFF
}

/// Room in the TX data FIFO for a whole frame and its command words.
fn tx_room() -> bool {
    read(TX_FIFO_INF) & 0xFFFF >= FRAME as u32 + 8
}

/// The controller's interrupt: masks what fired and wakes the runner, which handles it
/// and unmasks it again.
pub(crate) fn on_interrupt() {
    let enabled = read(INT_EN);
    let fired = read(INT_STS) & enabled;
    write(INT_EN, enabled & !fired);
    if fired & INT_PHY != 0 {
        PHY_EVENT.store(true, Ordering::Relaxed);
    }
    WAKER.wake();
}

/// The frame buffers: one received frame, one frame being built for sending (smoltcp
/// answers some frames, ARP requests for one, while it still holds them).
pub struct Buffers {
    rx: [u8; FRAME],
    tx: [u8; FRAME],
}

impl Buffers {
    /// Zeroed buffers, for a `static`.
    pub const fn new() -> Self {
        Buffers {
            rx: [0; FRAME],
            tx: [0; FRAME],
        }
    }
}

impl Default for Buffers {
    fn default() -> Self {
        Self::new()
    }
}

/// The controller, ready for `embassy_net::new`. There is one chip: make one at a time.
pub struct Lan9118<'d> {
    mac: [u8; 6],
    buffers: &'d mut Buffers,
    link_up: bool,
}

impl<'d> Lan9118<'d> {
    /// Resets the controller and brings it up with address `mac`: autonegotiation,
    /// receiver and transmitter on, its interrupt unmasked in the NVIC. `None` if no
    /// LAN9118 answers or it does not come out of reset.
    pub fn new(mac: [u8; 6], buffers: &'d mut Buffers) -> Option<Self> {
        if read(BYTE_TEST) != BYTE_TEST_VALUE {
            return None;
        }
        write(HW_CFG, HW_CFG_SRST);
        wait(|| read(HW_CFG) & HW_CFG_SRST == 0 && read(PMT_CTRL) & PMT_CTRL_READY != 0)?;

        let [a, b, c, d, e, f] = mac;
        mac_write(MAC_ADDRL, u32::from_le_bytes([a, b, c, d]))?;
        mac_write(MAC_ADDRH, u32::from_le_bytes([e, f, 0, 0]))?;

        phy_write(PHY_BCR, PHY_BCR_AUTONEG)?;
        phy_write(PHY_IMR, PHY_EVENTS)?;
        phy_read(PHY_ISR)?; // clears what is pending
        let link_up = phy_read(PHY_BSR)? & PHY_BSR_LINK != 0;

        write(RX_CFG, 0);
        write(FIFO_INT, FIFO_INT_VALUE);
        write(TX_CFG, TX_CFG_TX_ON | TX_CFG_TXSAO);
        mac_write(MAC_CR, MAC_CR_VALUE)?;

        write(INT_STS, u32::MAX);
        write(INT_EN, INT_RSFL | INT_PHY);
        write(IRQ_CFG, IRQ_CFG_VALUE);
        // Until IRQ_CFG was written the line sat at its reset polarity: forget that.
        NVIC::unpend(IRQ);
        // SAFETY: the handler (`on_interrupt`, via the crate's `DefaultHandler`) only
        // touches the chip's interrupt registers and the waker, both safe to share.
        unsafe { NVIC::unmask(IRQ) };

        Some(Lan9118 {
            mac,
            buffers,
            link_up,
        })
    }

    /// Pops frames until one is good, and copies it (without FCS) into the RX buffer;
    /// its length, or `None` when the FIFO is empty (the RX interrupt is then armed).
    fn next_frame(&mut self, cx: &Context) -> Option<usize> {
        for _ in 0..RX_BATCH {
            if !ready_or_arm(INT_RSFL, || rx_frames() > 0) {
                return None;
            }
            let status = read(RX_STATUS_FIFO);
            let length = ((status >> 16) & 0x3FFF) as usize;
            let words = length.div_ceil(4);
            let frame = length.saturating_sub(4);
            if status & RX_STS_ERROR != 0 || !(14..=FRAME).contains(&frame) {
                (0..words).for_each(|_| {
                    read(RX_DATA_FIFO);
                });
                continue;
            }
            for chunk in self.buffers.rx[..frame].chunks_mut(4) {
                let word = read(RX_DATA_FIFO).to_le_bytes();
                chunk.copy_from_slice(&word[..chunk.len()]);
            }
            // The FCS, or what is left of it after the frame's last word.
            (frame.div_ceil(4)..words).for_each(|_| {
                read(RX_DATA_FIFO);
            });
            return Some(frame);
        }
        // A run of bad frames: come back for the rest.
        cx.waker().wake_by_ref();
        None
    }
}

impl embassy_net_driver::Driver for Lan9118<'_> {
    type RxToken<'a>
        = RxToken<'a>
    where
        Self: 'a;
    type TxToken<'a>
        = TxToken<'a>
    where
        Self: 'a;

    fn receive(&mut self, cx: &mut Context) -> Option<(Self::RxToken<'_>, Self::TxToken<'_>)> {
        WAKER.register(cx.waker());
        // The answer to a frame may need sending while it is handled: room first.
        if !ready_or_arm(INT_TDFA, tx_room) {
            return None;
        }
        let length = self.next_frame(cx)?;
        let Buffers { rx, tx } = &mut *self.buffers;
        Some((
            RxToken {
                frame: &mut rx[..length],
            },
            TxToken { buffer: tx },
        ))
    }

    fn transmit(&mut self, cx: &mut Context) -> Option<Self::TxToken<'_>> {
        WAKER.register(cx.waker());
        ready_or_arm(INT_TDFA, tx_room).then_some(TxToken {
            buffer: &mut self.buffers.tx,
        })
    }

    fn link_state(&mut self, cx: &mut Context) -> LinkState {
        WAKER.register(cx.waker());
        if PHY_EVENT.swap(false, Ordering::Relaxed) {
            // Reading the PHY's interrupt source clears it, and with it INT_PHY.
            let read_back = phy_read(PHY_ISR).and_then(|_| phy_read(PHY_BSR));
            self.link_up = read_back.is_some_and(|bsr| bsr & PHY_BSR_LINK != 0);
            write(INT_STS, INT_PHY);
            unmask(INT_PHY);
        }
        if self.link_up {
            LinkState::Up
        } else {
            LinkState::Down
        }
    }

    fn capabilities(&self) -> Capabilities {
        let mut caps = Capabilities::default();
        caps.max_transmission_unit = FRAME;
        caps
    }

    fn hardware_address(&self) -> HardwareAddress {
        HardwareAddress::Ethernet(self.mac)
    }
}

/// A received frame, in the RX buffer.
pub struct RxToken<'a> {
    frame: &'a mut [u8],
}

impl embassy_net_driver::RxToken for RxToken<'_> {
    fn consume<R, F>(self, f: F) -> R
    where
        F: FnOnce(&mut [u8]) -> R,
    {
        f(self.frame)
    }
}

/// Room for one frame: built in the TX buffer, then written to the TX data FIFO.
pub struct TxToken<'a> {
    buffer: &'a mut [u8; FRAME],
}

impl embassy_net_driver::TxToken for TxToken<'_> {
    fn consume<R, F>(self, len: usize, f: F) -> R
    where
        F: FnOnce(&mut [u8]) -> R,
    {
        let frame = &mut self.buffer[..len.min(FRAME)];
        let result = f(frame);
        let length = frame.len() as u32;
        // One buffer that is both the first and last segment; the chip pads short frames
        // and appends the FCS.
        write(TX_DATA_FIFO, TX_CMD_A_FIRST | TX_CMD_A_LAST | length);
        write(TX_DATA_FIFO, length);
        for chunk in frame.chunks(4) {
            let mut word = [0u8; 4];
            word[..chunk.len()].copy_from_slice(chunk);
            write(TX_DATA_FIFO, u32::from_le_bytes(word));
        }
        result
    }
}
