//! Live heap bytes of this process, for the state-memory figures: a global
//! allocator that counts what it hands out and forwards to the system one.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};

static LIVE: AtomicIsize = AtomicIsize::new(0);

/// Counts live bytes and forwards to [`System`].
pub struct Counting;

// GlobalAlloc is an unsafe trait; this forwards every call unchanged to the
// system allocator and only keeps a relaxed byte count.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: same contract as the caller's.
        let ptr = unsafe { System.alloc(layout) };
        if !ptr.is_null() {
            LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        }
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: same contract as the caller's.
        let ptr = unsafe { System.alloc_zeroed(layout) };
        if !ptr.is_null() {
            LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        }
        ptr
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: same contract as the caller's.
        let new = unsafe { System.realloc(ptr, layout, new_size) };
        if !new.is_null() {
            LIVE.fetch_add(
                new_size as isize - layout.size() as isize,
                Ordering::Relaxed,
            );
        }
        new
    }
}

/// Heap bytes currently allocated by this process.
pub fn live_bytes() -> isize {
    LIVE.load(Ordering::Relaxed)
}

/// State memory of one subject.
#[derive(Debug, Clone)]
pub struct StateMemory {
    pub subject: String,
    /// Client heap per task waiting for a held lock (its tokio task included).
    pub per_waiter: f64,
    /// Client heap per held lock (guard, lease, watchdog task).
    pub per_held: f64,
    /// Redis `used_memory` per held lock.
    pub redis_per_held: Option<f64>,
    /// How the waiters were known to be waiting.
    pub waiting_known_by: &'static str,
}

/// The Markdown table of state memory.
pub fn table(rows: &[StateMemory]) -> String {
    let mut out = String::from(
        "| subject | client bytes per waiting task | client bytes per held lock | Redis bytes per held lock | waiters counted when |\n|---|---|---|---|---|\n",
    );
    for row in rows {
        out.push_str(&format!(
            "| {} | {:.0} | {:.0} | {} | {} |\n",
            row.subject,
            row.per_waiter,
            row.per_held,
            row.redis_per_held.map_or("-".into(), |b| format!("{b:.0}")),
            row.waiting_known_by,
        ));
    }
    out
}
