//! The TLS image's trust anchors and build time (feature `tls`); nothing else (the memory
//! map comes from embassy-stm32's `memory-x` feature, `link.x` and `defmt.x` from
//! `.cargo/config.toml`).
//!
//! Every certificate of the PEM file(s) named by `BENCHLINK_CA_PEM` (paths separated by
//! `:`) becomes a DER file in `$OUT_DIR` and an entry of `$OUT_DIR/trust_anchors.rs`
//! (`TRUST_ANCHORS: &[&[u8]]`), and `BENCHLINK_BUILD_UNIX_TIME` is the build's time: the
//! same mechanism as QEMU's board (`examples/device/mps2-an386/build.rs`), whose
//! functions are copied here: that crate's build script is not a library the two could
//! share without changing it (see the note in README.md).
//!
//! Without the `tls` feature the list is empty and the variable is not needed.
use std::{env, fs, path::Path, path::PathBuf};

fn main() {
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("OUT_DIR"));
    println!("cargo:rerun-if-changed=build.rs");

    // The build's time: what the device knows it is later than before it is told the
    // time (a certificate that expired before it is refused).
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    println!("cargo:rustc-env=BENCHLINK_BUILD_UNIX_TIME={now}");

    trust_anchors(&out);
}

/// The TLS image's trust anchors: every certificate of the PEM file(s) named by
/// `BENCHLINK_CA_PEM`, as DER files and `$OUT_DIR/trust_anchors.rs`.
fn trust_anchors(out: &Path) {
    println!("cargo:rerun-if-env-changed=BENCHLINK_CA_PEM");
    let mut code = String::from(
        "/// Trust anchors from BENCHLINK_CA_PEM (DER).\npub const TRUST_ANCHORS: &[&[u8]] = &[\n",
    );
    let tls = env::var_os("CARGO_FEATURE_TLS").is_some();
    let pems = env::var("BENCHLINK_CA_PEM").unwrap_or_default();
    if tls && pems.is_empty() {
        panic!("the TLS image needs BENCHLINK_CA_PEM: the PEM file(s) of the CA(s) it trusts");
    }
    let mut n = 0;
    for path in pems.split(':').filter(|p| !p.is_empty()) {
        println!("cargo:rerun-if-changed={path}");
        let text =
            fs::read_to_string(path).unwrap_or_else(|e| panic!("BENCHLINK_CA_PEM {path}: {e}"));
        let mut inside = false;
        let mut b64 = String::new();
        for line in text.lines().map(str::trim) {
            if line == "-----BEGIN CERTIFICATE-----" {
                (inside, b64) = (true, String::new());
            } else if line == "-----END CERTIFICATE-----" && inside {
                inside = false;
                let der = base64_decode(&b64).unwrap_or_else(|| panic!("{path}: bad base64"));
                let file = out.join(format!("anchor{n}.der"));
                fs::write(&file, der).expect("write a trust anchor");
                code.push_str(&format!(
                    "    include_bytes!({:?}),\n",
                    file.display().to_string()
                ));
                n += 1;
            } else if inside {
                b64.push_str(line);
            }
        }
    }
    if tls && n == 0 {
        panic!("BENCHLINK_CA_PEM {pems}: no certificate in it");
    }
    code.push_str("];\n");
    fs::write(out.join("trust_anchors.rs"), code).expect("write trust_anchors.rs");
}

/// Standard base64 (with padding) to bytes.
fn base64_decode(text: &str) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    let (mut acc, mut bits) = (0u32, 0);
    for c in text.bytes().filter(|c| *c != b'=') {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        };
        acc = acc << 6 | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    Some(out)
}
