//! Redis-only tests (multi-process, faults, slots).
