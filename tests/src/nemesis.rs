//! The nemesis of the fault campaign: a schedule of faults drawn from a
//! seed, so that a failing run can be replayed step for step.
//!
//! A step waits 100-800 ms, then applies one fault from the store's
//! [`Menu`] and lasts as long as the fault does (the faults do not
//! overlap). Durations are drawn against the lease: a pause lasts between
//! ttl/4 and 3 x ttl.

use std::fmt;
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// One fault and how long it lasts. `client` and `member` number the
/// deployment's client processes and store members from 0; `lasting` is how
/// long the fault holds before it is healed.
#[derive(Debug, Clone, PartialEq, Eq)]
#[allow(missing_docs)]
pub enum Fault {
    /// Nothing, for a stretch.
    Quiet(Duration),
    /// A client process frozen (SIGSTOP), then thawed (SIGCONT).
    PauseClient { client: usize, lasting: Duration },
    /// A client process killed (SIGKILL) and a new one started in its place.
    KillClient { client: usize },
    /// A member of the store frozen, then thawed.
    PauseMember { member: usize, lasting: Duration },
    /// A member of the store killed, and started again after `down` (a
    /// Redis server without persistence comes back empty; a sentinel
    /// comes back with the configuration it rewrote).
    KillMember { member: usize, down: Duration },
    /// Every connection between the clients and the store cut, healed
    /// after `lasting` (the kit's proxy).
    Cut { lasting: Duration },
    /// A member's wall clock stepped by `ms` (negative: back), stepped back
    /// to the true time after `lasting`.
    ClockJump {
        member: usize,
        ms: i64,
        lasting: Duration,
    },
    /// The store's own failover: a replica promoted (Sentinel, Cluster).
    Failover,
    /// An operator's `force_release` of key `k<key>` (every kind on it).
    ForceRelease { key: u64 },
    /// An operator's `inspect` of key `k<key>`.
    Inspect { key: u64 },
}

/// The kinds of fault a store can take, one per [`Fault`] variant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[allow(missing_docs)]
pub enum FaultKind {
    Quiet,
    PauseClient,
    KillClient,
    PauseMember,
    KillMember,
    Cut,
    ClockJump,
    Failover,
    ForceRelease,
    Inspect,
}

/// What a nemesis may do to one deployment.
#[derive(Debug, Clone)]
pub struct Menu {
    /// Client processes.
    pub clients: usize,
    /// Store members that can be paused, killed or have their clock moved.
    pub members: usize,
    /// The faults the deployment supports.
    pub kinds: Vec<FaultKind>,
    /// The clients' lease.
    pub ttl: Duration,
    /// Whether a killed member comes back empty (Redis without
    /// persistence): then no member is killed within 10 s after a clock
    /// step forward is undone, since the tokens minted ahead of the clock
    /// would be forgotten (a limit docs/guarantees.md states: safe, not
    /// live).
    pub restart_forgets: bool,
    /// The keys an operator's steps pick from (`k0`..): 0 for none.
    pub operator_keys: u64,
}

/// A fault after a gap.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    /// The wait before the fault.
    pub gap: Duration,
    /// What happens then.
    pub fault: Fault,
}

impl Fault {
    /// How long the fault keeps the nemesis busy (a kill is instant; a
    /// failover takes what the store takes).
    pub fn lasting(&self) -> Duration {
        match self {
            Fault::Quiet(lasting)
            | Fault::PauseClient { lasting, .. }
            | Fault::PauseMember { lasting, .. }
            | Fault::Cut { lasting }
            | Fault::ClockJump { lasting, .. } => *lasting,
            Fault::KillMember { down, .. } => *down,
            Fault::KillClient { .. }
            | Fault::Failover
            | Fault::ForceRelease { .. }
            | Fault::Inspect { .. } => Duration::ZERO,
        }
    }

