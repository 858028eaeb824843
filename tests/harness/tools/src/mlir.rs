//! Just enough MLIR text handling for the stand-ins: matching brackets, top-level splitting,
//! SSA value tokens and function signatures. String literals are skipped everywhere, so the
//! `npu_harness.*` attributes never confuse a scan.

use std::collections::HashMap;

/// Whether `c` may continue an SSA value or symbol name.
pub fn is_ident(c: u8) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, b'_' | b'$' | b'.' | b'-')
}

/// The byte just past the string literal that starts at `text[at] == '"'`.
pub fn skip_string(text: &[u8], at: usize) -> usize {
    let mut i = at + 1;
    while i < text.len() {
        match text[i] {
            b'\\' => i += 2,
            b'"' => return i + 1,
            _ => i += 1,
        }
    }
    text.len()
}

/// The index of the bracket closing the one at `open` (`(`, `[` or `{`).
pub fn matching(text: &str, open: usize) -> Option<usize> {
    let b = text.as_bytes();
    let mut depth = 0usize;
    let mut i = open;
    while i < b.len() {
        match b[i] {
            b'"' => {
                i = skip_string(b, i);
                continue;
            }
            b'(' | b'[' | b'{' => depth += 1,
            b')' | b']' | b'}' => {
                depth -= 1;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => {}
        }
        i += 1;
    }
    None
}

/// Splits at `sep` outside brackets (including `<…>`, ignoring the `>` of `->`) and strings.
pub fn split_top_level(text: &str, sep: u8) -> Vec<&str> {
    let b = text.as_bytes();
    let (mut depth, mut start, mut i) = (0i32, 0, 0);
    let mut out = Vec::new();
    while i < b.len() {
        match b[i] {
            b'"' => {
                i = skip_string(b, i);
                continue;
            }
            b'-' if b.get(i + 1) == Some(&b'>') => i += 1,
            b'(' | b'[' | b'{' | b'<' => depth += 1,
            b')' | b']' | b'}' | b'>' => depth -= 1,
            c if c == sep && depth == 0 => {
                out.push(text[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
        i += 1;
    }
    if !text[start..].trim().is_empty() {
        out.push(text[start..].trim());
    }
    out
}

/// Replaces whole `%name` tokens (outside strings) by their entry in `map`.
pub fn rename_values(text: &str, map: &HashMap<String, String>) -> String {
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let (mut i, mut copied) = (0, 0);
    while i < b.len() {
        match b[i] {
            b'"' => i = skip_string(b, i),
            b'%' => {
                let end = (i + 1..b.len())
                    .find(|&j| !is_ident(b[j]))
                    .unwrap_or(b.len());
                if let Some(new) = map.get(&text[i..end]) {
                    out.push_str(&text[copied..i]);
                    out.push_str(new);
                    copied = end;
                }
                i = end;
            }
            _ => i += 1,
        }
    }
    out.push_str(&text[copied..]);
    out
}

/// Whether the `%name` token occurs in `text` (outside strings).
pub fn uses_value(text: &str, name: &str) -> bool {
    let mut map = HashMap::new();
    map.insert(name.to_owned(), String::new());
    rename_values(text, &map).len() != text.len()
}

/// A `func.func` with a body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Func {
    pub name: String,
    /// `(value, type)` per parameter, attributes and locations dropped.
    pub params: Vec<(String, String)>,
    /// Byte range of the body, between the braces.
    pub body: std::ops::Range<usize>,
    /// Byte range of the whole operation, up to its closing brace.
    pub op: std::ops::Range<usize>,
}

/// The `func.func` definitions (with a body) of `module`, in order.
pub fn functions(module: &str) -> Vec<Func> {
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(at) = module[from..].find("func.func").map(|a| a + from) {
        from = at + "func.func".len();
        let Some(open) = module[from..].find('(').map(|o| o + from) else {
            break;
        };
        let Some(name_at) = module[from..open].find('@').map(|a| a + from) else {
            continue;
        };
        let name = module[name_at + 1..open].trim().to_owned();
        let Some(close) = matching(module, open) else {
            break;
        };
        let params = split_top_level(&module[open + 1..close], b',')
            .into_iter()
            .filter_map(|p| {
                let (value, rest) = p.split_once(':')?;
                let ty = split_top_level(rest, b' ')
                    .into_iter()
                    .find(|t| !t.is_empty())
                    .unwrap_or_default()
                    .to_owned();
                Some((value.trim().to_owned(), ty))
            })
            .collect();
        // The body is the first `{` after the signature that is not an attribute dictionary.
        let mut i = close + 1;
        let header_end = module[i..].find('\n').map_or(module.len(), |n| n + i);
        let mut body_open = None;
        while i < header_end {
            let rest = &module[i..header_end];
            if rest.starts_with("attributes") {
                let Some(o) = rest.find('{') else { break };
                i = matching(module, i + o).map_or(header_end, |c| c + 1);
                continue;
            }
            if rest.starts_with('{') {
                body_open = Some(i);
                break;
            }
            i += rest.chars().next().map_or(1, char::len_utf8);
        }
        let Some(body_open) = body_open else {
            from = close;
            continue;
        };
        let Some(body_close) = matching(module, body_open) else {
            break;
        };
        let start = module[..at].rfind('\n').map_or(0, |n| n + 1);
        out.push(Func {
            name,
            params,
            body: body_open + 1..body_close,
            op: start..body_close + 1,
        });
        from = body_close;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_signatures_and_finds_bodies() {
        let m = "module {\n  func.func private @ext(memref<4xf32>)\n  func.func @k(%arg0: memref<*xf32> {tt.divisibility = 16 : i32}, %arg1: memref<4xf32, strided<[1], offset: ?>>, %arg2: i32) attributes {a = \"{\"} {\n    return\n  }\n}\n";
        let f = functions(m);
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].name, "k");
        assert_eq!(
            f[0].params,
            [
                ("%arg0".into(), "memref<*xf32>".into()),
                (
                    "%arg1".into(),
                    "memref<4xf32, strided<[1], offset: ?>>".into()
                ),
                ("%arg2".into(), "i32".into())
            ]
        );
        assert_eq!(m[f[0].body.clone()].trim(), "return");
    }

    #[test]
    fn renames_whole_tokens_outside_strings() {
        let map = HashMap::from([("%arg1".to_owned(), "%x".to_owned())]);
        assert_eq!(
            rename_values("%arg1 %arg10 \"%arg1\" %arg1,", &map),
            "%x %arg10 \"%arg1\" %x,"
        );
        assert!(uses_value("f(%arg1)", "%arg1") && !uses_value("f(%arg12)", "%arg1"));
    }
}
