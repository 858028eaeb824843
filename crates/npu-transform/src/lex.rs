//! MLIR tokens, as far as transform scripts and triton-shared's Linalg need them.
//!
//! The lexer follows MLIR's token classes (mlir/lib/AsmParser/Lexer.cpp): bare identifiers
//! (`transform.structured.match`, `tensor`), SSA values (`%name`), symbols (`@name`,
//! `@"quoted"`), block labels (`^bb0`), hash identifiers (`#map`, `#0` in `%r#0`), bang
//! identifiers (`!transform.any_op`), string literals, numbers and punctuation. Comments
//! (`//` to the end of the line) and whitespace are not tokens: they stay in the text between
//! tokens, which is how the expansion copies a script without losing its layout.

use std::ops::Range;

/// What a token is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A bare identifier: `transform.include`, `failures`, `tensor`, `f32`.
    Ident,
    /// `%name` (without a `#N` result number, which is a [`Kind::Hash`] of its own).
    Value,
    /// `@name` or `@"name"`.
    Symbol,
    /// `^bb0`.
    Block,
    /// `#map`, `#loc3`, `#0`.
    Hash,
    /// `!transform.any_op`.
    Bang,
    /// A string literal, quotes included.
    Str,
    /// An integer or float literal, or a dimension list such as `32x64xf32`.
    Number,
    /// `->`.
    Arrow,
    /// `...`.
    Ellipsis,
    /// One punctuation character: `( ) { } [ ] < > , : = * + ? | -`.
    Punct(u8),
}

/// A token: its kind, its bytes in the source and the line it starts on (1-based).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Token {
    pub kind: Kind,
    pub start: usize,
    pub end: usize,
    pub line: u32,
}

impl Token {
    pub fn text<'a>(&self, src: &'a str) -> &'a str {
        &src[self.start..self.end]
    }

    pub fn span(&self) -> Range<usize> {
        self.start..self.end
    }

    pub fn is_punct(&self, c: u8) -> bool {
        self.kind == Kind::Punct(c)
    }
}

/// Why a text is not made of MLIR tokens: the line and what is wrong there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LexError {
    pub line: u32,
    pub message: String,
}

fn is_bare_start(c: u8) -> bool {
    c.is_ascii_alphabetic() || c == b'_'
}

fn is_bare_char(c: u8) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, b'_' | b'$' | b'.')
}

/// MLIR's suffix-id characters (after `%`, `^`, `#`, `@`).
fn is_suffix_char(c: u8) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, b'_' | b'$' | b'.' | b'-')
}

/// Splits `src` into tokens. `first_line` is the line number of the text's first line (so a
/// fragment cut out of a file reports the file's line numbers).
pub fn lex(src: &str, first_line: u32) -> Result<Vec<Token>, LexError> {
    let bytes = src.as_bytes();
    let mut tokens = Vec::new();
    let mut i = 0;
    let mut line = first_line;
    while i < bytes.len() {
        let c = bytes[i];
        let start = i;
        let token_line = line;
        let kind = match c {
            b'\n' => {
                line += 1;
                i += 1;
                continue;
            }
            c if c.is_ascii_whitespace() => {
                i += 1;
                continue;
            }
            b'/' if bytes.get(i + 1) == Some(&b'/') => {
                while i < bytes.len() && bytes[i] != b'\n' {
                    i += 1;
                }
                continue;
            }
            b'"' => {
                i = string_end(bytes, i).ok_or_else(|| LexError {
                    line,
                    message: "a string literal is not closed on its line".into(),
                })?;
                Kind::Str
            }
            b'%' | b'^' | b'#' => {
                i += 1;
                let from = i;
                while i < bytes.len() && is_suffix_char(bytes[i]) {
                    i += 1;
                }
                if i == from {
                    return Err(LexError {
                        line,
                        message: format!("`{}` must be followed by a name", c as char),
                    });
                }
                match c {
                    b'%' => Kind::Value,
                    b'^' => Kind::Block,
                    _ => Kind::Hash,
                }
            }
            b'@' => {
                i += 1;
                if bytes.get(i) == Some(&b'"') {
                    i = string_end(bytes, i).ok_or_else(|| LexError {
                        line,
                        message: "a quoted symbol name is not closed on its line".into(),
                    })?;
                } else {
                    let from = i;
                    while i < bytes.len() && is_suffix_char(bytes[i]) {
                        i += 1;
                    }
                    if i == from {
                        return Err(LexError {
                            line,
                            message: "`@` must be followed by a symbol name".into(),
                        });
                    }
                }
                Kind::Symbol
            }
            b'!' => {
                i += 1;
                let from = i;
                while i < bytes.len() && is_bare_char(bytes[i]) {
                    i += 1;
                }
                if i == from {
                    return Err(LexError {
                        line,
                        message: "`!` must be followed by a type name".into(),
                    });
                }
                Kind::Bang
            }
            b'-' if bytes.get(i + 1) == Some(&b'>') => {
                i += 2;
                Kind::Arrow
            }
            b'.' if bytes[i..].starts_with(b"...") => {
                i += 3;
                Kind::Ellipsis
            }
            c if c.is_ascii_digit() => {
                i += 1;
                while i < bytes.len() {
                    let d = bytes[i];
                    if d.is_ascii_alphanumeric() || d == b'_' || d == b'.' {
                        i += 1;
                    } else if matches!(d, b'+' | b'-')
                        && matches!(bytes[i - 1], b'e' | b'E')
                        && bytes.get(i + 1).is_some_and(u8::is_ascii_digit)
                    {
                        // An exponent: 1.0e-3.
                        i += 1;
                    } else {
                        break;
                    }
                }
                Kind::Number
            }
            c if is_bare_start(c) => {
                i += 1;
                while i < bytes.len() && is_bare_char(bytes[i]) {
                    i += 1;
                }
                Kind::Ident
            }
            b'(' | b')' | b'{' | b'}' | b'[' | b']' | b'<' | b'>' | b',' | b':' | b'=' | b'*'
            | b'+' | b'?' | b'|' | b'-' => {
                i += 1;
                Kind::Punct(c)
            }
            _ => {
                let ch = src[i..].chars().next().unwrap_or('?');
                return Err(LexError {
                    line,
                    message: format!("unexpected character {ch:?}: this is not MLIR"),
                });
            }
        };
        tokens.push(Token {
            kind,
            start,
            end: i,
            line: token_line,
        });
    }
    Ok(tokens)
}

