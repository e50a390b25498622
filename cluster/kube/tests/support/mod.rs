//! Shared by this crate's integration tests (the API server they run against is
//! `kaas_test_support::apiserver`).
pub mod controller_core;
