//! embassy-time's driver on mps2-an386: SysTick counts the time, CMSDK APB timer 0 wakes
//! the executor when the next timer is due.
//!
//! The tick is 1 µs (embassy-time's `tick-hz-1_000_000`): QEMU clocks SysTick's external
//! reference at 1 MHz on this board (`REFCLK_FRQ` in hw/arm/mps2.c), so a tick is one
//! count and embassy-net's conversion to smoltcp's microseconds is free; no 64-bit
//! division is on any hot path.
//!
//! SysTick is a 24-bit down counter (one lap is 2^24 µs, about 16.8 s) and runs with its
//! interrupt off. [`Clock::now`] widens it to 64 bits against the last value it returned:
//! the counter has moved forward by less than one lap since then, because the alarm below
//! never sleeps longer than [`MAX_SLEEP`] and every alarm reads the time. This needs no
//! wrap interrupt, and so has no window in which the counter has wrapped but the wrap
//! has not been counted yet.
//!
//! The alarm is timer 0 in one-shot mode (RELOAD 0) on the 25 MHz peripheral clock,
//! IRQ 8; each interrupt hands the due timers' wakers to the executor and arms the next.
//!
//! Timer 1 only paces QEMU, see [`init`].
use core::cell::{Cell, RefCell};
use core::task::Waker;

use cortex_m::peripheral::{NVIC, SYST};
use critical_section::{CriticalSection, Mutex};
use embassy_time_driver::Driver;
use embassy_time_queue_utils::Queue;

use crate::Irq;

/// CMSDK APB timer 0 (hw/arm/mps2.c maps it here, its interrupt on IRQ 8).
const TIMER0: usize = 0x4000_0000;
/// CMSDK APB timer 1.
const TIMER1: usize = 0x4000_1000;
/// Timer 1's period: 10 ms of the 25 MHz peripheral clock.
const PACE_CYCLES: u32 = 250_000;
/// Timer 0's interrupt line.
pub(crate) const TIMER0_IRQ: Irq = Irq(8);
const CTRL: usize = 0x00;
const VALUE: usize = 0x04;
const RELOAD: usize = 0x08;
const INTSTATUS: usize = 0x0C;
const CTRL_ENABLE: u32 = 1 << 0;
const CTRL_IRQ_ENABLE: u32 = 1 << 3;
/// Peripheral clock cycles (25 MHz) per tick (1 MHz).
const CYCLES_PER_TICK: u32 = 25;
/// The longest alarm, in ticks: well under one SysTick lap (the widening in
/// [`Clock::now`] relies on it) and under 2^32 peripheral cycles.
const MAX_SLEEP: u64 = 8_000_000;
/// SysTick's lap: 24 bits.
const LAP_MASK: u32 = 0x00FF_FFFF;

struct Clock {
    /// The last value [`Clock::now`] returned.
    last: Mutex<Cell<u64>>,
    /// The timers of every task waiting for a time (the executor's integrated queue).
    queue: Mutex<RefCell<Queue>>,
}

embassy_time_driver::time_driver_impl!(static CLOCK: Clock = Clock {
    last: Mutex::new(Cell::new(0)),
    queue: Mutex::new(RefCell::new(Queue::new())),
});

impl Clock {
    fn now_in(&self, cs: CriticalSection<'_>) -> u64 {
        // SAFETY: reading SysTick's current value has no side effect.
        let count = unsafe { (*SYST::PTR).cvr.read() } & LAP_MASK;
        let last = self.last.borrow(cs);
        // SysTick counts down: its position in the lap counts up.
        let position = LAP_MASK - count;
        let moved = position.wrapping_sub(last.get() as u32) & LAP_MASK;
        let now = last.get() + u64::from(moved);
        last.set(now);
        now
    }

