//! A topic's `compression.type` and codec levels, parsed for the produce path (which
//! recompresses batches whose codec differs from the topic's).

/// A topic's `compression.type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CompressionType {
    /// Keep whatever codec the producer used (Kafka's default).
    Producer,
    /// Store batches uncompressed.
    Uncompressed,
    /// gzip.
    Gzip,
    /// Snappy.
    Snappy,
    /// LZ4.
    Lz4,
    /// Zstandard.
    Zstd,
}

impl CompressionType {
    /// Parses a stored (validated) `compression.type`; anything else is `Producer`.
    pub fn from_name(name: &str) -> Self {
        match name {
            "uncompressed" => CompressionType::Uncompressed,
            "gzip" => CompressionType::Gzip,
            "snappy" => CompressionType::Snappy,
            "lz4" => CompressionType::Lz4,
            "zstd" => CompressionType::Zstd,
            _ => CompressionType::Producer,
        }
    }
}

/// What a topic's compression configs say.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TopicCompression {
    /// `compression.type`.
    pub codec: CompressionType,
    /// `compression.gzip.level`: 1–9, or -1 for zlib's default.
    pub gzip_level: i32,
    /// `compression.lz4.level`: 1–17.
    pub lz4_level: i32,
    /// `compression.zstd.level`: -131072–22.
    pub zstd_level: i32,
}

impl TopicCompression {
    /// The codec and level the engine re-encodes batches in; `None` keeps the producer's.
    pub fn engine_target(&self) -> Option<kaas_engine::compression::CompressionTarget> {
        use kaas_engine::compression::{Codec, CompressionTarget};
        let (codec, level) = match self.codec {
            CompressionType::Producer => return None,
            CompressionType::Uncompressed => (Codec::None, None),
            CompressionType::Gzip => (Codec::Gzip, Some(self.gzip_level)),
            CompressionType::Snappy => (Codec::Snappy, None),
            CompressionType::Lz4 => (Codec::Lz4, Some(self.lz4_level)),
            CompressionType::Zstd => (Codec::Zstd, Some(self.zstd_level)),
        };
        Some(CompressionTarget {
            codec,
            // -1 is gzip's "zlib default"; the engine's `None` means the codec's default.
            level: level.filter(|&level| level != -1),
        })
    }
}
