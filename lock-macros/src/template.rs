//! Key templates: `"order:<id>"`, `"user:<req.user.id>"`, `"<self.shard>:x"`.
//! A literal `<` is written `<<`.

/// One piece of a key template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Piece {
    /// Text copied as is.
    Text(String),
    /// A value formatted with `Display`: the first name is an argument (or
    /// `self`), the rest are fields.
    Value(Vec<String>),
}

/// Splits `template` into pieces; the error says what is wrong.
pub(crate) fn parse(template: &str) -> Result<Vec<Piece>, String> {
    if template.is_empty() {
        return Err("the key is empty; name the resource, e.g. key = \"order:<id>\"".into());
    }
    let mut pieces = Vec::new();
    let mut text = String::new();
    let mut rest = template;
    while let Some(open) = rest.find('<') {
        text.push_str(&rest[..open]);
        rest = &rest[open + 1..];
        if let Some(after) = rest.strip_prefix('<') {
            text.push('<');
            rest = after;
            continue;
        }
        let Some(close) = rest.find('>') else {
            return Err(format!(
                "unclosed `<` in key \"{template}\"; close it (`<id>`) or write a literal `<` as `<<`"
            ));
        };
        let path = &rest[..close];
        rest = &rest[close + 1..];
        let names: Vec<String> = path.split('.').map(|s| s.trim().to_owned()).collect();
        // The first name is an argument; fields may also be tuple indices.
        let bad = names.iter().enumerate().find(|(i, n)| {
            !(is_identifier(n) || *i > 0 && !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        });
        if let Some((_, bad)) = bad {
            let shown = if bad.is_empty() { "an empty name" } else { bad };
            return Err(format!(
                "`<{path}>` in key \"{template}\" is not an argument path ({shown}); \
                 write `<name>` or `<name.field>`"
            ));
        }
        if !text.is_empty() {
            pieces.push(Piece::Text(std::mem::take(&mut text)));
        }
        pieces.push(Piece::Value(names));
    }
    text.push_str(rest);
    if !text.is_empty() {
        pieces.push(Piece::Text(text));
    }
    Ok(pieces)
}

fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c == '_' || c.is_alphabetic())
        && chars.all(|c| c == '_' || c.is_alphanumeric())
        && name != "_"
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value(names: &[&str]) -> Piece {
        Piece::Value(names.iter().map(|s| s.to_string()).collect())
    }

    #[test]
    fn pieces() {
        assert_eq!(
            parse("order:<id>").unwrap(),
            vec![Piece::Text("order:".into()), value(&["id"])]
        );
        assert_eq!(
            parse("<self.shard>/<req.user.id>").unwrap(),
            vec![
                value(&["self", "shard"]),
                Piece::Text("/".into()),
                value(&["req", "user", "id"])
            ]
        );
        assert_eq!(parse("a<<b").unwrap(), vec![Piece::Text("a<b".into())]);
        assert_eq!(parse("static").unwrap(), vec![Piece::Text("static".into())]);
        assert_eq!(parse("<pair.0>").unwrap(), vec![value(&["pair", "0"])]);
    }

    #[test]
    fn errors() {
        assert!(parse("").unwrap_err().contains("empty"));
        assert!(parse("order:<id").unwrap_err().contains("unclosed"));
        assert!(parse("order:<>").unwrap_err().contains("empty name"));
        assert!(
            parse("order:<a..b>")
                .unwrap_err()
                .contains("not an argument path")
        );
        assert!(
            parse("order:<1x>")
                .unwrap_err()
                .contains("not an argument path")
        );
    }
}
