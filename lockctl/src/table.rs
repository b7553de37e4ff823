//! A text table cut to fit a width (80 columns): the shape of `show`'s and
//! `watch`'s output for people.

/// Narrowest a cut column gets.
const MIN_CUT: usize = 8;

/// Columns of text under headers, two spaces apart.
#[derive(Debug)]
pub struct Table {
    headers: Vec<&'static str>,
    rows: Vec<Vec<String>>,
    /// The columns that may be cut (with `…`) to fit: keys and processes,
    /// not tokens.
    cuttable: Vec<usize>,
}

impl Table {
    /// A table with `headers`, of which the columns at `cuttable` may be
    /// cut to fit.
    pub fn new(headers: &[&'static str], cuttable: &[usize]) -> Self {
        Table {
            headers: headers.to_vec(),
            rows: Vec::new(),
            cuttable: cuttable.to_vec(),
        }
    }

    /// Adds a row (missing cells are blank).
    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// The table in at most `width` columns per line: the cuttable columns
    /// cut first (to no less than 8), then, if that is not enough, the lines.
    pub fn render(&self, width: usize) -> String {
        let n = self.headers.len();
        let mut widths: Vec<usize> = self.headers.iter().map(|h| h.chars().count()).collect();
        for row in &self.rows {
            for (at, cell) in row.iter().enumerate().take(n) {
                widths[at] = widths[at].max(cell.chars().count());
            }
        }
        // The last column is not padded: only its own cells count.
        let total = |widths: &[usize]| widths.iter().sum::<usize>() + 2 * (n - 1);
        while total(&widths) > width {
            let widest = self
                .cuttable
                .iter()
                .copied()
                .filter(|&at| widths[at] > MIN_CUT)
                .max_by_key(|&at| widths[at]);
            let Some(at) = widest else { break };
            let excess = total(&widths) - width;
            widths[at] = (widths[at] - excess.min(widths[at] - MIN_CUT)).max(MIN_CUT);
        }
        let mut out = String::new();
        let headers: Vec<String> = self.headers.iter().map(|h| h.to_string()).collect();
        for row in std::iter::once(&headers).chain(&self.rows) {
            let mut line = String::new();
            for (at, width) in widths.iter().enumerate() {
                let cell = row.get(at).map_or("", String::as_str);
                let cell = cut(cell, *width);
                line.push_str(&cell);
                if at + 1 < n {
                    let pad = width - cell.chars().count();
                    line.extend(std::iter::repeat_n(' ', pad + 2));
                }
            }
            out.push_str(&cut(line.trim_end(), width));
            out.push('\n');
        }
        out
    }
}

/// `text` in at most `width` characters: cut with `…` at the end.
pub fn cut(text: &str, width: usize) -> String {
    if text.chars().count() <= width {
        return text.to_owned();
    }
    let mut kept: String = text.chars().take(width.saturating_sub(1)).collect();
    kept.push('…');
    kept
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wide_table_is_cut_to_fit() {
        let mut table = Table::new(&["KEY", "TOKEN", "PROCESS"], &[0, 2]);
        let long = "x".repeat(60);
        table.row(vec![long.clone(), "1764300000123456".into(), long]);
        let shown = table.render(80);
        for line in shown.lines() {
            assert!(line.chars().count() <= 80, "{line}");
        }
        assert!(shown.contains("1764300000123456"), "tokens are cut last");
        assert!(shown.contains('…'), "{shown}");
    }

    #[test]
    fn a_table_too_wide_for_its_cuttable_columns_is_cut_by_the_line() {
        let mut table = Table::new(&["KEY", "A", "B"], &[0]);
        table.row(vec!["order:1".into(), "x".repeat(50), "y".repeat(50)]);
        for line in table.render(80).lines() {
            assert!(line.chars().count() <= 80, "{line}");
        }
    }

    #[test]
    fn a_narrow_table_is_left_as_it_is() {
        let mut table = Table::new(&["KEY", "TOKEN"], &[0]);
        table.row(vec!["order:42".into(), "7".into()]);
        assert_eq!(table.render(80), "KEY       TOKEN\norder:42  7\n");
    }
}
