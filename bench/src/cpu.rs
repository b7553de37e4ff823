//! CPU time spent per operation, by this process and by the Redis server:
//! a figure that a busy neighbour on the machine disturbs far less than
//! wall-clock throughput, and that says which side a cost is on.

use std::path::PathBuf;

/// Reads CPU time of this process and of the Redis server's main thread.
pub struct CpuClock {
    /// `/proc/<pid>/schedstat` of the server (absent if not on this machine).
    server: Option<PathBuf>,
}

/// CPU time consumed so far, in nanoseconds.
#[derive(Debug, Clone, Copy)]
pub struct CpuReading {
    client: u64,
    server: Option<u64>,
}

/// CPU microseconds per operation between two readings.
#[derive(Debug, Clone, Copy, Default)]
pub struct CpuPerOp {
    pub client: Option<f64>,
    pub server: Option<f64>,
}

impl CpuClock {
    /// Finds the server's process through `INFO server`.
    pub async fn new(client: &redis::Client) -> CpuClock {
        let server = crate::workloads::info_field(client, "server", "process_id")
            .await
            .map(|pid| PathBuf::from(format!("/proc/{pid}/schedstat")))
            .filter(|path| path.exists());
        CpuClock { server }
    }

    pub fn read(&self) -> CpuReading {
        CpuReading {
            client: process_cpu_ns(),
            server: self.server.as_ref().and_then(|path| {
                let stat = std::fs::read_to_string(path).ok()?;
                stat.split_whitespace().next()?.parse().ok()
            }),
        }
    }
}

impl CpuReading {
    /// Per-operation CPU since `self`.
    pub fn per_op(&self, later: &CpuReading, ops: u64) -> CpuPerOp {
        let ops = ops.max(1) as f64;
        CpuPerOp {
            client: Some((later.client - self.client) as f64 / 1e3 / ops),
            server: match (self.server, later.server) {
                (Some(a), Some(b)) => Some((b - a) as f64 / 1e3 / ops),
                _ => None,
            },
        }
    }
}

/// CPU time of every thread of this process (`CLOCK_PROCESS_CPUTIME_ID`).
#[allow(unsafe_code)]
fn process_cpu_ns() -> u64 {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `now` is a valid, writable timespec for the call.
    let status = unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut now) };
    assert_eq!(status, 0, "clock_gettime(CLOCK_PROCESS_CPUTIME_ID)");
    now.tv_sec as u64 * 1_000_000_000 + now.tv_nsec as u64
}
