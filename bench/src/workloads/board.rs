//! The shared state of one contention run, kept in a small file so that
//! tasks of several processes share it: a counter incremented inside the
//! lock (by a plain read and write, so a broken mutual exclusion loses
//! updates) and who released last and when.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

const COUNTER: u64 = 0;
const LAST_TASK: u64 = 8;
const LAST_AT: u64 = 16;
const SIZE: usize = 24;

/// The board of one run.
pub struct Board {
    file: File,
}

/// The board's file; removed when dropped.
pub struct BoardFile {
    file: tempfile::NamedTempFile,
}

impl BoardFile {
    /// A fresh, zeroed board in shared memory (`/dev/shm`) when available.
    pub fn create() -> BoardFile {
        let shm = Path::new("/dev/shm");
        let file = if shm.is_dir() {
            tempfile::NamedTempFile::new_in(shm)
        } else {
            tempfile::NamedTempFile::new()
        }
        .expect("board file");
        file.as_file().write_all_at(&[0; SIZE], 0).expect("board");
        BoardFile { file }
    }

    pub fn path(&self) -> PathBuf {
        self.file.path().to_owned()
    }

    pub fn open(&self) -> Board {
        Board::open(self.file.path())
    }
}

impl Board {
    pub fn open(path: &Path) -> Board {
        let file = File::options()
            .read(true)
            .write(true)
            .open(path)
            .expect("board file");
        Board { file }
    }

    fn read(&self, offset: u64) -> u64 {
        let mut bytes = [0; 8];
        self.file
            .read_exact_at(&mut bytes, offset)
            .expect("board read");
        u64::from_le_bytes(bytes)
    }

    fn write(&self, offset: u64, value: u64) {
        self.file
            .write_all_at(&value.to_le_bytes(), offset)
            .expect("board write");
    }

    /// Read, then write plus one: correct only under mutual exclusion.
    pub fn increment(&self) {
        let seen = self.read(COUNTER);
        self.write(COUNTER, seen + 1);
    }

    pub fn count(&self) -> u64 {
        self.read(COUNTER)
    }

    /// Inside the lock, just before releasing: who releases.
    pub fn releasing(&self, task: u64) {
        self.write(LAST_TASK, task);
    }

    /// After the release returned: when.
    pub fn released_at(&self, at: u64) {
        self.write(LAST_AT, at);
    }

    /// The task that released last (0: none yet) and when it last recorded
    /// a release time.
    pub fn last_release(&self) -> (u64, u64) {
        (self.read(LAST_TASK), self.read(LAST_AT))
    }
}

/// Nanoseconds of the wall clock, comparable across processes of one
/// machine.
pub fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}
