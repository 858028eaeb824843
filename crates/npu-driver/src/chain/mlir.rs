//! MLIR's textual form, as far as stitching needs it: top-level items, the `module` op,
//! `func.func` signatures and bodies, and the three kinds of names that must stay unique when
//! several modules become one — SSA values (`%x`), symbols (`@x`) and aliases (`#x`, `!x`).
//!
//! Everything here scans the printed form MLIR tools emit (generic or custom syntax alike):
//! string literals and `//` comments are skipped, brackets are matched. It is not a parser —
//! it does not know operations — so callers check the shape they rely on and report what they
//! found instead.

use std::ops::Range;

/// Whether `c` may continue a bare identifier (`%x`, `@x`, `#x`, `!x`).
pub(crate) fn is_ident(c: u8) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, b'_' | b'$' | b'.' | b'-')
}

/// The byte just past the string literal that starts at `b[at] == '"'`.
pub(crate) fn skip_string(b: &[u8], at: usize) -> usize {
    let mut i = at + 1;
    while i < b.len() {
        match b[i] {
            b'\\' => i += 2,
            b'"' => return i + 1,
            _ => i += 1,
        }
    }
    b.len()
}

/// The byte just past a `//` comment starting at `at` (its newline is not part of it).
fn skip_comment(b: &[u8], at: usize) -> usize {
    (at..b.len()).find(|&i| b[i] == b'\n').unwrap_or(b.len())
}

fn comment_at(b: &[u8], i: usize) -> bool {
    b[i] == b'/' && b.get(i + 1) == Some(&b'/')
}

/// The index of the bracket that closes the one at `open` (`(`, `[` or `{`).
pub(crate) fn matching(text: &str, open: usize) -> Option<usize> {
    let b = text.as_bytes();
    let mut depth = 0usize;
    let mut i = open;
    while i < b.len() {
        match b[i] {
            b'"' => {
                i = skip_string(b, i);
                continue;
            }
            _ if comment_at(b, i) => {
                i = skip_comment(b, i);
                continue;
            }
            b'(' | b'[' | b'{' => depth += 1,
            b')' | b']' | b'}' => {
                depth = depth.checked_sub(1)?;
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

/// Splits at `sep` outside brackets (`<…>` included, the `>` of `->` excepted) and strings;
/// pieces are trimmed, empty ones dropped.
pub(crate) fn split_top_level(text: &str, sep: u8) -> Vec<&str> {
    let b = text.as_bytes();
    let (mut depth, mut start, mut i) = (0i32, 0, 0);
    let mut out = Vec::new();
    fn push<'t>(piece: &'t str, out: &mut Vec<&'t str>) {
        let piece = piece.trim();
        if !piece.is_empty() {
            out.push(piece);
        }
    }
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
                push(&text[start..i], &mut out);
                start = i + 1;
            }
            _ => {}
        }
        i += 1;
    }
    push(&text[start..], &mut out);
    out
}

/// The top-level items of `text`: each runs up to a newline outside brackets and strings.
/// Comment-only lines are dropped; items are trimmed.
pub(crate) fn items(text: &str) -> Vec<&str> {
    let b = text.as_bytes();
    let (mut depth, mut start, mut i) = (0i32, 0, 0);
    let mut out = Vec::new();
    fn push<'t>(piece: &'t str, out: &mut Vec<&'t str>) {
        let piece = piece.trim();
        if !piece.is_empty() && !piece.starts_with("//") {
            out.push(piece);
        }
    }
    while i < b.len() {
        match b[i] {
            b'"' => {
                i = skip_string(b, i);
                continue;
            }
            _ if comment_at(b, i) => {
                i = skip_comment(b, i);
                continue;
            }
            b'(' | b'[' | b'{' => depth += 1,
            b')' | b']' | b'}' => depth -= 1,
            b'\n' if depth <= 0 => {
                push(&text[start..i], &mut out);
                start = i + 1;
            }
            _ => {}
        }
        i += 1;
    }
    push(&text[start..], &mut out);
    out
}

