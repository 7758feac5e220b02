//! benchlink-embassy: async clients over embassy-net (see issue 4; today a compiling
//! skeleton that proves the core links into a `no_std` crate for the target).
#![no_std]

pub use benchlink_core as core;
