//! Links every image of this crate with cortex-m-rt's `link.x` and the board's memory map,
//! `examples/firmware/memory.x` (the same emulated board as the protocol-only firmware: one
//! map for both). No `.cargo/config.toml` is needed: the target is passed as
//! `--target thumbv7em-none-eabihf`.
use std::{env, fs, path::PathBuf};

const MEMORY_X: &str = "../../firmware/memory.x";

fn main() {
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("OUT_DIR"));
    fs::copy(MEMORY_X, out.join("memory.x")).expect("copy memory.x");
    println!("cargo:rustc-link-search={}", out.display());
    println!("cargo:rustc-link-arg-bins=-Tlink.x");
    println!("cargo:rerun-if-changed={MEMORY_X}");
    println!("cargo:rerun-if-changed=build.rs");
}
