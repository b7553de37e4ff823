//! Examples live under `examples/`; this library is empty.
