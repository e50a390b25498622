//! Marker decisions, routing and writing.
