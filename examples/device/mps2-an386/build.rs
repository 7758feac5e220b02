//! Links every image of this crate with cortex-m-rt's `link.x` and the board's memory map,
//! `examples/firmware/memory.x` (the same emulated board as the protocol-only firmware: one
//! map for both). No `.cargo/config.toml` is needed: the target is passed as
//! `--target thumbv7em-none-eabihf`.
//!
//! It also picks the agent's scenario at build time: the file named by
//! `BENCHLINK_SCENARIO` (`.ci/device-agent --scenario FILE`; a path relative to this
//! crate, or absolute), else `examples/scenarios/hello.bdl`, copied to
//! `$OUT_DIR/scenario` for `include_bytes!`, its file name in `BENCHLINK_SCENARIO_NAME`.
//! A device has no file system to read it from, and this keeps the choice out of the
//! shared agent crate.
//!
//! And the TLS image's trust anchors and build time (`../trust_anchors.rs`, shared with
//! the NUCLEO-F767ZI's build script).
use std::{env, fs, path::PathBuf};

#[path = "../trust_anchors.rs"]
mod trust_anchors;

const MEMORY_X: &str = "../../firmware/memory.x";
const DEFAULT_SCENARIO: &str = "../../scenarios/hello.bdl";

fn main() {
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("OUT_DIR"));
    fs::copy(MEMORY_X, out.join("memory.x")).expect("copy memory.x");
    println!("cargo:rustc-link-search={}", out.display());
    println!("cargo:rustc-link-arg-bins=-Tlink.x");
    println!("cargo:rerun-if-changed={MEMORY_X}");
    println!("cargo:rerun-if-changed=build.rs");

    println!("cargo:rerun-if-env-changed=BENCHLINK_SCENARIO");
    let scenario = env::var_os("BENCHLINK_SCENARIO")
        .filter(|s| !s.is_empty())
        .map_or_else(|| PathBuf::from(DEFAULT_SCENARIO), PathBuf::from);
    let name = scenario
        .file_name()
        .and_then(|n| n.to_str())
        .expect("BENCHLINK_SCENARIO names a file with a UTF-8 name")
        .to_owned();
    fs::copy(&scenario, out.join("scenario"))
        .unwrap_or_else(|e| panic!("BENCHLINK_SCENARIO {}: {e}", scenario.display()));
    println!("cargo:rerun-if-changed={}", scenario.display());
    println!("cargo:rustc-env=BENCHLINK_SCENARIO_NAME={name}");

    println!("cargo:rerun-if-changed=../trust_anchors.rs");
    trust_anchors::emit(&out);
}
