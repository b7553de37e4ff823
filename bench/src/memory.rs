//! Live heap bytes of this process, for the state-memory figures: a global
//! allocator that counts what it hands out and forwards to the system one.
//!
//! It counts only inside a [`Window`]: a shared counter changed on every
//! allocation would pass its cache line between the worker threads of the
//! other workloads, and charge allocation-heavy code (HTTP stacks, clients)
//! for a cost no user's program has.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicIsize, Ordering};

static LIVE: AtomicIsize = AtomicIsize::new(0);
/// Whether allocations are being counted (only read outside a window, so
/// its cache line stays shared).
static COUNTING: AtomicBool = AtomicBool::new(false);

/// Adds `bytes` to the live count while counting.
fn count(bytes: isize) {
    if COUNTING.load(Ordering::Relaxed) {
        LIVE.fetch_add(bytes, Ordering::Relaxed);
    }
}

/// Allocations are counted while a window lives.
pub struct Window(());

impl Window {
    /// Starts counting (the count is only ever read as a difference within
    /// the window).
    pub fn open() -> Self {
        COUNTING.store(true, Ordering::SeqCst);
        Window(())
    }
}

impl Drop for Window {
    fn drop(&mut self) {
        COUNTING.store(false, Ordering::SeqCst);
    }
}

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
            count(layout.size() as isize);
        }
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) };
        count(-(layout.size() as isize));
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: same contract as the caller's.
        let ptr = unsafe { System.alloc_zeroed(layout) };
        if !ptr.is_null() {
            count(layout.size() as isize);
        }
        ptr
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: same contract as the caller's.
        let new = unsafe { System.realloc(ptr, layout, new_size) };
        if !new.is_null() {
            count(new_size as isize - layout.size() as isize);
        }
        new
    }
}

/// Heap bytes allocated by this process less those freed, counted while
/// a [`Window`] was open: compare two readings within one window.
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
