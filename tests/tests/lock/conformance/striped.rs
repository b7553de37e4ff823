//! The striped lock (`Locker::striped`) on every backend.

use std::collections::BTreeSet;
use std::time::Duration;

use lock_core::LockError;
use lock_testkit::TestStore;

use super::SLACK;

/// With K = 4 and 4 holders every segment is in use at once; a fifth
/// waits, and gets the segment released first; sizes are checked.
pub async fn striped_uses_every_segment_and_hands_on_the_freed_one(store: TestStore) {
    const SEGMENTS: u32 = 4;
    let lockers = [store.locker().await, store.locker().await];
    let mut held = Vec::new();
    for i in 0..SEGMENTS as usize {
        let guard = lockers[i % 2].striped("stock", SEGMENTS).await.unwrap();
        held.push(guard);
    }
    let segments: BTreeSet<_> = held.iter().map(|g| g.segment().unwrap()).collect();
    assert_eq!(
        segments,
        (0..SEGMENTS).collect(),
        "not one holder per segment"
    );
    let tokens: Vec<_> = held.iter().map(|g| g.token()).collect();
    assert!(tokens.windows(2).all(|w| w[0] < w[1]), "{tokens:?}");
    // The plain lock of the key is a lock of its own, without a segment;
    // released here, not dropped (a drop releases in the background, after
    // the check that nothing is left).
    let plain = lockers[0].lock("stock").await.unwrap();
    assert!(plain.segment().is_none());
    plain.release().await.unwrap();

    let (fifth, counts) = store.locker_with(|l| l).await;
    let tried = counts.acquires();
    let waiting = tokio::spawn(async move {
        let request = fifth
            .striped("stock", SEGMENTS)
            .wait(Duration::from_secs(10));
        request.await
    });
    tokio::time::timeout(SLACK * 4, counts.acquires_reach(tried + 1))
        .await
        .expect("the fifth never asked");
    let freed = held.remove(2);
    let freed_segment = freed.segment();
    freed.release().await.unwrap();
    let next = tokio::time::timeout(SLACK * 4, waiting)
        .await
        .expect("the freed segment was not handed on")
        .unwrap()
        .unwrap();
    assert_eq!(next.segment(), freed_segment);
    assert!(next.token() > tokens[3]);

    let err = lockers[0]
        .striped("stock", 8)
        .wait(Duration::ZERO)
        .await
        .unwrap_err();
    assert!(
        matches!(
            &err,
            LockError::SizeDisagrees {
                what: "segments",
                asked: 8,
                stored: 4,
                ..
            }
        ),
        "{err}"
    );
    let before = counts.acquires();
    for bad in [0, 1025] {
        let err = lockers[0].striped("stock", bad).await.unwrap_err();
        assert!(
            matches!(
                err,
                LockError::InvalidConfig {
                    what: "segments",
                    ..
                }
            ),
            "{err}"
        );
    }
    assert_eq!(counts.acquires(), before);
    next.release().await.unwrap();
    for guard in held {
        guard.release().await.unwrap();
    }
    super::store_is_empty(&store).await;
}
