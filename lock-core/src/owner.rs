//! Owner values: one per acquisition, never per process or thread.
//!
//! `<process id>:<pid>:<sequence>`, where the process id is 64 random bits
//! drawn once per process (pids repeat across machines and restarts) and the
//! sequence counts acquisitions. A delayed renewal or release of an old
//! acquisition therefore never matches a newer one, even in the same process.

use std::sync::LazyLock;
use std::sync::atomic::{AtomicU64, Ordering};

static PROCESS: LazyLock<String> = LazyLock::new(|| {
    let mut bytes = [0u8; 8];
    // Without an OS random source, fall back on time and pid: still unique
    // per process in practice, and the sequence keeps acquisitions apart.
    if getrandom::fill(&mut bytes).is_err() {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        bytes = (nanos ^ u64::from(std::process::id()).rotate_left(32)).to_le_bytes();
    }
    format!("{:016x}:{}", u64::from_le_bytes(bytes), std::process::id())
});

static SEQUENCE: AtomicU64 = AtomicU64::new(1);

/// A fresh owner value (one allocation; it is made on every lock).
pub(crate) fn next() -> String {
    let seq = SEQUENCE.fetch_add(1, Ordering::Relaxed);
    let mut digits = [0u8; 20];
    let mut start = digits.len();
    let mut rest = seq;
    loop {
        start -= 1;
        digits[start] = b'0' + (rest % 10) as u8;
        rest /= 10;
        if rest == 0 {
            break;
        }
    }
    let process: &str = &PROCESS;
    let mut owner = String::with_capacity(process.len() + 1 + digits.len() - start);
    owner.push_str(process);
    owner.push(':');
    // ASCII digits only.
    owner.extend(digits[start..].iter().map(|&d| char::from(d)));
    owner
}

#[cfg(test)]
mod tests {
    #[test]
    fn owner_values_are_unique_per_acquisition() {
        let a = super::next();
        let b = super::next();
        assert_ne!(a, b);
        assert_eq!(a.rsplit_once(':').unwrap().0, b.rsplit_once(':').unwrap().0);
        let (sa, sb) = (a.rsplit_once(':').unwrap().1, b.rsplit_once(':').unwrap().1);
        assert!(sb.parse::<u64>().unwrap() > sa.parse::<u64>().unwrap());
    }
}
