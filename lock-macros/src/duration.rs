//! Durations written as `"500ms"`, `"30s"`, `"2m"`, `"1h"`.

use std::time::Duration;

/// Parses one duration literal; the error says what is wrong and what to
/// write instead.
pub(crate) fn parse(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    if let Some(rest) = text.strip_prefix('-') {
        return Err(format!(
            "`{text}` is negative; durations are positive, e.g. `\"{rest}\"`"
        ));
    }
    let digits = text.bytes().take_while(u8::is_ascii_digit).count();
    let (number, unit) = text.split_at(digits);
    if number.is_empty() {
        return Err(format!(
            "`{text}` is not a duration; write a whole number and a unit: \"500ms\", \"30s\", \"2m\", \"1h\""
        ));
    }
    let number: u64 = number
        .parse()
        .map_err(|_| format!("`{text}` is too large"))?;
    let millis_per_unit: u64 = match unit {
        "ms" => 1,
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        "" => {
            return Err(format!(
                "`{text}` has no unit; write e.g. \"{number}s\" or \"{number}ms\""
            ));
        }
        other => {
            return Err(format!(
                "unknown unit `{other}` in `{text}`; use ms, s, m or h"
            ));
        }
    };
    number
        .checked_mul(millis_per_unit)
        .map(Duration::from_millis)
        .ok_or_else(|| format!("`{text}` is too large"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units() {
        assert_eq!(parse("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse("0s"), Ok(Duration::ZERO));
    }

    #[test]
    fn errors_say_what_to_write() {
        assert!(parse("30").unwrap_err().contains("no unit"));
        assert!(parse("3x").unwrap_err().contains("unknown unit `x`"));
        assert!(parse("-1s").unwrap_err().contains("negative"));
        assert!(parse("s").unwrap_err().contains("not a duration"));
        assert!(
            parse("99999999999999999999s")
                .unwrap_err()
                .contains("too large")
        );
    }
}
