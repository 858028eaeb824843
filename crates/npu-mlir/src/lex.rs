//! MLIR's tokens, as far as reading structure needs them.
//!
//! Quoted strings and `//` comments are single tokens (or skipped), so nothing inside them —
//! a `)`, a `->`, an escaped quote in `loc("a \") -> b":1:2)` — is ever mistaken for
//! structure. Brackets `(` `[` `{` and the file-metadata pair `{-#` … `#-}` are matched here,
//! once, and every token records whether a line break precedes it: printed MLIR puts one
//! operation per line, which is how the parser finds where an operation ends.
//!
//! `<` and `>` are not matched here: they also appear as `->` (one token) and in affine
//! comparisons (`>=`, `<=`, one token each), and the parser only needs their depth where it
//! splits lists.

use crate::error::ParseError;

/// Deeper nesting is refused: the parser recurses once per level.
pub const MAX_NESTING: usize = 256;

/// A bracket pair.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bracket {
    /// `(` `)`
    Paren,
    /// `[` `]`
    Square,
    /// `{` `}`
    Brace,
    /// `{-#` `#-}` (file-level metadata such as dialect resources)
    Metadata,
}

impl Bracket {
    /// The pair of a single-character bracket.
    fn of(c: u8) -> Bracket {
        match c {
            b'(' | b')' => Bracket::Paren,
            b'[' | b']' => Bracket::Square,
            _ => Bracket::Brace,
        }
    }
    fn open_text(self) -> &'static str {
        match self {
            Bracket::Paren => "(",
            Bracket::Square => "[",
            Bracket::Brace => "{",
            Bracket::Metadata => "{-#",
        }
    }
    fn close_text(self) -> &'static str {
        match self {
            Bracket::Paren => ")",
            Bracket::Square => "]",
            Bracket::Brace => "}",
            Bracket::Metadata => "#-}",
        }
    }
}

/// What a token is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `%name` — an SSA value (a result number as in `%0#1` is a separate `#` and number).
    Value,
    /// `@name` or `@"name"` — a symbol reference.
    Symbol,
    /// `#name` or `!name` — an attribute or type alias, or a dialect attribute or type.
    Alias,
    /// `^name` — a block label.
    Block,
    /// A bare identifier or keyword: `func.func`, `tensor`, `ins`, `x4xf32`.
    Ident,
    /// A number (digits and what sticks to them: `1.5`, `0x1F`, `4x`).
    Number,
    /// A quoted string, quotes included.
    String,
    /// `->`
    Arrow,
    /// `<=` or `>=` (affine comparisons; never brackets)
    Compare,
    Open(Bracket),
    Close(Bracket),
    /// Any other single ASCII punctuation character: `:` `,` `=` `<` `>` `?` `*` `-` …
    Punct(u8),
}

/// One token: its kind, its byte range in the text, and for brackets the index of its partner.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Token {
    pub kind: Kind,
    pub start: usize,
    pub end: usize,
    /// Whether a line break separates this token from the previous one (or it is the first).
    pub line_start: bool,
    /// For a bracket, the index of the matching bracket token; otherwise unused (0).
    pub partner: usize,
}

impl Token {
    pub fn text<'a>(&self, source: &'a str) -> &'a str {
        &source[self.start..self.end]
    }
    pub fn is_punct(&self, c: u8) -> bool {
        self.kind == Kind::Punct(c)
    }
    pub fn is_open(&self, b: Bracket) -> bool {
        self.kind == Kind::Open(b)
    }
}

/// Whether `c` may continue a sigiled name (`%x`, `@x`, `#x`, `!x`, `^x`).
pub(crate) fn is_name_char(c: u8) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, b'_' | b'$' | b'.' | b'-')
}

fn is_ident_char(c: u8) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, b'_' | b'$' | b'.')
}

