//! Shared by this crate's integration tests.
pub mod apiserver;
pub mod controller_core;
