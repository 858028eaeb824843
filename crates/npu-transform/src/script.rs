//! A transform script as the expansion needs it: tokens, matched brackets (regions, operand
//! lists, attribute lists), the named sequences with their signatures and bodies, every
//! `transform.include` and every `transform.foreach_match`.
//!
//! Tokens come from npu-mlir's lexer (strings and comments are never structure; brackets are
//! matched there, and a closer of the wrong kind or an unclosed region is an error with its
//! line). On top of it, this module knows the grammar of the three ops the expansion rewrites
//! (`transform.named_sequence`, `transform.include`, `transform.foreach_match`, per their
//! assembly formats in llvm-project's mlir/include/mlir/Dialect/Transform/IR/TransformOps.td);
//! transform scripts are written by hand, so unlike printed MLIR a statement may span lines.
//! Everything else is copied as it is.

use std::collections::HashMap;

use npu_mlir::lex::{self, Bracket, Kind, Token};

use crate::error::TransformError;

pub const NAMED_SEQUENCE: &str = "transform.named_sequence";
pub const INCLUDE: &str = "transform.include";
pub const FOREACH_MATCH: &str = "transform.foreach_match";
pub const YIELD: &str = "transform.yield";

/// One parameter of a named sequence: `%name : type {attributes}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Param {
    /// `%name`.
    pub name: String,
    /// The type as written (`!transform.any_op`).
    pub ty: String,
    /// `transform.readonly` or `transform.consumed`, when the argument attributes say.
    pub effect: Option<String>,
}

/// A `transform.named_sequence` definition (or declaration, without a body).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sequence {
    /// Without the `@`.
    pub name: String,
    pub line: u32,
    pub params: Vec<Param>,
    /// The result types as written.
    pub results: Vec<String>,
    /// Token indices of the body's `{` and `}`.
    pub body: Option<(usize, usize)>,
    /// The definition's bytes, from the start of the comment lines right above it to the end
    /// of the line of its closing brace.
    pub definition: std::ops::Range<usize>,
}

impl Sequence {
    /// `@name(%p: !transform.any_op {transform.readonly}) -> !transform.any_op`.
    pub fn signature(&self) -> String {
        let params: Vec<String> = self
            .params
            .iter()
            .map(|p| match &p.effect {
                Some(e) => format!("{}: {} {{{e}}}", p.name, p.ty),
                None => format!("{}: {}", p.name, p.ty),
            })
            .collect();
        let mut s = format!("@{}({})", self.name, params.join(", "));
        match self.results.len() {
            0 => {}
            1 => s.push_str(&format!(" -> {}", self.results[0])),
            _ => s.push_str(&format!(" -> ({})", self.results.join(", "))),
        }
        s
    }
}

/// A `transform.include` statement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Include {
    /// The first token of the statement: its first result, or the op name.
    pub start: usize,
    /// The `transform.include` token.
    pub op: usize,
    /// The statement's last token (the end of its functional type).
    pub end: usize,
    /// Without the `@`.
    pub callee: String,
    /// The tokens of the result values (`%r`), in order.
    pub results: Vec<usize>,
    /// The tokens of the operands, in order.
    pub args: Vec<usize>,
    pub line: u32,
}

/// A `transform.foreach_match` statement: the symbols it names (matchers and actions).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForeachMatch {
    pub op: usize,
    pub symbols: Vec<String>,
    pub line: u32,
}

/// A parsed script (or fragment of one).
#[derive(Debug, Clone)]
pub struct Script {
    /// Names the script in messages: a file path, or `library file.mlir`.
    pub origin: String,
    pub text: String,
    pub tokens: Vec<Token>,
    /// The line (from 1, in `origin`) each token starts on.
    lines: Vec<u32>,
    pub sequences: Vec<Sequence>,
    pub includes: Vec<Include>,
    pub foreach_matches: Vec<ForeachMatch>,
}

impl Script {
    /// Parses a whole script: `transform.include` and `transform.foreach_match` must sit inside
    /// a region (a sequence body).
    pub fn parse(origin: &str, text: &str) -> Result<Script, TransformError> {
        Script::parse_at(origin, text, 1, false)
    }