/// The tokens of `source`, brackets matched.
pub fn tokenize(source: &str) -> Result<Vec<Token>, ParseError> {
    let b = source.as_bytes();
    let mut tokens: Vec<Token> = Vec::with_capacity(source.len() / 4);
    // Open brackets not yet closed: token index.
    let mut open: Vec<usize> = Vec::new();
    let mut i = 0;
    let mut line_start = true;
    while i < b.len() {
        let c = b[i];
        if c == b'\n' {
            line_start = true;
            i += 1;
            continue;
        }
        if c.is_ascii_whitespace() {
            i += 1;
            continue;
        }
        if c == b'/' && b.get(i + 1) == Some(&b'/') {
            i = b[i..]
                .iter()
                .position(|&x| x == b'\n')
                .map_or(b.len(), |p| i + p);
            continue;
        }
        let start = i;
        let name_end = |from: usize| {
            b[from..]
                .iter()
                .position(|&x| !is_name_char(x))
                .map_or(b.len(), |p| from + p)
        };
        let next = b.get(i + 1).copied();
        let kind = match c {
            b'"' => {
                i = string_end(source, i)?;
                Kind::String
            }
            b'%' if next.is_some_and(is_name_char) => {
                i = name_end(i + 1);
                Kind::Value
            }
            b'@' if next == Some(b'"') => {
                i = string_end(source, i + 1)?;
                Kind::Symbol
            }
            b'@' if next.is_some_and(is_name_char) => {
                i = name_end(i + 1);
                Kind::Symbol
            }
            b'^' if next.is_some_and(is_name_char) => {
                i = name_end(i + 1);
                Kind::Block
            }
            b'#' if next == Some(b'-') && b.get(i + 2) == Some(&b'}') => {
                i += 3;
                Kind::Close(Bracket::Metadata)
            }
            b'#' | b'!' if next.is_some_and(|n| n.is_ascii_alphabetic() || n == b'_') => {
                i = name_end(i + 1);
                Kind::Alias
            }
            b'{' if next == Some(b'-') && b.get(i + 2) == Some(&b'#') => {
                i += 3;
                Kind::Open(Bracket::Metadata)
            }
            b'-' if next == Some(b'>') => {
                i += 2;
                Kind::Arrow
            }
            b'<' | b'>' if next == Some(b'=') => {
                i += 2;
                Kind::Compare
            }
            b'(' | b'[' | b'{' => {
                i += 1;
                Kind::Open(Bracket::of(c))
            }
            b')' | b']' | b'}' => {
                i += 1;
                Kind::Close(Bracket::of(c))
            }
            _ if c.is_ascii_digit() => {
                i = b[i..]
                    .iter()
                    .position(|&x| !is_ident_char(x))
                    .map_or(b.len(), |p| i + p);
                Kind::Number
            }
            _ if c.is_ascii_alphabetic() || c == b'_' => {
                i = b[i..]
                    .iter()
                    .position(|&x| !is_ident_char(x))
                    .map_or(b.len(), |p| i + p);
                Kind::Ident
            }
            _ if c.is_ascii_punctuation() => {
                i += 1;
                Kind::Punct(c)
            }
            _ => {
                let shown = source[i..].chars().next().unwrap_or('?');
                return Err(ParseError::at(
                    source,
                    i,
                    format!("unexpected character {shown:?} outside a string"),
                ));
            }
        };
        let index = tokens.len();
        let mut partner = 0;
        match kind {
            Kind::Open(_) => {
                if open.len() >= MAX_NESTING {
                    return Err(ParseError::at(
                        source,
                        start,
                        format!("brackets nest deeper than {MAX_NESTING} levels"),
                    ));
                }
                open.push(index);
            }
            Kind::Close(bracket) => {
                let Some(opener) = open.pop() else {
                    return Err(ParseError::at(
                        source,
                        start,
                        format!("`{}` closes nothing", bracket.close_text()),
                    ));
                };
                let Kind::Open(opened) = tokens[opener].kind else {
                    unreachable!("only open brackets are pushed")
                };
                if opened != bracket {
                    let (line, column) = crate::error::line_column(source, tokens[opener].start);
                    return Err(ParseError::at(
                        source,
                        start,
                        format!(
                            "`{}` does not close the `{}` opened at {line}:{column}",
                            bracket.close_text(),
                            opened.open_text()
                        ),
                    ));
                }
                tokens[opener].partner = index;
                partner = opener;
            }
            _ => {}
        }
        tokens.push(Token {
            kind,
            start,
            end: i,
            line_start,
            partner,
        });
        line_start = false;
    }
    if let Some(&opener) = open.last() {
        let t = tokens[opener];
        let Kind::Open(bracket) = t.kind else {
            unreachable!("only open brackets are pushed")
        };
        return Err(ParseError::at(
            source,
            t.start,
            format!("this `{}` is never closed", bracket.open_text()),
        ));
    }
    Ok(tokens)
}

