//! Shared parts of the examples: the gRPC service definition and a small
//! fenced order store.

pub mod orders;
pub mod store;