    /// The fault's kind.
    pub fn kind(&self) -> FaultKind {
        match self {
            Fault::Quiet(_) => FaultKind::Quiet,
            Fault::PauseClient { .. } => FaultKind::PauseClient,
            Fault::KillClient { .. } => FaultKind::KillClient,
            Fault::PauseMember { .. } => FaultKind::PauseMember,
            Fault::KillMember { .. } => FaultKind::KillMember,
            Fault::Cut { .. } => FaultKind::Cut,
            Fault::ClockJump { .. } => FaultKind::ClockJump,
            Fault::Failover => FaultKind::Failover,
            Fault::ForceRelease { .. } => FaultKind::ForceRelease,
            Fault::Inspect { .. } => FaultKind::Inspect,
        }
    }
}

/// The steps of seed `seed` on `menu`, until they fill `length`. With
/// operator keys, about every other fault follows an operator's step
/// (`force_release` or `inspect` of a key, after a gap of its own), drawn
/// from a stream of their own: a seed's faults are the ones it drew before
/// operator steps existed, and its replays stay replays.
pub fn schedule(seed: u64, menu: &Menu, length: Duration) -> Vec<Step> {
    assert!(!menu.kinds.is_empty(), "a menu needs at least one fault");
    let mut rng = StdRng::seed_from_u64(seed);
    let mut operator = StdRng::seed_from_u64(seed ^ OPERATOR_STREAM);
    let ttl = menu.ttl.as_millis() as u64;
    let mut steps = Vec::new();
    let mut filled = Duration::ZERO;
    // Until when a kill would forget tokens minted ahead of the clock.
    let mut ahead_until = Duration::ZERO;
    while filled < length {
        let gap = Duration::from_millis(rng.random_range(100..=800));
        let mut kind = menu.kinds[rng.random_range(0..menu.kinds.len())];
        if kind == FaultKind::KillMember && menu.restart_forgets && filled + gap < ahead_until {
            kind = FaultKind::Quiet;
        }
        let pause = |rng: &mut StdRng| Duration::from_millis(rng.random_range(ttl / 4..=3 * ttl));
        let fault = match kind {
            FaultKind::Quiet => Fault::Quiet(pause(&mut rng)),
            FaultKind::PauseClient => Fault::PauseClient {
                lasting: pause(&mut rng),
                client: rng.random_range(0..menu.clients),
            },
            FaultKind::KillClient => Fault::KillClient {
                client: rng.random_range(0..menu.clients),
            },
            FaultKind::PauseMember => Fault::PauseMember {
                lasting: pause(&mut rng),
                member: rng.random_range(0..menu.members),
            },
            FaultKind::KillMember => Fault::KillMember {
                down: Duration::from_millis(rng.random_range(0..=ttl)),
                member: rng.random_range(0..menu.members),
            },
            FaultKind::Cut => Fault::Cut {
                lasting: pause(&mut rng),
            },
            FaultKind::ClockJump => {
                let by: i64 = rng.random_range(1_000..=10_000);
                Fault::ClockJump {
                    lasting: pause(&mut rng),
                    member: rng.random_range(0..menu.members),
                    ms: if rng.random_bool(0.5) { by } else { -by },
                }
            }
            FaultKind::Failover => Fault::Failover,
            FaultKind::ForceRelease => Fault::ForceRelease {
                key: rng.random_range(0..menu.operator_keys.max(1)),
            },
            FaultKind::Inspect => Fault::Inspect {
                key: rng.random_range(0..menu.operator_keys.max(1)),
            },
        };
        if menu.operator_keys > 0 && operator.random_bool(0.5) {
            let key = operator.random_range(0..menu.operator_keys);
            let fault = match operator.random_bool(0.5) {
                true => Fault::ForceRelease { key },
                false => Fault::Inspect { key },
            };
            let gap = Duration::from_millis(operator.random_range(100..=800));
            steps.push(Step { gap, fault });
        }
        filled += gap + fault.lasting();
        if let Fault::ClockJump { ms, .. } = fault
            && ms > 0
        {
            ahead_until = filled + Duration::from_secs(10);
        }
        steps.push(Step { gap, fault });
    }
    steps
}

