//! The container image: `tests/deploy/image-smoke.sh` builds it with
//! `scripts/build-image.sh` from this build's `kaas` (the release binary is what ships; the
//! debug one keeps CI from compiling the broker twice), starts kaas from the image's root
//! file system with chroot, and has librdkafka produce and consume through it.

mod support;

use std::process::Command;

#[test]
fn kaas_runs_from_the_image_and_serves_a_real_client() {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/deploy/image-smoke.sh");
    let output = Command::new(script)
        .arg(env!("CARGO_BIN_EXE_kaas"))
        .arg(support::free_port().to_string())
        .arg(support::free_port().to_string())
        .env("RUST_LOG", "warn")
        .output()
        .expect("run the image smoke test");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("produced and consumed 100 records"),
        "{stdout}"
    );
    // FROM scratch: the binary, its libraries and the loader, nothing else.
    let files: Vec<&str> = stdout.lines().filter(|l| l.starts_with('/')).collect();
    assert!(files.contains(&"/kaas"), "{files:?}");
    assert!(
        files.iter().any(|f| f.starts_with("/lib64/ld-linux")),
        "{files:?}"
    );
    assert!(files.len() <= 8, "unexpected files in the image: {files:?}");
}