/// The index just past the closing quote of the string starting at `open`, or `None` when the
/// line ends first.
fn string_end(bytes: &[u8], open: usize) -> Option<usize> {
    let mut i = open + 1;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b'"' => return Some(i + 1),
            b'\n' => return None,
            _ => i += 1,
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(src: &str) -> Vec<(Kind, &str)> {
        lex(src, 1)
            .unwrap()
            .iter()
            .map(|t| (t.kind, t.text(src)))
            .collect()
    }

    #[test]
    fn transform_statement() {
        let src = "%a, %b:2 = transform.include @x failures(propagate) (%arg1) \
                   : (!transform.any_op) -> !transform.op<\"scf.forall\"> // trailing";
        let k = kinds(src);
        assert_eq!(k[0], (Kind::Value, "%a"));
        assert_eq!(k[1], (Kind::Punct(b','), ","));
        assert_eq!(k[2], (Kind::Value, "%b"));
        assert_eq!(k[3], (Kind::Punct(b':'), ":"));
        assert_eq!(k[4], (Kind::Number, "2"));
        assert_eq!(k[6], (Kind::Ident, "transform.include"));
        assert_eq!(k[7], (Kind::Symbol, "@x"));
        assert!(k.contains(&(Kind::Bang, "!transform.any_op")));
        assert!(k.contains(&(Kind::Arrow, "->")));
        assert!(k.contains(&(Kind::Str, "\"scf.forall\"")));
        assert!(!k.iter().any(|(_, t)| t.contains("trailing")));
    }

    #[test]
    fn values_results_and_types() {
        let src =
            "%x#1 ^bb0 #map = affine_map<(d0) -> (d0)> tensor<32x64xf32> 1.0e-3 -4 @\"q s\" ...";
        let k = kinds(src);
        assert_eq!(k[0], (Kind::Value, "%x"));
        assert_eq!(k[1], (Kind::Hash, "#1"));
        assert_eq!(k[2], (Kind::Block, "^bb0"));
        assert_eq!(k[3], (Kind::Hash, "#map"));
        assert!(k.contains(&(Kind::Number, "32x64xf32")));
        assert!(k.contains(&(Kind::Number, "1.0e-3")));
        assert!(k.contains(&(Kind::Punct(b'-'), "-")));
        assert!(k.contains(&(Kind::Symbol, "@\"q s\"")));
        assert_eq!(k.last().unwrap(), &(Kind::Ellipsis, "..."));
    }

    #[test]
    fn lines_and_strings_with_brackets() {
        let src = "a\n  loc(\"f.py\":3:1) // )\n\"x)\" b";
        let toks = lex(src, 10).unwrap();
        let lines: Vec<u32> = toks.iter().map(|t| t.line).collect();
        assert_eq!(lines, [10, 11, 11, 11, 11, 11, 11, 11, 11, 12, 12]);
        assert_eq!(toks[9].text(src), "\"x)\"");
    }

    #[test]
    fn refuses_what_is_not_mlir() {
        let e = lex("ok\n  \"open", 1).unwrap_err();
        assert_eq!(e.line, 2);
        assert!(e.message.contains("not closed"), "{}", e.message);
        let e = lex("def main():\n  return 1;", 1).unwrap_err();
        assert_eq!(e.line, 2);
        assert!(e.message.contains("';'"), "{}", e.message);
        assert!(lex("% x", 1).is_err());
        assert!(lex("a @ b", 1).is_err());
    }
}
