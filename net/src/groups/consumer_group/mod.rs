//! KIP-848 consumer groups (ConsumerGroupHeartbeat, ConsumerGroupDescribe).
