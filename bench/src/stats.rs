//! Latency samples, one row per workload and subject, and the Markdown
//! table.

use std::time::Duration;

use crate::cpu::CpuPerOp;

/// Percentiles of a sample, in microseconds.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct Percentiles {
    pub p50: f64,
    pub p99: f64,
    pub max: f64,
}

impl Percentiles {
    pub fn of(samples: &mut [Duration]) -> Self {
        if samples.is_empty() {
            return Percentiles::default();
        }
        samples.sort_unstable();
        let at =
            |q: f64| samples[((samples.len() - 1) as f64 * q).round() as usize].as_secs_f64() * 1e6;
        Percentiles {
            p50: at(0.5),
            p99: at(0.99),
            max: at(1.0),
        }
    }
}

/// One workload's figures for one subject; rounds are merged by keeping
/// the round with the median ratio, plus every round's ratios.
#[derive(Debug, Clone, Default)]
pub struct Row {
    pub workload: String,
    pub subject: String,
    pub ops_per_sec: f64,
    /// Acquisitions (L: requests) in this round.
    pub acquisitions: u64,
    /// CPU per acquisition, of this process (without child processes) and
    /// of the Redis server.
    pub cpu: CpuPerOp,
    /// Acquire latency (for L: request latency).
    pub acquire: Percentiles,
    pub release: Option<Percentiles>,
    /// Contention only: time from asking to holding.
    pub wait: Option<Percentiles>,
    /// Min/max acquisitions per task.
    pub spread: Option<f64>,
    /// Share of acquisitions by the task that released just before.
    pub reacquired: Option<f64>,
    /// Release-to-next-holder handoff.
    pub handoff: Option<Percentiles>,
    /// Top-level Redis commands per acquisition.
    pub commands: Option<f64>,
    /// Ratio of ops/s to the pair limit measured next to it, per round.
    pub vs_reference: Vec<f64>,
    /// Ratio of ops/s to the peer (rslock; for L the bare route), per round.
    pub vs_peer: Vec<f64>,
    /// L on Redis: added request latency in reference round trips, per round.
    pub round_trips: Vec<f64>,
    pub rounds: Vec<Row>,
}

pub fn median(values: &[f64]) -> Option<f64> {
    let mut values = values.to_vec();
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied()
}

impl Row {
    pub fn new(workload: &str, subject: &str) -> Row {
        Row {
            workload: workload.to_owned(),
            subject: subject.to_owned(),
            ..Row::default()
        }
    }

    /// Adds another round of the same workload and subject.
    pub fn merge(&mut self, other: Row) {
        self.vs_reference.extend(other.vs_reference.iter().copied());
        self.vs_peer.extend(other.vs_peer.iter().copied());
        self.round_trips.extend(other.round_trips.iter().copied());
        self.rounds.push(other);
    }

    /// Every round, this one included.
    fn all_rounds(&self) -> impl Iterator<Item = &Row> {
        std::iter::once(self).chain(self.rounds.iter())
    }

    /// The round with the median ops/s (its figures stay consistent).
    pub fn representative(&self) -> &Row {
        let ops: Vec<f64> = self.all_rounds().map(|r| r.ops_per_sec).collect();
        let target = median(&ops).unwrap_or(0.0);
        self.all_rounds()
            .min_by(|a, b| {
                (a.ops_per_sec - target)
                    .abs()
                    .total_cmp(&(b.ops_per_sec - target).abs())
            })
            .unwrap_or(self)
    }
}

fn opt(value: Option<f64>, digits: usize) -> String {
    value.map_or("-".into(), |v| format!("{v:.digits$}"))
}

fn pct(p: &Percentiles) -> String {
    let short = |us: f64| {
        if us >= 10_000.0 {
            format!("{:.0}k", us / 1000.0)
        } else {
            format!("{us:.0}")
        }
    };
    format!("{} / {} / {}", short(p.p50), short(p.p99), short(p.max))
}

/// The Markdown table.
pub fn table(rows: &[Row]) -> String {
    let mut out = String::from(
        "| workload | subject | ops/s | × pair limit | × peer | acquire µs p50/p99/max | release µs p50/p99/max | wait µs p50/p99/max | spread min/max | re-acquired by releaser | handoff µs p50/p99/max | commands / acquisition | CPU µs / acquisition: client, Redis |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for row in rows {
        let r = row.representative();
        let peer = match (median(&row.vs_peer), median(&row.round_trips)) {
            (Some(ratio), Some(trips)) => format!("{ratio:.2} ({trips:.2} round trips added)"),
            (Some(ratio), None) => format!("{ratio:.2}"),
            _ => "-".into(),
        };
        out.push_str(&format!(
            "| {} | {} | {:.0} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {}, {} |\n",
            row.workload,
            row.subject,
            r.ops_per_sec,
            opt(median(&row.vs_reference), 2),
            peer,
            pct(&r.acquire),
            r.release.as_ref().map_or("-".into(), pct),
            r.wait.as_ref().map_or("-".into(), pct),
            opt(r.spread, 2),
            r.reacquired
                .map_or("-".into(), |v| format!("{:.0} %", v * 100.0)),
            r.handoff.as_ref().map_or("-".into(), pct),
            opt(r.commands, 2),
            opt(r.cpu.client, 1),
            opt(r.cpu.server, 1),
        ));
    }
    out
}
