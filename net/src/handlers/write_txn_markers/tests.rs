//! WriteTxnMarkers over a real shard.
