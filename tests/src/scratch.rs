//! Scratch directories for the servers the kit starts.

use tempfile::TempDir;

/// A fresh directory for one server's data, removed when dropped. It is in
/// memory (`/dev/shm`) where the machine has it: etcd and ZooKeeper sync
/// every write to disk, which on a shared disk makes a lock round trip
/// cost milliseconds for a durability no test looks at (a killed and
/// restarted server still finds its data there).
pub(crate) fn scratch_dir(prefix: &str) -> TempDir {
    let builder = {
        let mut builder = tempfile::Builder::new();
        builder.prefix(prefix);
        builder
    };
    let in_memory = std::path::Path::new("/dev/shm");
    if in_memory.is_dir()
        && let Ok(dir) = builder.tempdir_in(in_memory)
    {
        return dir;
    }
    builder
        .tempdir()
        .unwrap_or_else(|err| panic!("cannot make a directory for {prefix}: {err}"))
}
