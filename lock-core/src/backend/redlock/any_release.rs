//! One release signal over the signals of every master.

use std::sync::Arc;

use tokio::sync::watch;
use tokio::task::AbortHandle;

use crate::backend::ReleaseSignal;

/// One signal that fires when any of `signals` does, and closes once all
/// have closed.
pub(super) fn any_of(signals: Vec<ReleaseSignal>) -> ReleaseSignal {
    let (releases, heard) = watch::channel(0_u64);
    let releases = Arc::new(releases);
    let forwarders = signals
        .into_iter()
        .map(|mut signal| {
            let releases = Arc::clone(&releases);
            tokio::spawn(async move {
                while signal.released().await {
                    releases.send_modify(|n| *n = n.wrapping_add(1));
                }
            })
            .abort_handle()
        })
        .collect();
    ReleaseSignal::new(heard, Forwarders(forwarders))
}

/// Stops forwarding the combined signal's releases when it is dropped.
struct Forwarders(Vec<AbortHandle>);

impl Drop for Forwarders {
    fn drop(&mut self) {
        for forwarder in &self.0 {
            forwarder.abort();
        }
    }
}