/// A name token found by [`rewrite`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Token<'a> {
    /// `%name` (with the `%`).
    Value(&'a str),
    /// `@name` or `@"name"` (with the `@`).
    Symbol(&'a str),
    /// `#name` or `!name` (with the sigil): an attribute or type alias, or a dialect
    /// attribute/type such as `#air.x` (only defined aliases are ever renamed).
    Alias(&'a str),
}

/// Where a token sits in the text, for scope-aware rewriting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct At {
    pub start: usize,
    pub end: usize,
}

/// Rewrites name tokens outside strings and comments: `f` returns the replacement, or `None`
/// to keep the token.
pub(crate) fn rewrite<'t>(
    text: &'t str,
    mut f: impl FnMut(Token<'t>, At) -> Option<String>,
) -> String {
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len() + text.len() / 8);
    let (mut i, mut copied) = (0, 0);
    while i < b.len() {
        let c = b[i];
        if c == b'"' {
            i = skip_string(b, i);
            continue;
        }
        if comment_at(b, i) {
            i = skip_comment(b, i);
            continue;
        }
        let boundary = i == 0 || !is_ident(b[i - 1]);
        let token_end = |from: usize| {
            (from..b.len())
                .find(|&j| !is_ident(b[j]))
                .unwrap_or(b.len())
        };
        let found = match c {
            b'%' if b.get(i + 1).is_some_and(|&n| is_ident(n)) => {
                let end = token_end(i + 1);
                Some((Token::Value(&text[i..end]), end))
            }
            b'@' if b.get(i + 1) == Some(&b'"') => {
                let end = skip_string(b, i + 1);
                Some((Token::Symbol(&text[i..end]), end))
            }
            b'@' if b.get(i + 1).is_some_and(|&n| is_ident(n)) => {
                let end = token_end(i + 1);
                Some((Token::Symbol(&text[i..end]), end))
            }
            b'#' | b'!'
                if boundary
                    && b.get(i + 1)
                        .is_some_and(|&n| n.is_ascii_alphabetic() || n == b'_') =>
            {
                let end = token_end(i + 1);
                Some((Token::Alias(&text[i..end]), end))
            }
            _ => None,
        };
        match found {
            Some((token, end)) => {
                if let Some(new) = f(token, At { start: i, end }) {
                    out.push_str(&text[copied..i]);
                    out.push_str(&new);
                    copied = end;
                }
                i = end;
            }
            None => i += 1,
        }
    }
    out.push_str(&text[copied..]);
    out
}

/// Every name token of `text`, in order.
pub(crate) fn tokens(text: &str) -> Vec<(Token<'_>, At)> {
    let mut out = Vec::new();
    let _ = rewrite(text, |t, at| {
        out.push((t, at));
        None
    });
    out
}

/// A module's text taken apart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Module<'a> {
    /// Top-level alias definitions (`#map = …`, `!t = …`, `#loc1 = loc(…)`), before or after
    /// the module, in order: `(name with sigil, whole definition)`.
    pub aliases: Vec<(&'a str, &'a str)>,
    /// The module's attribute dictionary, if any (braces included).
    pub attributes: Option<&'a str>,
    /// The operations in the module's body, in order.
    pub ops: Vec<&'a str>,
}

/// Takes a module apart: the `module` op (or an implicit module: a bare list of operations)
/// and the aliases around it.
pub(crate) fn parse_module(text: &str) -> Result<Module<'_>, String> {
    let mut module = Module {
        aliases: Vec::new(),
        attributes: None,
        ops: Vec::new(),
    };
    let mut seen_module = false;
    let mut outside = 0;
    for item in items(text) {
        if let Some(name) = alias_name(item) {
            module.aliases.push((name, item));
        } else if starts_with_word(item, "module") {
            if seen_module {
                return Err("the text holds more than one top-level module".into());
            }
            seen_module = true;
            let (attributes, body) = module_parts(item)?;
            module.attributes = attributes;
            for op in items(body) {
                module.ops.push(op);
            }
        } else if item.starts_with("{-#") {
            return Err(
                "file-level metadata ({-# … #-}, e.g. dense resources) cannot be stitched".into(),
            );
        } else {
            outside += 1;
            module.ops.push(item);
        }
    }
    if seen_module && outside > 0 {
        return Err("the text has operations outside its module".into());
    }
    Ok(module)
}

