//! Latency samples, one row per workload, and the Markdown table.

use std::time::Duration;

/// Percentiles of a sample, in microseconds.
#[derive(Debug, Clone, Default)]
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

/// One workload's figures; rounds are merged by keeping medians.
#[derive(Debug, Clone, Default)]
pub struct Row {
    pub name: String,
    pub ops_per_sec: f64,
    pub acquire: Percentiles,
    pub release: Percentiles,
    /// Contention only.
    pub wait: Option<Percentiles>,
    /// Min/max acquisitions per task.
    pub spread: Option<f64>,
    /// Share of acquisitions by the task that released just before.
    pub reacquired: Option<f64>,
    /// Release-to-next-holder handoff.
    pub handoff: Option<Percentiles>,
    /// Top-level Redis commands per acquisition.
    pub commands: Option<f64>,
    /// Ratio to the pair limit of the same round, one per round.
    pub ratios: Vec<f64>,
    pub rounds: Vec<Row>,
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(0.0)
}

impl Row {
    pub fn merge(&mut self, other: Row) {
        self.ratios.extend(other.ratios.iter().copied());
        self.rounds.push(other);
    }

    /// The round whose ratio is the median one (figures stay consistent).
    fn representative(&self) -> &Row {
        let target = median(self.ratios.clone());
        std::iter::once(self)
            .chain(self.rounds.iter())
            .min_by(|a, b| {
                let da = (a.ratios.last().copied().unwrap_or(0.0) - target).abs();
                let db = (b.ratios.last().copied().unwrap_or(0.0) - target).abs();
                da.total_cmp(&db)
            })
            .unwrap_or(self)
    }
}

fn opt(value: Option<f64>, digits: usize) -> String {
    value.map_or("-".into(), |v| format!("{v:.digits$}"))
}

fn pct(p: &Percentiles) -> String {
    format!("{:.0} / {:.0} / {:.0}", p.p50, p.p99, p.max)
}

/// The Markdown table.
pub fn table(rows: &[Row], rounds: usize) -> String {
    let mut out = format!(
        "| workload | ops/s | x pair limit (median of {rounds}) | acquire µs p50/p99/max | release µs p50/p99/max | wait µs p50/p99/max | spread min/max | re-acquired by releaser | handoff µs p50/p99/max | commands / acquisition |\n|---|---|---|---|---|---|---|---|---|---|\n"
    );
    for row in rows {
        let r = row.representative();
        out.push_str(&format!(
            "| {} | {:.0} | {:.2} | {} | {} | {} | {} | {} | {} | {} |\n",
            row.name,
            r.ops_per_sec,
            median(row.ratios.clone()),
            pct(&r.acquire),
            pct(&r.release),
            r.wait.as_ref().map_or("-".into(), pct),
            opt(r.spread, 2),
            r.reacquired
                .map_or("-".into(), |v| format!("{:.0} %", v * 100.0)),
            r.handoff.as_ref().map_or("-".into(), pct),
            opt(r.commands, 2),
        ));
    }
    out
}
