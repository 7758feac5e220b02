//! The TLS image's trust anchors and build time (feature `tls`; the device agent's boards
//! share this code, `examples/device/trust_anchors.rs`); nothing else (the memory map comes
//! from embassy-stm32's `memory-x` feature, `link.x` and `defmt.x` from
//! `.cargo/config.toml`).
use std::{env, path::PathBuf};

#[path = "../../device/trust_anchors.rs"]
mod trust_anchors;

fn main() {
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("OUT_DIR"));
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=../../device/trust_anchors.rs");
    trust_anchors::emit(&out);
}