/// `#name` of an alias definition `#name = …` (or `!name = …`).
fn alias_name(item: &str) -> Option<&str> {
    let b = item.as_bytes();
    if !matches!(b.first(), Some(b'#' | b'!')) {
        return None;
    }
    let end = (1..b.len()).find(|&i| !is_ident(b[i])).unwrap_or(b.len());
    (end > 1 && item[end..].trim_start().starts_with('=')).then(|| &item[..end])
}

pub(crate) fn starts_with_word(text: &str, word: &str) -> bool {
    text.starts_with(word)
        && !text
            .as_bytes()
            .get(word.len())
            .copied()
            .is_some_and(is_ident)
}

/// The attribute dictionary and the body of `module [@name] [attributes {…}] { … } [loc(…)]`.
fn module_parts(item: &str) -> Result<(Option<&str>, &str), String> {
    let b = item.as_bytes();
    let mut i = "module".len();
    let skip_ws = |i: &mut usize| {
        while *i < b.len() && b[*i].is_ascii_whitespace() {
            *i += 1;
        }
    };
    skip_ws(&mut i);
    if b.get(i) == Some(&b'@') {
        i += 1;
        while i < b.len() && (is_ident(b[i]) || b[i] == b'"') {
            i += 1;
        }
        skip_ws(&mut i);
    }
    let mut attributes = None;
    if starts_with_word(&item[i..], "attributes") {
        i += "attributes".len();
        skip_ws(&mut i);
        let close = matching(item, i).ok_or("unbalanced module attributes")?;
        attributes = Some(&item[i..=close]);
        i = close + 1;
        skip_ws(&mut i);
    }
    if b.get(i) != Some(&b'{') {
        return Err("the module has no body".into());
    }
    let close = matching(item, i).ok_or("the module's body is not closed")?;
    Ok((attributes, &item[i + 1..close]))
}

/// One parameter of a `func.func`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Param {
    /// `%arg0`; `None` in a declaration's signature.
    pub value: Option<String>,
    pub ty: String,
}

impl Param {
    pub fn is_buffer(&self) -> bool {
        self.ty.starts_with("memref<")
    }
}

/// A `func.func` operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Func {
    /// Without the `@`.
    pub name: String,
    pub visibility: Option<String>,
    pub params: Vec<Param>,
    /// Whether the signature declares results (`-> …`).
    pub results: bool,
    /// The body, between its braces, as a range of the op's text; `None` for a declaration.
    pub body: Option<Range<usize>>,
}

/// Reads a `func.func` operation (`op` is its whole text); `None` for any other operation.
pub(crate) fn parse_func(op: &str) -> Option<Func> {
    if !starts_with_word(op, "func.func") {
        return None;
    }
    let open = op.find('(')?;
    let head: Vec<&str> = op["func.func".len()..open].split_whitespace().collect();
    let (visibility, name) = match head.as_slice() {
        [name] => (None, *name),
        [vis, name] => (Some((*vis).to_owned()), *name),
        _ => return None,
    };
    let name = name.strip_prefix('@')?.trim_matches('"').to_owned();
    let close = matching(op, open)?;
    let params = split_top_level(&op[open + 1..close], b',')
        .into_iter()
        .map(|p| match p.split_once(':') {
            Some((value, rest)) if value.trim_start().starts_with('%') => Param {
                value: Some(value.trim().to_owned()),
                ty: first_type(rest),
            },
            _ => Param {
                value: None,
                ty: first_type(p),
            },
        })
        .collect();
    // After the signature: `-> results`, `attributes {…}`, then the body's `{` (if any).
    let b = op.as_bytes();
    let mut i = close + 1;
    let mut results = false;
    let mut body = None;
    while i < b.len() {
        match b[i] {
            b'"' => {
                i = skip_string(b, i);
                continue;
            }
            b'-' if b.get(i + 1) == Some(&b'>') => {
                results = true;
                i += 2;
                continue;
            }
            b'(' | b'[' => i = matching(op, i)?,
            b'<' => {
                // A result type's parameters: skip to the matching `>`.
                let mut depth = 0i32;
                while i < b.len() {
                    match b[i] {
                        b'<' => depth += 1,
                        b'>' if b[i - 1] != b'-' => {
                            depth -= 1;
                            if depth == 0 {
                                break;
                            }
                        }
                        _ => {}
                    }
                    i += 1;
                }
            }
            b'{' if op[close + 1..i].trim_end().ends_with("attributes") => i = matching(op, i)?,
            b'{' => {
                let end = matching(op, i)?;
                body = Some(i + 1..end);
                break;
            }
            _ => {}
        }
        i += 1;
    }
    Some(Func {
        name,
        visibility,
        params,
        results,
        body,
    })
}

