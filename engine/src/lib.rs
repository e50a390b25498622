//! kaas storage engine.
