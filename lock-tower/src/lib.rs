//! A tower `Layer` that takes a distributed lock per request.
//!
//! This crate is a skeleton; `LockLayer` arrives with issue 4. It depends on
//! `lock-core` only, in the direction the workspace design fixes.

pub use lock_core::FencingToken;
