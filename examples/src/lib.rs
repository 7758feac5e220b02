//! Runnable benchlink programs (see the binaries).