/// The type at the start of `text` (a parameter's type, before its attributes and location).
fn first_type(text: &str) -> String {
    split_top_level(text, b' ')
        .into_iter()
        .next()
        .unwrap_or_default()
        .to_owned()
}

/// The element type of a memref type: `memref<*xf32>` → `f32`, `memref<4x?xbf16, …>` → `bf16`.
pub(crate) fn element_type(ty: &str) -> Option<&str> {
    let inner = ty.strip_prefix("memref<")?.strip_suffix('>')?;
    let mut shaped = *split_top_level(inner, b',').first()?;
    loop {
        let Some(x) = shaped.find('x') else {
            return Some(shaped);
        };
        let dim = &shaped[..x];
        if dim == "*" || dim == "?" || (!dim.is_empty() && dim.bytes().all(|c| c.is_ascii_digit()))
        {
            shaped = &shaped[x + 1..];
        } else {
            return Some(shaped);
        }
    }
}

/// The text with every ` loc(…)` removed (for comparing operations across modules, whose
/// location aliases differ).
pub(crate) fn without_locations(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = find_word(rest, "loc(") {
        out.push_str(rest[..at].trim_end());
        let open = at + "loc".len();
        let Some(close) = matching(rest, open) else {
            break;
        };
        rest = &rest[close + 1..];
    }
    out.push_str(rest);
    out
}

/// Where `word` (e.g. `air.launch`) occurs as a whole word outside strings and comments.
pub(crate) fn word_positions(text: &str, word: &str) -> Vec<usize> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'"' {
            i = skip_string(b, i);
            continue;
        }
        if comment_at(b, i) {
            i = skip_comment(b, i);
            continue;
        }
        if b[i..].starts_with(word.as_bytes())
            && (i == 0 || !is_ident(b[i - 1]))
            && !b.get(i + word.len()).copied().is_some_and(is_ident)
        {
            out.push(i);
            i += word.len();
            continue;
        }
        i += 1;
    }
    out
}

