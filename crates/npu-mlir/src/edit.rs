//! Token-level edits of MLIR text: renaming names and dropping locations, never touching what
//! is inside strings or comments. Chain stitching builds one module out of several with them.

use std::ops::Range;

use crate::error::ParseError;
use crate::lex::{self, Bracket, Kind};

/// A name token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Name<'t> {
    /// `%name` (with the `%`).
    Value(&'t str),
    /// `@name` or `@"name"` (with the `@`).
    Symbol(&'t str),
    /// `#name` or `!name` (with the sigil): an attribute or type alias, or a dialect
    /// attribute or type such as `#air.x`.
    Alias(&'t str),
}

/// Every name token of `text`, in order, with its byte range.
pub fn names(text: &str) -> Result<Vec<(Name<'_>, Range<usize>)>, ParseError> {
    Ok(lex::tokenize(text)?
        .into_iter()
        .filter_map(|t| {
            let s = t.text(text);
            let name = match t.kind {
                Kind::Value => Name::Value(s),
                Kind::Symbol => Name::Symbol(s),
                Kind::Alias => Name::Alias(s),
                _ => return None,
            };
            Some((name, t.start..t.end))
        })
        .collect())
}

/// `text` with name tokens replaced: `f` returns the replacement, or `None` to keep one.
pub fn rename<'t>(
    text: &'t str,
    mut f: impl FnMut(Name<'t>, Range<usize>) -> Option<String>,
) -> Result<String, ParseError> {
    let mut out = String::with_capacity(text.len() + text.len() / 8);
    let mut copied = 0;
    for (name, range) in names(text)? {
        if let Some(new) = f(name, range.clone()) {
            out.push_str(&text[copied..range.start]);
            out.push_str(&new);
            copied = range.end;
        }
    }
    out.push_str(&text[copied..]);
    Ok(out)
}

/// `text` without its `loc(…)` locations (and the blanks before each), e.g. to compare ops
/// of modules whose location aliases differ.
pub fn strip_locations(text: &str) -> Result<String, ParseError> {
    let tokens = lex::tokenize(text)?;
    let mut out = String::with_capacity(text.len());
    let mut copied = 0;
    let mut i = 0;
    while i < tokens.len() {
        let t = tokens[i];
        let opens_group = tokens
            .get(i + 1)
            .is_some_and(|n| n.kind == Kind::Open(Bracket::Paren));
        if t.kind == Kind::Ident && t.text(text) == "loc" && opens_group && t.start >= copied {
            out.push_str(text[copied..t.start].trim_end());
            let close = tokens[i + 1].partner;
            copied = tokens[close].end;
            i = close + 1;
            continue;
        }
        i += 1;
    }
    out.push_str(&text[copied..]);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_skip_strings_and_comments() {
        let text = "%0:2 = \"x.op\"(%a) {s = \"%b @c #d\"} : () -> (!air.async.token, i32) // %e\n%1 = f %0#1, @g, #map1 loc(#loc)";
        let seen: Vec<Name<'_>> = names(text).unwrap().into_iter().map(|(n, _)| n).collect();
        assert_eq!(
            seen,
            [
                Name::Value("%0"),
                Name::Value("%a"),
                Name::Alias("!air.async.token"),
                Name::Value("%1"),
                Name::Value("%0"),
                Name::Symbol("@g"),
                Name::Alias("#map1"),
                Name::Alias("#loc"),
            ]
        );
        let renamed = rename(text, |n, _| match n {
            Name::Value(v) => Some(format!("%p_{}", &v[1..])),
            _ => None,
        })
        .unwrap();
        assert!(renamed.starts_with("%p_0:2 = \"x.op\"(%p_a) {s = \"%b @c #d\"}"));
        assert!(renamed.ends_with("%p_1 = f %p_0#1, @g, #map1 loc(#loc)"));
    }

    #[test]
    fn locations_go_strings_stay() {
        assert_eq!(
            strip_locations("func.func private @f(i32 loc(#l)) loc(\"a\":1:2)").unwrap(),
            "func.func private @f(i32)"
        );
        assert_eq!(
            strip_locations("x loc(\"p ) -> \\\" q\"(#loc1)) \"loc(1)\" loc(fused[#a, #b])")
                .unwrap(),
            "x \"loc(1)\""
        );
        assert!(strip_locations("loc(").is_err());
    }
}
