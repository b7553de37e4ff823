use super::*;

#[test]
fn long_keys_are_cut_in_messages() {
    let key = "é".repeat(100);
    let shown = LockError::shown(&key);
    assert!(shown.len() < 100, "{shown}");
    assert!(shown.ends_with("(200 bytes)"));
}

#[test]
fn messages_name_the_key() {
    let err = LockError::WaitTimeout {
        key: "order:42".into(),
        waited: Duration::from_secs(5),
        holder_expires_in: None,
    };
    let msg = err.to_string();
    assert!(msg.contains("`order:42`") && msg.contains("5s"), "{msg}");
}

/// Each variant, its cause given as a store would.
fn every_variant() -> Vec<LockError> {
    let key = || "order:42".to_owned();
    let refused = |refusal| StoreError::refused(refusal, "what the store said");
    let from_store = |err| LockError::from_store("order:42", Operation::Acquire, err);
    let token = FencingToken::new(7);
    vec![
        LockError::WaitTimeout {
            key: key(),
            waited: Duration::from_secs(5),
            holder_expires_in: None,
        },
        LockError::Lost {
            key: key(),
            token,
            reason: LossReason::OwnerChanged,
        },
        from_store(StoreError::in_doubt("broken pipe")),
        from_store(StoreError::not_applied("connection refused")),
        from_store(StoreError::timed_out(Duration::from_secs(2))),
        from_store(StoreError::permanent("WRONGTYPE")),
        from_store(refused(Refusal::InvalidUrl)),
        from_store(refused(Refusal::UnsupportedScheme("rediss".into()))),
        from_store(refused(Refusal::AuthenticationFailed)),
        from_store(refused(Refusal::PasswordRequired)),
        from_store(refused(Refusal::PermissionDenied)),
        LockError::InvalidKey {
            key: key(),
            reason: "longer than 512 bytes".into(),
        },
        LockError::StaleToken {
            resource: "balance:7".into(),
            token,
            newest: FencingToken::new(9),
        },
        LockError::ReplicasNotConfirmed {
            key: key(),
            wanted: 2,
            confirmed: 1,
        },
        LockError::TooManyWaiters {
            key: key(),
            limit: 100,
        },
        LockError::NotInstalled { key: key() },
        LockError::SizeDisagrees {
            key: key(),
            what: "permits",
            asked: 4,
            stored: 3,
        },
        LockError::UnknownFormat {
            key: key(),
            stored: 2,
            ours: 1,
        },
        LockError::Unsupported {
            key: key(),
            kind: crate::kind::LockKind::Fair,
            store: "memory".into(),
        },
        LockError::invalid_config("ttl", "10ms is shorter than the minimum of 30ms"),
    ]
}

#[test]
fn no_text_repeats_along_an_error_chain() {
    use std::error::Error as _;
    for err in every_variant() {
        let mut chain = vec![err.to_string()];
        let mut source = err.source();
        while let Some(cause) = source {
            chain.push(cause.to_string());
            source = cause.source();
        }
        for (i, text) in chain.iter().enumerate() {
            assert!(!text.contains("REDIS_URL"), "{text}");
            // Ours (the error and its StoreError) start in lowercase;
            // what the store said is quoted as it came.
            let first = text.chars().next().unwrap();
            assert!(i >= 2 || !first.is_uppercase(), "not lowercase: {text}");
            for later in &chain[i + 1..] {
                assert!(
                    !text.contains(later.as_str()) && !later.contains(text.as_str()),
                    "{text:?} and {later:?} repeat each other"
                );
            }
        }
    }
}
