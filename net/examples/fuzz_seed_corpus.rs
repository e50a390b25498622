//! Writes valid request frames (without the size prefix) of every served API and version as
//! a seed corpus for the `decode_request` fuzz target:
//! `cargo run -p kaas-net --example fuzz_seed_corpus -- net/fuzz/corpus/decode_request`.

use kaas_net::protocol::frame::sample_pair;
use kaas_net::protocol::sample::SampleRng;
use kaas_net::protocol::{RequestHeader, SUPPORTED_APIS};

fn main() -> std::io::Result<()> {
    let Some(dir) = std::env::args().nth(1) else {
        eprintln!("usage: fuzz_seed_corpus <corpus directory>");
        std::process::exit(2);
    };
    std::fs::create_dir_all(&dir)?;
    let mut written = 0;
    for seed in 0..4u64 {
        for range in SUPPORTED_APIS {
            for version in range.min_version..=range.max_version {
                let mut rng = SampleRng::new(seed * 7919 + version as u64);
                let Some((request, _)) = sample_pair(range.api_key, version, &mut rng) else {
                    continue;
                };
                let header = RequestHeader {
                    api_key: range.api_key,
                    api_version: version,
                    correlation_id: 1,
                    client_id: Some("seed".into()),
                };
                let frame: Vec<u8> = request
                    .encode_frame(&header)
                    .iter()
                    .flat_map(|chunk| chunk.iter().copied())
                    .skip(4)
                    .collect();
                let path = format!("{dir}/api{}_v{version}_s{seed}", range.api_key);
                std::fs::write(path, &frame)?;
                written += 1;
            }
        }
    }
    println!("wrote {written} seed frames to {dir}");
    Ok(())
}