fn find_word(text: &str, word: &str) -> Option<usize> {
    let b = text.as_bytes();
    let mut from = 0;
    while let Some(at) = text[from..].find(word).map(|a| a + from) {
        if at == 0 || !is_ident(b[at - 1]) {
            return Some(at);
        }
        from = at + word.len();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modules_come_apart_with_their_aliases() {
        let text = "// header\n#map = affine_map<(d0) -> (d0)>\nmodule attributes {a.b = \"}\"} {\n  func.func private @ext(memref<4xf32>) loc(#loc)\n  func.func @k(%arg0: memref<*xf32> {tt.divisibility = 16 : i32} loc(#loc1), %arg1: i32) {\n    return\n  } loc(#loc)\n} loc(#loc)\n#loc = loc(\"x.py\":1:2)\n#loc1 = loc(callsite(#loc at #loc))\n";
        let m = parse_module(text).unwrap();
        let names: Vec<&str> = m.aliases.iter().map(|(n, _)| *n).collect();
        assert_eq!(names, ["#map", "#loc", "#loc1"]);
        assert_eq!(m.attributes, Some("{a.b = \"}\"}"));
        assert_eq!(m.ops.len(), 2);
        let ext = parse_func(m.ops[0]).unwrap();
        assert_eq!(ext.visibility.as_deref(), Some("private"));
        assert_eq!(ext.body, None);
        assert_eq!(
            ext.params,
            [Param {
                value: None,
                ty: "memref<4xf32>".into()
            }]
        );
        let k = parse_func(m.ops[1]).unwrap();
        assert_eq!(k.name, "k");
        assert_eq!(k.params[0].value.as_deref(), Some("%arg0"));
        assert_eq!(k.params[0].ty, "memref<*xf32>");
        assert!(k.params[0].is_buffer() && !k.params[1].is_buffer());
        assert_eq!(m.ops[1][k.body.unwrap()].trim(), "return");
        // An implicit module is a bare list of operations.
        let bare = parse_module("func.func @f() {\n  return\n}\n").unwrap();
        assert_eq!(bare.ops.len(), 1);
        assert!(parse_module("module {\n}\nmodule {\n}\n").is_err());
    }

    #[test]
    fn functions_with_results_and_attributes() {
        let f = parse_func(
            "func.func @f(%a: i32) -> (memref<2xf32, affine_map<(d0) -> (d0)>>) attributes {x = {y}} {\n  return %m : memref<2xf32>\n}",
        )
        .unwrap();
        assert!(f.results);
        assert!(f.body.is_some());
        assert_eq!(parse_func("arith.constant 1 : i32"), None);
    }

    #[test]
    fn tokens_skip_strings_and_comments() {
        let text = "%0:2 = \"x.op\"(%a) {s = \"%b @c #d\"} : () -> (!air.async.token, i32) // %e\n%1 = f %0#1, @g, #map1 loc(#loc)";
        let seen: Vec<Token<'_>> = tokens(text).into_iter().map(|(t, _)| t).collect();
        assert_eq!(
            seen,
            [
                Token::Value("%0"),
                Token::Value("%a"),
                Token::Alias("!air.async.token"),
                Token::Value("%1"),
                Token::Value("%0"),
                Token::Symbol("@g"),
                Token::Alias("#map1"),
                Token::Alias("#loc"),
            ]
        );
        let renamed = rewrite(text, |t, _| match t {
            Token::Value(v) => Some(format!("%p_{}", &v[1..])),
            _ => None,
        });
        assert!(renamed.starts_with("%p_0:2 = \"x.op\"(%p_a) {s = \"%b @c #d\"}"));
        assert!(renamed.ends_with("%p_1 = f %p_0#1, @g, #map1 loc(#loc)"));
    }

    #[test]
    fn element_types_and_locations() {
        assert_eq!(element_type("memref<*xf32>"), Some("f32"));
        assert_eq!(
            element_type("memref<4x?xbf16, strided<[1, 4], offset: ?>>"),
            Some("bf16")
        );
        assert_eq!(element_type("memref<f16>"), Some("f16"));
        assert_eq!(element_type("memref<2xvector<4xi8>>"), Some("vector<4xi8>"));
        assert_eq!(element_type("i32"), None);
        assert_eq!(
            without_locations("func.func private @f(i32 loc(#l)) loc(\"a\":1:2)"),
            "func.func private @f(i32)"
        );
        // Non-ASCII text (locations, comments) is scanned byte-wise without splitting chars.
        let text = "// ü → air.launch\n%x = \"ü\" air.launch loc(\"é.py\":1:1)";
        assert_eq!(
            word_positions(text, "air.launch"),
            [text.rfind("air.launch").unwrap()]
        );
        assert_eq!(
            split_top_level("a, memref<4xf32, strided<[1], offset: ?>>, b", b','),
            ["a", "memref<4xf32, strided<[1], offset: ?>>", "b"]
        );
    }
}
