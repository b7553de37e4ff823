//! The PNG chart README.md shows: acquisitions/s per workload and subject
//! (log scale), and the p99 wait under contention.

use std::error::Error;
use std::path::Path;

use plotters::prelude::*;
use plotters::style::FontStyle;

use crate::stats::Row;

/// The font the chart is drawn with (Debian's fonts-dejavu-core).
const FONT: &str = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf";

/// Workloads on the throughput panel, and on the wait panel.
const THROUGHPUT: [&str; 5] = ["U1", "U16", "C8", "C8p", "W1000"];
const WAIT: [&str; 3] = ["C8", "C8p", "W1000"];

/// Subjects and their colours.
const SUBJECTS: [(&str, RGBColor); 4] = [
    ("SET + EVALSHA pair", RGBColor(160, 160, 160)),
    ("lock-core redis", RGBColor(31, 119, 180)),
    ("rslock", RGBColor(214, 39, 40)),
    ("lock-core memory", RGBColor(44, 160, 44)),
];

/// Draws the chart to `path`.
pub fn draw(rows: &[Row], path: &Path) -> Result<(), Box<dyn Error>> {
    let font = std::fs::read(FONT)
        .map_err(|err| format!("{FONT}: {err} (apt-get install fonts-dejavu-core)"))?;
    plotters::style::register_font(
        "sans-serif",
        FontStyle::Normal,
        Box::leak(font.into_boxed_slice()),
    )
    .map_err(|_| format!("{FONT} is not a usable font"))?;
    let root = BitMapBackend::new(path, (1400, 520)).into_drawing_area();
    root.fill(&WHITE)?;
    let (left, right) = root.split_horizontally(820);
    panel(
        &left,
        rows,
        &THROUGHPUT,
        "acquisitions/s (log scale, higher is better)",
        true,
        |r: &Row| Some(r.ops_per_sec),
    )?;
    panel(
        &right,
        rows,
        &WAIT,
        "wait p99 under contention, ms (log scale, lower is better)",
        false,
        |r: &Row| r.wait.as_ref().map(|w| w.p99 / 1000.0),
    )?;
    root.present()?;
    Ok(())
}

/// One panel of grouped bars, one group per workload.
fn panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    rows: &[Row],
    workloads: &[&str],
    caption: &str,
    legend: bool,
    value: impl Fn(&Row) -> Option<f64>,
) -> Result<(), Box<dyn Error>>
where
    DB::ErrorType: 'static,
{
    let bars: Vec<(usize, usize, f64)> = workloads
        .iter()
        .enumerate()
        .flat_map(|(w, workload)| {
            SUBJECTS.iter().enumerate().filter_map({
                let value = &value;
                move |(s, (subject, _))| {
                    // The pair limit is U1's reference.
                    let wanted = match (*workload, s) {
                        ("U1", 0) => "reference",
                        _ => workload,
                    };
                    let row = rows
                        .iter()
                        .find(|r| r.workload == wanted && r.subject == *subject)?;
                    value(row.representative()).map(|v| (w, s, v))
                }
            })
        })
        .filter(|(_, _, v)| *v > 0.0)
        .collect();
    let max = bars.iter().map(|b| b.2).fold(1.0, f64::max) * 2.0;
    let min = bars.iter().map(|b| b.2).fold(f64::MAX, f64::min).min(max) / 2.0;
    let mut chart = ChartBuilder::on(area)
        .caption(caption, ("sans-serif", 20))
        .margin(15)
        .x_label_area_size(35)
        .y_label_area_size(70)
        // Group i is centred on x = i, where its label goes.
        .build_cartesian_2d(
            -0.5f64..workloads.len() as f64 - 0.5,
            (min..max).log_scale(),
        )?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(workloads.len())
        .x_label_formatter(&|x| {
            let index = x.round();
            if (x - index).abs() < 1e-6 && index >= 0.0 && (index as usize) < workloads.len() {
                workloads[index as usize].to_owned()
            } else {
                String::new()
            }
        })
        .y_label_formatter(&|y| {
            format!("{y:.3}")
                .trim_end_matches('0')
                .trim_end_matches('.')
                .to_owned()
        })
        .label_style(("sans-serif", 15))
        .draw()?;
    let width = 0.8 / SUBJECTS.len() as f64;
    for (s, (subject, colour)) in SUBJECTS.iter().enumerate() {
        let mine: Vec<_> = bars.iter().filter(|b| b.1 == s).collect();
        chart
            .draw_series(mine.iter().map(|(w, _, v)| {
                let x0 = *w as f64 - 0.4 + width * s as f64;
                Rectangle::new([(x0, min), (x0 + width * 0.9, *v)], colour.filled())
            }))?
            .label(*subject)
            .legend(move |(x, y)| Rectangle::new([(x, y - 6), (x + 12, y + 6)], colour.filled()));
    }
    if !legend {
        return Ok(());
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperMiddle)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .label_font(("sans-serif", 14))
        .draw()?;
    Ok(())
}