    /// Parses `text` starting at line `first_line` of `origin`. A `fragment` is the body of a
    /// region cut out of a script, so its top level counts as inside a region.
    pub fn parse_at(
        origin: &str,
        text: &str,
        first_line: u32,
        fragment: bool,
    ) -> Result<Script, TransformError> {
        let syntax = |line: u32, message: String| TransformError::Syntax {
            origin: origin.to_owned(),
            line,
            message,
        };
        let tokens = lex::tokenize(text).map_err(|e| {
            let line = first_line + e.line as u32 - 1;
            let nesting = if e.message.contains("close") {
                " (bad nesting)"
            } else {
                ""
            };
            syntax(line, format!("{}{nesting}", e.message))
        })?;
        let mut lines = Vec::with_capacity(tokens.len());
        let (mut line, mut at) = (first_line, 0);
        for t in &tokens {
            line += text[at..t.start].matches('\n').count() as u32;
            at = t.start;
            lines.push(line);
        }
        let mut script = Script {
            origin: origin.to_owned(),
            text: text.to_owned(),
            tokens,
            lines,
            sequences: Vec::new(),
            includes: Vec::new(),
            foreach_matches: Vec::new(),
        };
        script.find_statements(fragment)?;
        Ok(script)
    }

    pub fn tok(&self, i: usize) -> &str {
        self.tokens[i].text(&self.text)
    }

    fn is_ident(&self, i: usize, word: &str) -> bool {
        self.tokens
            .get(i)
            .is_some_and(|t| t.kind == Kind::Ident && t.text(&self.text) == word)
    }

    fn is_punct(&self, i: usize, c: u8) -> bool {
        self.tokens.get(i).is_some_and(|t| t.is_punct(c))
    }

    /// Whether token `i` opens a bracket pair of kind `b`.
    pub fn is_open(&self, i: usize, b: Bracket) -> bool {
        self.tokens.get(i).is_some_and(|t| t.is_open(b))
    }

    /// The partner of the bracket token `i`.
    pub fn partner(&self, i: usize) -> Option<usize> {
        let t = self.tokens.get(i)?;
        matches!(t.kind, Kind::Open(_) | Kind::Close(_)).then_some(t.partner)
    }

    /// The line (from 1) token `i` starts on.
    pub fn line(&self, i: usize) -> u32 {
        self.lines.get(i).copied().unwrap_or(1)
    }

    pub fn sequence(&self, name: &str) -> Option<&Sequence> {
        self.sequences.iter().find(|s| s.name == name)
    }

    /// The line the token `i` is on (the last line when `i` is past the end).
    pub fn line_of(&self, i: usize) -> u32 {
        self.lines
            .get(i)
            .or(self.lines.last())
            .copied()
            .unwrap_or(1)
    }

    fn error(&self, i: usize, message: String) -> TransformError {
        TransformError::Syntax {
            origin: self.origin.clone(),
            line: self.line_of(i),
            message,
        }
    }

    fn find_statements(&mut self, fragment: bool) -> Result<(), TransformError> {
        // Depth in braces at each token, to tell where statements sit.
        let mut brace_depth = 0usize;
        let mut open_bodies: Vec<(usize, String, u32)> = Vec::new(); // (closing token, name, line)
        let mut i = 0;
        while i < self.tokens.len() {
            while open_bodies.last().is_some_and(|(close, _, _)| i > *close) {
                open_bodies.pop();
            }
            let t = self.tokens[i];
            if t.is_open(Bracket::Brace) {
                brace_depth += 1;
            } else if t.kind == Kind::Close(Bracket::Brace) {
                brace_depth = brace_depth.saturating_sub(1);
            }
            if t.kind != Kind::Ident {
                i += 1;
                continue;
            }
            let in_region = fragment || brace_depth > 0;
            match t.text(&self.text) {
                NAMED_SEQUENCE => {
                    let seq = self.parse_sequence(i)?;
                    if let Some((_, outer, outer_line)) = open_bodies.last() {
                        return Err(self.error(
                            i,
                            format!(
                                "transform.named_sequence @{} is defined inside the body of \
                                 @{outer} (line {outer_line}); named sequences belong directly in \
                                 a module with transform.with_named_sequence",
                                seq.name
                            ),
                        ));
                    }
                    if let Some((_, close)) = seq.body {
                        open_bodies.push((close, seq.name.clone(), seq.line));
                    }
                    self.sequences.push(seq);
                }
                INCLUDE => {
                    if !in_region {
                        return Err(self.error(
                            i,
                            "transform.include outside any sequence body: it must be an \
                             operation inside a transform.named_sequence"
                                .into(),
                        ));
                    }
                    let inc = self.parse_include(i)?;
                    i = inc.end;
                    self.includes.push(inc);
                }
                FOREACH_MATCH => {
                    if !in_region {
                        return Err(self.error(
                            i,
                            "transform.foreach_match outside any sequence body".into(),
                        ));
                    }
                    let fm = self.parse_foreach_match(i)?;
                    self.foreach_matches.push(fm);
                }
                _ => {}
            }
            i += 1;
        }
        // Two definitions of one symbol are an MLIR error ("redefinition of symbol").
        let mut seen: HashMap<&str, u32> = HashMap::new();
        for s in &self.sequences {
            if let Some(first) = seen.insert(&s.name, s.line) {
                return Err(TransformError::Syntax {
                    origin: self.origin.clone(),
                    line: s.line,
                    message: format!(
                        "@{} is defined twice (first at line {first}); MLIR refuses the \
                         redefinition of a symbol",
                        s.name
                    ),
                });
            }
        }
        Ok(())
    }

