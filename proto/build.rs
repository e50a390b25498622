//! Generates the Rust code of `heartbeat.proto` (prost messages, tonic client and server) into
//! `OUT_DIR` at build time. `protoc` comes from the `protoc-bin-vendored` crate, so building
//! needs no system package.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // prost-build finds protoc through this variable; setting it here affects only this build
    // script's process.
    std::env::set_var("PROTOC", protoc_bin_vendored::protoc_bin_path()?);
    println!("cargo:rerun-if-changed=heartbeat.proto");
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .compile_protos(&["heartbeat.proto"], &["."])?;
    Ok(())
}
