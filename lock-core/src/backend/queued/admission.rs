//! Who holds in a queue of entries (etcd, ZooKeeper): the one rule that an
//! acquire and an inspection both apply to the entries of a key's kind, in
//! the order they were created.

use crate::kind::LockKind;

/// Whether an entry of `kind` holds behind `ahead`, the kinds of the
/// entries created before it in its kind's queue: a reader when no writer
/// is ahead; one of `of` permits when fewer than `of` entries are ahead;
/// every other kind (plain, fair, write, a segment's queue) at the front.
pub(crate) fn holds(kind: LockKind, ahead: impl IntoIterator<Item = LockKind>) -> bool {
    let mut ahead = ahead.into_iter();
    match kind {
        LockKind::Read => !ahead.any(|kind| kind == LockKind::Write),
        LockKind::Permit { of } => ahead.count() < of as usize,
        _ => ahead.next().is_none(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KINDS: [LockKind; 6] = [
        LockKind::Exclusive,
        LockKind::Fair,
        LockKind::Read,
        LockKind::Write,
        LockKind::Permit { of: 2 },
        LockKind::Segment { of: 2 },
    ];

    #[test]
    fn the_head_of_every_queue_holds() {
        for kind in KINDS {
            assert!(holds(kind, []), "{kind:?} at the front");
        }
    }

    #[test]
    fn behind_one_entry_only_readers_of_readers_and_permits_hold() {
        for kind in KINDS {
            for ahead in KINDS {
                let expected = match (kind, ahead) {
                    (LockKind::Read, LockKind::Write) => false,
                    (LockKind::Read, _) => true,
                    (LockKind::Permit { .. }, _) => true,
                    _ => false,
                };
                assert_eq!(holds(kind, [ahead]), expected, "{kind:?} behind {ahead:?}");
            }
        }
    }

    #[test]
    fn a_writer_anywhere_ahead_keeps_a_reader_waiting() {
        let ahead = [
            LockKind::Read,
            LockKind::Read,
            LockKind::Write,
            LockKind::Read,
        ];
        assert!(!holds(LockKind::Read, ahead));
        assert!(holds(LockKind::Read, [LockKind::Read; 5]));
    }

    #[test]
    fn permits_hold_while_fewer_than_their_number_are_ahead() {
        let permit = LockKind::Permit { of: 3 };
        assert!(holds(permit, [permit; 2]));
        assert!(!holds(permit, [permit; 3]));
    }
}