    /// `transform.named_sequence @name(params) [-> results] [attributes {…}] [{ body }]`.
    fn parse_sequence(&self, op: usize) -> Result<Sequence, TransformError> {
        let what = "transform.named_sequence";
        let name_tok = op + 1;
        let name = self
            .symbol_name(name_tok)
            .ok_or_else(|| self.error(name_tok, format!("{what} must be followed by its @name")))?;
        let open = name_tok + 1;
        if !self.is_open(open, Bracket::Paren) {
            return Err(self.error(open, format!("{what} @{name} needs a parameter list")));
        }
        let close = self.partner(open).unwrap_or(open);
        let params = self
            .split_top_level(open + 1, close)
            .into_iter()
            .map(|(from, to)| self.parse_param(from, to, &name))
            .collect::<Result<Vec<_>, _>>()?;
        let mut next = close + 1;
        let mut results = Vec::new();
        if self.tokens.get(next).is_some_and(|t| t.kind == Kind::Arrow) {
            next += 1;
            if self.is_open(next, Bracket::Paren) {
                let end = self.partner(next).unwrap_or(next);
                results = self
                    .split_top_level(next + 1, end)
                    .into_iter()
                    .map(|(a, b)| self.span_text(a, b))
                    .collect();
                next = end + 1;
            } else {
                let end = self.type_end(next).ok_or_else(|| {
                    self.error(next, format!("{what} @{name}: expected a result type"))
                })?;
                results.push(self.span_text(next, end + 1));
                next = end + 1;
            }
        }
        if self.is_ident(next, "attributes") && self.is_open(next + 1, Bracket::Brace) {
            next = self.partner(next + 1).unwrap_or(next + 1) + 1;
        }
        let body = if self.is_open(next, Bracket::Brace) {
            let end = self.partner(next).unwrap_or(next);
            Some((next, end))
        } else {
            None
        };
        let last = body.map_or(next.saturating_sub(1), |(_, end)| end);
        Ok(Sequence {
            name,
            line: self.line(op),
            params,
            results,
            body,
            definition: self.definition_span(op, last),
        })
    }

    fn parse_param(&self, from: usize, to: usize, seq: &str) -> Result<Param, TransformError> {
        let bad = || {
            self.error(
                from,
                format!(
                    "@{seq}: a parameter must read `%name : type`, found `{}`",
                    { self.span_text(from, to) }
                ),
            )
        };
        if self.tokens.get(from).map(|t| t.kind) != Some(Kind::Value)
            || !self.is_punct(from + 1, b':')
        {
            return Err(bad());
        }
        let attrs_at = (from + 2..to).find(|&k| self.is_open(k, Bracket::Brace));
        let ty_end = attrs_at.unwrap_or(to);
        if ty_end <= from + 2 {
            return Err(bad());
        }
        let effect = attrs_at.and_then(|a| {
            (a..to).map(|k| self.tok(k)).find_map(|w| match w {
                "transform.readonly" | "transform.consumed" => Some(w.to_owned()),
                _ => None,
            })
        });
        Ok(Param {
            name: self.tok(from).to_owned(),
            ty: self.span_text(from + 2, ty_end),
            effect,
        })
    }