/// The byte just past the string literal whose opening quote is at `at`. MLIR strings end on
/// the line they start on; `\` escapes the next character.
fn string_end(source: &str, at: usize) -> Result<usize, ParseError> {
    let b = source.as_bytes();
    let mut i = at + 1;
    while i < b.len() {
        match b[i] {
            b'\\' if i + 1 < b.len() && b[i + 1] != b'\n' => i += 2,
            b'"' => return Ok(i + 1),
            b'\n' => break,
            _ => i += 1,
        }
    }
    Err(ParseError::at(
        source,
        at,
        "this string is not closed on its line",
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(text: &str) -> Vec<(Kind, &str)> {
        tokenize(text)
            .unwrap()
            .iter()
            .map(|t| (t.kind, t.text(text)))
            .collect()
    }

    #[test]
    fn strings_and_comments_hide_their_contents() {
        let text = "loc(\"a/b ) -> \\\" q\":1:2) // ) ( {\n%x";
        let k = kinds(text);
        assert_eq!(
            k,
            [
                (Kind::Ident, "loc"),
                (Kind::Open(Bracket::Paren), "("),
                (Kind::String, "\"a/b ) -> \\\" q\""),
                (Kind::Punct(b':'), ":"),
                (Kind::Number, "1"),
                (Kind::Punct(b':'), ":"),
                (Kind::Number, "2"),
                (Kind::Close(Bracket::Paren), ")"),
                (Kind::Value, "%x"),
            ]
        );
        let tokens = tokenize(text).unwrap();
        assert_eq!(tokens[1].partner, 7);
        assert_eq!(tokens[7].partner, 1);
        assert!(tokens[0].line_start && !tokens[1].line_start && tokens[8].line_start);
    }

    #[test]
    fn sigils_arrows_and_metadata() {
        let k = kinds("%0#1 @\"q s\" @f::@g #map !air.token ^bb0 -> >= {-# x #-}");
        let expected = [
            (Kind::Value, "%0"),
            (Kind::Punct(b'#'), "#"),
            (Kind::Number, "1"),
            (Kind::Symbol, "@\"q s\""),
            (Kind::Symbol, "@f"),
            (Kind::Punct(b':'), ":"),
            (Kind::Punct(b':'), ":"),
            (Kind::Symbol, "@g"),
            (Kind::Alias, "#map"),
            (Kind::Alias, "!air.token"),
            (Kind::Block, "^bb0"),
            (Kind::Arrow, "->"),
            (Kind::Compare, ">="),
            (Kind::Open(Bracket::Metadata), "{-#"),
            (Kind::Ident, "x"),
            (Kind::Close(Bracket::Metadata), "#-}"),
        ];
        assert_eq!(k, expected);
    }

    #[test]
    fn errors_say_where_and_what() {
        let e = tokenize("func.func @k(\n  %a: i32]\n").unwrap_err();
        assert_eq!((e.line, e.column), (2, 10));
        assert!(
            e.message.contains("does not close the `(` opened at 1:13"),
            "{e}"
        );
        let e = tokenize("a\n  \"open\n").unwrap_err();
        assert_eq!((e.line, e.column), (2, 3));
        assert!(e.message.contains("string is not closed"), "{e}");
        let e = tokenize("x }").unwrap_err();
        assert_eq!(e.to_string(), "1:3: `}` closes nothing");
        let e = tokenize("{\n{").unwrap_err();
        assert_eq!(e.to_string(), "2:1: this `{` is never closed");
        let e = tokenize("a ü").unwrap_err();
        assert_eq!((e.line, e.column), (1, 3));
        assert!(e.message.contains("'ü'"), "{e}");
        // Non-ASCII text inside strings and comments is fine.
        assert!(tokenize("\"ü\" // é\n").is_ok());
        let deep = "(".repeat(MAX_NESTING + 1) + &")".repeat(MAX_NESTING + 1);
        assert!(tokenize(&deep).unwrap_err().message.contains("nest deeper"));
        let ok = "(".repeat(MAX_NESTING) + &")".repeat(MAX_NESTING);
        assert!(tokenize(&ok).is_ok());
    }
}
