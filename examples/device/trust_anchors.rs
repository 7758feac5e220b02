//! Build-script code shared by the boards that run the device agent (QEMU's mps2-an386,
//! the NUCLEO-F767ZI): the TLS image's trust anchors and the build's time. Each board's
//! `build.rs` includes it (`#[path = …] mod trust_anchors;`) and calls [`emit`].

use std::{env, fs, path::Path};

use base64::Engine as _;

/// Writes what the TLS image compiles in:
/// - `BENCHLINK_BUILD_UNIX_TIME`, the build's time: what the device knows it is later than
///   before it is told the time (a certificate that expired before it is refused);
/// - `$OUT_DIR/trust_anchors.rs` (`TRUST_ANCHORS: &[&[u8]]`): every certificate of the PEM
///   file(s) named by `BENCHLINK_CA_PEM` (paths separated by `:`), each as a DER file in
///   `$OUT_DIR`. Without the board's `tls` feature the list is empty and the variable is
///   not needed; with it, a missing variable or a file without certificates stops the build.
pub fn emit(out: &Path) {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    println!("cargo:rustc-env=BENCHLINK_BUILD_UNIX_TIME={now}");

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
                let der = base64::engine::general_purpose::STANDARD
                    .decode(&b64)
                    .unwrap_or_else(|e| panic!("{path}: a certificate's base64: {e}"));
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