    /// `[%r (, %r)* =] transform.include @name failures(mode) (%args) [{attrs}] : (types) ->
    /// type-or-(types)`.
    fn parse_include(&self, op: usize) -> Result<Include, TransformError> {
        // Reported at the statement's line, whichever token is wrong.
        let bad = |_at: usize, expected: &str| {
            self.error(
                op,
                format!(
                    "malformed transform.include: expected {expected}; the form is `[%result =] \
                     transform.include @name failures(propagate) (%handle) : \
                     (!transform.any_op) -> ...`"
                ),
            )
        };
        let mut results = Vec::new();
        let mut start = op;
        if op >= 2 && self.is_punct(op - 1, b'=') {
            let mut j = op - 2;
            loop {
                if self.tokens[j].kind != Kind::Value {
                    return Err(bad(j, "a %result name before `=`"));
                }
                results.push(j);
                start = j;
                if j >= 2 && self.is_punct(j - 1, b',') && self.tokens[j - 2].kind == Kind::Value {
                    j -= 2;
                } else {
                    break;
                }
            }
            results.reverse();
        }
        let callee = self
            .symbol_name(op + 1)
            .ok_or_else(|| bad(op + 1, "the @name of a sequence"))?;
        let mut k = op + 2;
        if !self.is_ident(k, "failures") || !self.is_open(k + 1, Bracket::Paren) {
            return Err(bad(k, "`failures(propagate)` or `failures(suppress)`"));
        }
        k = self.partner(k + 1).unwrap_or(k + 1) + 1;
        if !self.is_open(k, Bracket::Paren) {
            return Err(bad(k, "the operand list `(%handle)`"));
        }
        let close = self.partner(k).unwrap_or(k);
        let mut args = Vec::new();
        for (a, b) in self.split_top_level(k + 1, close) {
            if b != a + 1 || self.tokens[a].kind != Kind::Value {
                return Err(bad(a, "operands that are %values"));
            }
            args.push(a);
        }
        k = close + 1;
        if self.is_open(k, Bracket::Brace) {
            k = self.partner(k).unwrap_or(k) + 1;
        }
        if !self.is_punct(k, b':') {
            return Err(bad(k, "`:` and the functional type"));
        }
        k += 1;
        if !self.is_open(k, Bracket::Paren) {
            return Err(bad(k, "the operand types `(...)`"));
        }
        k = self.partner(k).unwrap_or(k) + 1;
        if self.tokens.get(k).map(|t| t.kind) != Some(Kind::Arrow) {
            return Err(bad(k, "`->` and the result types"));
        }
        k += 1;
        let end = if self.is_open(k, Bracket::Paren) {
            self.partner(k).unwrap_or(k)
        } else {
            self.type_end(k).ok_or_else(|| bad(k, "a result type"))?
        };
        Ok(Include {
            start,
            op,
            end,
            callee,
            results,
            args,
            line: self.line(op),
        })
    }

    /// `transform.foreach_match ... in %root @matcher -> @action, ... : (types) -> types`: the
    /// symbols up to the `:` that starts the functional type.
    fn parse_foreach_match(&self, op: usize) -> Result<ForeachMatch, TransformError> {
        let mut symbols = Vec::new();
        let mut k = op + 1;
        while k < self.tokens.len() {
            let t = self.tokens[k];
            if t.is_punct(b':') {
                break;
            }
            match t.kind {
                Kind::Symbol => symbols.push(self.symbol_name(k).unwrap_or_default()),
                Kind::Open(_) => k = self.partner(k).unwrap_or(k),
                Kind::Close(_) => {
                    return Err(self.error(
                        k,
                        "malformed transform.foreach_match: its region ends before the `:` \
                         of its type"
                            .into(),
                    ));
                }
                _ => {}
            }
            k += 1;
        }
        if symbols.is_empty() {
            return Err(self.error(
                op,
                "transform.foreach_match names no @matcher -> @action pair".into(),
            ));
        }
        Ok(ForeachMatch {
            op,
            symbols,
            line: self.line(op),
        })
    }