    /// Wakes the due timers and arms timer 0 for the next one (or for [`MAX_SLEEP`]).
    fn arm(&self, queue: &mut Queue, cs: CriticalSection<'_>) {
        let now = self.now_in(cs);
        let next = queue.next_expiration(now);
        // `next` is after `now` (the due ones were just woken); at least one tick anyway.
        let ticks = next.saturating_sub(now).clamp(1, MAX_SLEEP) as u32;
        // SAFETY: timer 0's VALUE register; writing it (RELOAD is 0) starts one countdown.
        unsafe { timer_write(TIMER0, VALUE, ticks * CYCLES_PER_TICK) };
    }
}

impl Driver for Clock {
    fn now(&self) -> u64 {
        critical_section::with(|cs| self.now_in(cs))
    }

    fn schedule_wake(&self, at: u64, waker: &Waker) {
        critical_section::with(|cs| {
            let mut queue = self.queue.borrow_ref_mut(cs);
            if queue.schedule_wake(at, waker) {
                self.arm(&mut queue, cs);
            }
        })
    }
}

/// # Safety
/// `offset` must be one of the registers of the CMSDK timer at `base`.
unsafe fn timer_write(base: usize, offset: usize, value: u32) {
    // SAFETY: the caller names a register of a timer's MMIO window.
    unsafe { core::ptr::write_volatile((base + offset) as *mut u32, value) }
}

/// Starts SysTick and the alarm. Call once, before anything reads the time.
///
/// Also starts timer 1, periodic every 10 ms with its interrupt off: the device never
/// sees it, but each period is a timer event in QEMU's main loop, which then polls its
/// sockets again. libslirp adds the socket of a new forwarded connection without waking
/// that loop, so without this the first reply on a new connection could wait up to a
/// second (measured: 1 s for the first of two exchanges); with it, at most a period.
pub(crate) fn init() {
    // SAFETY: the time driver owns SysTick; nothing else in the image configures it.
    let syst = unsafe { &*SYST::PTR };
    // SAFETY: plain SysTick register writes: full lap, counter cleared, then enabled on
    // the external reference clock (CLKSOURCE 0) with its interrupt off.
    unsafe {
        syst.rvr.write(LAP_MASK);
        syst.cvr.write(0);
        syst.csr.write(1);
    }
    // The clock starts where the counter is (it may or may not have reloaded yet).
    critical_section::with(|cs| {
        let count = syst.cvr.read() & LAP_MASK;
        CLOCK.last.borrow(cs).set(u64::from(LAP_MASK - count));
    });
    // SAFETY: timer 0's registers; RELOAD 0 makes every VALUE write one countdown.
    unsafe {
        timer_write(TIMER0, RELOAD, 0);
        timer_write(TIMER0, INTSTATUS, 1);
    }
    // The first countdown is loaded before the timer is enabled (enabling it at 0 stops it).
    critical_section::with(|cs| CLOCK.arm(&mut CLOCK.queue.borrow_ref_mut(cs), cs));
    // SAFETY: timer 0's control register: count, and interrupt at the end of a countdown.
    unsafe { timer_write(TIMER0, CTRL, CTRL_ENABLE | CTRL_IRQ_ENABLE) };
    NVIC::unpend(TIMER0_IRQ);
    // SAFETY: the handler (`on_alarm`, via the crate's `DefaultHandler`) is in place and
    // touches only state behind the critical section.
    unsafe { NVIC::unmask(TIMER0_IRQ) };
    // SAFETY: timer 1's registers: RELOAD sets the period, CTRL enables it without its
    // interrupt.
    unsafe {
        timer_write(TIMER1, RELOAD, PACE_CYCLES);
        timer_write(TIMER1, CTRL, CTRL_ENABLE);
    }
}

/// Timer 0's interrupt: acknowledges it, wakes the due timers, arms the next alarm.
pub(crate) fn on_alarm() {
    // SAFETY: timer 0's INTSTATUS is write-one-to-clear; this drops the interrupt line.
    unsafe { timer_write(TIMER0, INTSTATUS, 1) };
    critical_section::with(|cs| CLOCK.arm(&mut CLOCK.queue.borrow_ref_mut(cs), cs));
}
