//! The peer client against scripted servers.