    /// The name of the symbol token `i` (without `@` and quotes).
    fn symbol_name(&self, i: usize) -> Option<String> {
        let t = self.tokens.get(i)?;
        if t.kind != Kind::Symbol {
            return None;
        }
        let raw = &t.text(&self.text)[1..];
        Some(raw.trim_matches('"').to_owned())
    }

    /// Token index ranges between top-level commas of the tokens `from..to`.
    fn split_top_level(&self, from: usize, to: usize) -> Vec<(usize, usize)> {
        let mut parts = Vec::new();
        let mut start = from;
        let mut angle = 0i32;
        let mut k = from;
        while k < to {
            let t = self.tokens[k];
            match t.kind {
                Kind::Open(_) => k = self.partner(k).unwrap_or(k),
                Kind::Punct(b'<') => angle += 1,
                Kind::Punct(b'>') => angle -= 1,
                Kind::Punct(b',') if angle == 0 => {
                    parts.push((start, k));
                    start = k + 1;
                }
                _ => {}
            }
            k += 1;
        }
        if start < to {
            parts.push((start, to));
        }
        parts
    }

    /// The last token of the type starting at token `i`: a `!dialect.type` or bare word,
    /// with its `<...>` parameters.
    fn type_end(&self, i: usize) -> Option<usize> {
        let t = self.tokens.get(i)?;
        if !matches!(t.kind, Kind::Alias | Kind::Ident) {
            return None;
        }
        if !self.is_punct(i + 1, b'<') {
            return Some(i);
        }
        let mut depth = 0i32;
        for k in i + 1..self.tokens.len() {
            match self.tokens[k].kind {
                Kind::Punct(b'<') => depth += 1,
                Kind::Punct(b'>') => {
                    depth -= 1;
                    if depth == 0 {
                        return Some(k);
                    }
                }
                _ => {}
            }
        }
        None
    }

    /// The source text of tokens `from..to`, whitespace runs collapsed to one space.
    pub fn span_text(&self, from: usize, to: usize) -> String {
        if from >= to {
            return String::new();
        }
        let raw = &self.text[self.tokens[from].start..self.tokens[to - 1].end];
        raw.split_whitespace().collect::<Vec<_>>().join(" ")
    }

    /// From the start of the comment block right above `op`'s line to the end of `last`'s
    /// line.
    fn definition_span(&self, op: usize, last: usize) -> std::ops::Range<usize> {
        let text = self.text.as_str();
        let mut start = line_start(text, self.tokens[op].start);
        // Take the comment lines directly above (stop at a blank or code line).
        while start > 0 {
            let prev_start = line_start(text, start - 1);
            let prev = text[prev_start..start].trim();
            if prev.starts_with("//") {
                start = prev_start;
            } else {
                break;
            }
        }
        let end_tok = self.tokens[last.min(self.tokens.len() - 1)].end;
        let end = text[end_tok..]
            .find('\n')
            .map_or(text.len(), |n| end_tok + n + 1);
        start..end
    }
}