/// Mixed into the seed of the operator's steps.
const OPERATOR_STREAM: u64 = 0x6f70_6572_6174_6f72;

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ms = |d: &Duration| d.as_millis();
        match self {
            Fault::Quiet(lasting) => write!(f, "quiet for {} ms", ms(lasting)),
            Fault::PauseClient { client, lasting } => {
                write!(f, "pause client {client} for {} ms", ms(lasting))
            }
            Fault::KillClient { client } => write!(f, "kill client {client} and start another"),
            Fault::PauseMember { member, lasting } => {
                write!(f, "pause member {member} for {} ms", ms(lasting))
            }
            Fault::KillMember { member, down } => {
                write!(f, "kill member {member}, start it {} ms later", ms(down))
            }
            Fault::Cut { lasting } => write!(f, "cut the clients off for {} ms", ms(lasting)),
            Fault::ClockJump {
                member,
                ms: by,
                lasting,
            } => write!(
                f,
                "step member {member}'s clock by {by:+} ms for {} ms",
                ms(lasting)
            ),
            Fault::Failover => write!(f, "fail over"),
            Fault::ForceRelease { key } => write!(f, "force-release k{key}"),
            Fault::Inspect { key } => write!(f, "inspect k{key}"),
        }
    }
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "after {} ms: {}", self.gap.as_millis(), self.fault)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn menu() -> Menu {
        Menu {
            clients: 4,
            members: 3,
            kinds: vec![
                FaultKind::Quiet,
                FaultKind::PauseClient,
                FaultKind::KillClient,
                FaultKind::PauseMember,
                FaultKind::KillMember,
                FaultKind::ClockJump,
            ],
            ttl: Duration::from_millis(1000),
            restart_forgets: false,
            operator_keys: 0,
        }
    }

    #[test]
    fn a_seed_gives_the_same_steps_and_another_seed_others() {
        let length = Duration::from_secs(20);
        let once = schedule(7, &menu(), length);
        assert_eq!(once, schedule(7, &menu(), length));
        assert_ne!(once, schedule(8, &menu(), length));
        // Within the menu's bounds, and filling the length.
        let total: Duration = once.iter().map(|s| s.gap + s.fault.lasting()).sum();
        assert!(total >= length, "{total:?}");
        for step in &once {
            assert!(
                (100..=800).contains(&(step.gap.as_millis() as u64)),
                "{step}"
            );
            match &step.fault {
                Fault::PauseClient { client, lasting } => {
                    assert!(*client < 4);
                    assert!(
                        (250..=3000).contains(&(lasting.as_millis() as u64)),
                        "{step}"
                    );
                }
                Fault::ClockJump { member, ms, .. } => {
                    assert!(
                        *member < 3 && (1_000..=10_000).contains(&ms.abs()),
                        "{step}"
                    );
                }
                Fault::Cut { .. }
                | Fault::Failover
                | Fault::ForceRelease { .. }
                | Fault::Inspect { .. } => panic!("not on the menu: {step}"),
                _ => {}
            }
        }
    }

    #[test]
    fn operator_steps_come_between_the_same_faults() {
        let length = Duration::from_secs(60);
        let faults = schedule(7, &menu(), length);
        let with = Menu {
            operator_keys: 2,
            ..menu()
        };
        let both = schedule(7, &with, length);
        let (operator, rest): (Vec<Step>, Vec<Step>) = both.into_iter().partition(|step| {
            matches!(
                step.fault,
                Fault::ForceRelease { .. } | Fault::Inspect { .. }
            )
        });
        assert_eq!(rest, faults, "operator steps moved the seed's faults");
        assert!(operator.len() >= faults.len() / 6, "{operator:?}");
        assert!(
            operator
                .iter()
                .any(|s| matches!(s.fault, Fault::ForceRelease { .. }))
        );
        assert!(
            operator
                .iter()
                .any(|s| matches!(s.fault, Fault::Inspect { .. }))
        );
        for step in &operator {
            match step.fault {
                Fault::ForceRelease { key } | Fault::Inspect { key } => assert!(key < 2, "{step}"),
                _ => unreachable!(),
            }
        }
    }
}
