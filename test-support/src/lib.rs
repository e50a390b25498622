//! Test harness shared by the integration tests of several workspace crates. Dev-only: no
//! crate lists it under `[dependencies]`, and it is never published.
//!
//! It depends on no kaas crate, so any of them (the I/O-free `kaas-cluster` included) can
//! dev-depend on it without a cycle.

pub mod apiserver;