/// The byte offset where the line holding `at` begins.
pub fn line_start(text: &str, at: usize) -> usize {
    text[..at].rfind('\n').map_or(0, |n| n + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SCRIPT: &str = r#"
module attributes {transform.with_named_sequence} {
  // Helper: does nothing.
  // Second comment line.
  transform.named_sequence @helper(%h: !transform.any_op {transform.readonly}) -> !transform.any_op {
    %x = transform.structured.match ops{["func.func"]} in %h : (!transform.any_op) -> !transform.any_op
    transform.yield %x : !transform.any_op
  }
  transform.named_sequence @__transform_main(%arg1: !transform.any_op {transform.readonly}) {
    %a, %b = transform.include @pair failures(propagate)
        (%arg1) : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    transform.include @helper failures(suppress) (%a) : (!transform.any_op) -> !transform.op<"func.func">
    transform.foreach_match in %b @m -> @act, @m2 -> @act2 : (!transform.any_op) -> !transform.any_op
    transform.yield
  }
}
"#;

    #[test]
    fn sequences_includes_and_foreach() {
        let s = Script::parse("t.mlir", SCRIPT).unwrap();
        assert_eq!(s.sequences.len(), 2);
        let h = &s.sequences[0];
        assert_eq!(h.name, "helper");
        assert_eq!(h.line, 5);
        assert_eq!(
            h.signature(),
            "@helper(%h: !transform.any_op {transform.readonly}) -> !transform.any_op"
        );
        let def = &SCRIPT[h.definition.clone()];
        assert!(
            def.starts_with("  // Helper: does nothing.\n  // Second"),
            "{def}"
        );
        assert!(def.ends_with("  }\n"), "{def:?}");
        assert_eq!(
            s.sequences[1].signature(),
            "@__transform_main(%arg1: !transform.any_op {transform.readonly})"
        );

        assert_eq!(s.includes.len(), 2);
        let pair = &s.includes[0];
        assert_eq!(pair.callee, "pair");
        assert_eq!(pair.line, 10);
        let names: Vec<&str> = pair.results.iter().map(|&r| s.tok(r)).collect();
        assert_eq!(names, ["%a", "%b"]);
        assert_eq!(s.tok(pair.start), "%a");
        assert_eq!(s.tok(pair.end), ")");
        let helper = &s.includes[1];
        assert!(helper.results.is_empty());
        assert_eq!(s.tok(helper.args[0]), "%a");
        assert_eq!(s.tok(helper.end), ">");

        assert_eq!(s.foreach_matches.len(), 1);
        assert_eq!(s.foreach_matches[0].symbols, ["m", "act", "m2", "act2"]);
    }

    #[test]
    fn bad_nesting_is_an_error_with_its_line() {
        let e = Script::parse(
            "x.mlir",
            "module {\n  transform.named_sequence @a() {\n  ]\n}",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("x.mlir:3") && e.contains("bad nesting"), "{e}");
        let e = Script::parse("x.mlir", "module {\n  {\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("x.mlir:2") && e.contains("never closed"), "{e}");
        let e = Script::parse("x.mlir", "}\n").unwrap_err().to_string();
        assert!(e.contains("closes nothing"), "{e}");
        let nested = "module attributes {transform.with_named_sequence} {\n\
            transform.named_sequence @outer(%h: !transform.any_op) {\n\
              transform.named_sequence @inner(%g: !transform.any_op) {\n transform.yield\n }\n\
              transform.yield\n}\n}";
        let e = Script::parse("n.mlir", nested).unwrap_err().to_string();
        assert!(
            e.contains("n.mlir:3") && e.contains("inside the body of @outer"),
            "{e}"
        );
        let e = Script::parse(
            "top.mlir",
            "transform.include @a failures(propagate) (%x) : (!transform.any_op) -> ()",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("outside any sequence body"), "{e}");
        // A fragment's top level is a region.
        assert!(
            Script::parse_at(
                "frag",
                "transform.include @a failures(propagate) (%x) : (!transform.any_op) -> ()",
                7,
                true
            )
            .is_ok()
        );
    }

    #[test]
    fn malformed_statements() {
        let wrap = |stmt: &str| {
            format!(
                "module attributes {{transform.with_named_sequence}} {{\n\
                 transform.named_sequence @__transform_main(%r: !transform.any_op) {{\n{stmt}\n\
                 transform.yield\n}}\n}}"
            )
        };
        for bad in [
            "transform.include failures(propagate) (%r) : (!transform.any_op) -> ()",
            "transform.include @x (%r) : (!transform.any_op) -> ()",
            "transform.include @x failures(propagate) (%r)",
            "transform.include @x failures(propagate) (%r) : (!transform.any_op) ()",
            "transform.include @x failures(propagate) (foo) : (!transform.any_op) -> ()",
        ] {
            let e = Script::parse("m.mlir", &wrap(bad)).unwrap_err().to_string();
            assert!(
                e.contains("m.mlir:3") && e.contains("malformed transform.include"),
                "{bad}: {e}"
            );
        }
        let e = Script::parse(
            "m.mlir",
            &wrap("transform.foreach_match in %r : (!transform.any_op) -> !transform.any_op"),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("no @matcher"), "{e}");
        let twice = "module attributes {transform.with_named_sequence} {\n\
            transform.named_sequence @a(%h: !transform.any_op) {\n transform.yield\n}\n\
            transform.named_sequence @a(%h: !transform.any_op) {\n transform.yield\n}\n}";
        let e = Script::parse("d.mlir", twice).unwrap_err().to_string();
        assert!(e.contains("d.mlir:5") && e.contains("defined twice"), "{e}");
    }
}
