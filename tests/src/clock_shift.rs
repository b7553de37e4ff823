//! [`ClockShift`]: a server process whose wall clock a test can step
//! forward or back while it runs (`clock_shift.c`, preloaded).
//!
//! The shim is built with the machine's C compiler (the one Rust links
//! with) the first time a test asks for it. Monotonic clocks are left alone, as an NTP step would leave
//! them.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

use tempfile::TempDir;

/// The shim's source, compiled on first use.
const SOURCE: &str = include_str!("clock_shift.c");

/// The wall-clock offset of the server processes started with it.
#[derive(Debug)]
pub struct ClockShift {
    dir: TempDir,
}

impl ClockShift {
    /// A clock shifted by nothing yet.
    pub fn new() -> Self {
        let dir = tempfile::Builder::new()
            .prefix("lock-testkit-clock-")
            .tempdir()
            .expect("temp dir");
        // Readable by a server running as another user (PostgreSQL's).
        let mode = std::os::unix::fs::PermissionsExt::from_mode(0o755);
        std::fs::set_permissions(dir.path(), mode).expect("chmod clock dir");
        let clock = ClockShift { dir };
        clock.set_ms(0);
        clock
    }

    /// Steps the clock to `ms` milliseconds from the true time (negative:
    /// behind); a server's next clock read sees it.
    pub fn set_ms(&self, ms: i64) {
        let file = self.file();
        let staged = self.dir.path().join("shift.next");
        std::fs::write(&staged, ms.to_string()).expect("write the clock shift");
        let mode = std::os::unix::fs::PermissionsExt::from_mode(0o644);
        std::fs::set_permissions(&staged, mode).expect("chmod the clock shift");
        // Renamed into place: a server never reads a half-written number.
        std::fs::rename(&staged, file).expect("move the clock shift into place");
    }

    /// Steps the clock by `by` ahead (`ahead = true`) or behind the true
    /// time.
    pub fn set(&self, by: Duration, ahead: bool) {
        let ms = by.as_millis() as i64;
        self.set_ms(if ahead { ms } else { -ms });
    }

    /// The environment a server process needs to run on this clock.
    pub fn env(&self) -> [(String, String); 2] {
        [
            ("LD_PRELOAD".to_owned(), shim().display().to_string()),
            (
                "CLOCK_SHIFT_FILE".to_owned(),
                self.file().display().to_string(),
            ),
        ]
    }

    /// `env K=V ...`, a launcher that starts a program on this clock.
    pub fn launcher(&self) -> Vec<String> {
        let mut launcher = vec!["env".to_owned()];
        launcher.extend(self.env().iter().map(|(k, v)| format!("{k}={v}")));
        launcher
    }

    fn file(&self) -> PathBuf {
        self.dir.path().join("shift")
    }
}

impl Default for ClockShift {
    fn default() -> Self {
        Self::new()
    }
}

/// The compiled shim: one file per version of its source, in the temp
/// directory, built by the first test process that needs it and shared by
/// the others (written aside, then renamed into place).
fn shim() -> &'static Path {
    static SHIM: OnceLock<PathBuf> = OnceLock::new();
    SHIM.get_or_init(|| {
        // FNV-1a of the source names its build.
        let hash = SOURCE
            .bytes()
            .fold(0xcbf2_9ce4_8422_2325_u64, |hash, byte| {
                (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
            });
        let library = std::env::temp_dir().join(format!("lock-testkit-clock-shift-{hash:016x}.so"));
        if library.exists() {
            return library;
        }
        let work = tempfile::tempdir().expect("temp dir");
        let (source, built) = (
            work.path().join("clock_shift.c"),
            work.path().join("shim.so"),
        );
        std::fs::write(&source, SOURCE).expect("write clock_shift.c");
        let out = std::process::Command::new("cc")
            .args(["-shared", "-fPIC", "-O2", "-o"])
            .arg(&built)
            .arg(&source)
            .output()
            .unwrap_or_else(|err| {
                panic!("cc did not start ({err}): install a C compiler (apt-get install -y gcc)")
            });
        assert!(
            out.status.success(),
            "cc failed on clock_shift.c: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let mode = std::os::unix::fs::PermissionsExt::from_mode(0o755);
        std::fs::set_permissions(&built, mode).expect("chmod the clock shim");
        // Two processes may build it at once: either's copy will do.
        let staged = library.with_extension(format!("{}.so", std::process::id()));
        std::fs::copy(&built, &staged).expect("copy the clock shim");
        std::fs::rename(&staged, &library).expect("move the clock shim into place");
        library
    })
}
