//! What both firmware images share: semihosting output without `core::fmt`, the exit
//! code, the panic handler and the stack high-water mark.
//!
//! Nothing here formats with `core::fmt`: numbers are written digit by digit, so the
//! images' flash is the protocol code plus a few hundred bytes of harness. There is no
//! global allocator in either image: the core links without one.
#![no_std]

use core::panic::PanicInfo;
use cortex_m_semihosting::{debug, hio};

/// Semihosting stdout (the host's terminal under QEMU), written without `core::fmt`.
pub struct Host {
    stream: Option<hio::HostStream>,
}

impl Host {
    /// Opens the host's stdout; output is dropped if the debugger refuses.
    pub fn open() -> Host {
        Host {
            stream: hio::hstdout().ok(),
        }
    }

    /// Writes `s`.
    pub fn str(&mut self, s: &str) -> &mut Self {
        self.bytes(s.as_bytes())
    }

    /// Writes raw bytes.
    pub fn bytes(&mut self, b: &[u8]) -> &mut Self {
        if let Some(stream) = self.stream.as_mut() {
            let _ = stream.write_all(b);
        }
        self
    }

    /// Writes `n` in decimal.
    pub fn u64(&mut self, n: u64) -> &mut Self {
        // Core's formatter (linked anyway for request ids): no second copy of the loop.
        let mut digits = [0u8; 20];
        let mut out = benchlink_core::http::Cursor::new(&mut digits);
        let _ = out.push_u64(n); // 20 digits hold any u64
        let len = out.len();
        self.bytes(&digits[..len])
    }
}

/// Ends the emulation with exit code 0 (`true`) or 1.
pub fn exit(success: bool) -> ! {
    debug::exit(if success {
        debug::EXIT_SUCCESS
    } else {
        debug::EXIT_FAILURE
    });
    #[allow(clippy::empty_loop)]
    loop {}
}

/// A panic is a failed run: say so (without formatting the message, which would link
/// `core::fmt`) and exit with failure.
#[panic_handler]
fn panic(_info: &PanicInfo) -> ! {
    Host::open().str("PANIC: firmware panicked\n");
    exit(false)
}

/// The stack high-water mark: [`paint`](stack::paint) the free stack at the start of
/// `main`, measure [`peak`](stack::peak) at the end.
pub mod stack {
    const PATTERN: u32 = 0xDEAD_C0DE;

    extern "C" {
        /// Top of the stack (cortex-m-rt: the end of RAM).
        static _stack_start: u32;
        /// First free byte after `.bss`/`.uninit` (cortex-m-rt's heap start): the stack
        /// can grow down to here.
        static __sheap: u32;
    }

    fn bounds() -> (usize, usize) {
        let bottom = core::ptr::addr_of!(__sheap) as usize;
        let top = core::ptr::addr_of!(_stack_start) as usize;
        ((bottom + 3) & !3, top)
    }

    /// Fills the free stack below the current frame with a pattern. Call first thing in
    /// `main`; everything above the current frame (reset handler, `main`'s own frame)
    /// counts as used anyway.
    #[inline(never)]
    pub fn paint() {
        let (bottom, _) = bounds();
        // Leave a margin below this function's own frame.
        let limit = (cortex_m::register::msp::read() as usize).saturating_sub(64) & !3;
        let mut p = bottom;
        while p < limit {
            // SAFETY: [bottom, limit) is free RAM between the end of the statics and the
            // live stack, which nothing else uses (no heap, single thread, no interrupts).
            unsafe { core::ptr::write_volatile(p as *mut u32, PATTERN) };
            p += 4;
        }
    }

    /// Bytes of stack used since [`paint`]: from the top of RAM down to the lowest word
    /// that no longer holds the pattern.
    #[inline(never)]
    pub fn peak() -> usize {
        let (bottom, top) = bounds();
        let mut p = bottom;
        // SAFETY: reading the painted region, see `paint`.
        while p < top && unsafe { core::ptr::read_volatile(p as *const u32) } == PATTERN {
            p += 4;
        }
        top - p
    }
}
