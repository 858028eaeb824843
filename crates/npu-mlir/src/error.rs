//! The reader's one error: what is wrong, and where (line and column, both from 1).

/// Why a text could not be read, and where.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{line}:{column}: {message}")]
pub struct ParseError {
    /// Line of the offending character, from 1.
    pub line: usize,
    /// Column (in characters) of the offending character, from 1.
    pub column: usize,
    /// Byte offset of the offending character.
    pub offset: usize,
    pub message: String,
}

impl ParseError {
    /// An error at byte `offset` of `source` (clamped to the text, and moved back to a character
    /// boundary, so that any offset is safe).
    pub(crate) fn at(source: &str, offset: usize, message: impl Into<String>) -> Self {
        let (line, column) = line_column(source, offset);
        ParseError {
            line,
            column,
            offset: offset.min(source.len()),
            message: message.into(),
        }
    }
}

/// Line and column (both from 1, the column in characters) of byte `offset` in `source`.
pub fn line_column(source: &str, offset: usize) -> (usize, usize) {
    let mut end = offset.min(source.len());
    while !source.is_char_boundary(end) {
        end -= 1;
    }
    let before = &source[..end];
    let line = before.bytes().filter(|&b| b == b'\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    (line, before[line_start..].chars().count() + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_count_characters_from_one() {
        assert_eq!(line_column("abc", 0), (1, 1));
        assert_eq!(line_column("ab\ncd", 4), (2, 2));
        assert_eq!(line_column("ü\nxé!", 6), (2, 3));
        // Past the end or inside a character: clamped, never a panic.
        assert_eq!(line_column("ab", 99), (1, 3));
        assert_eq!(line_column("é", 1), (1, 1));
        let e = ParseError::at("a\n  )", 4, "unexpected `)`");
        assert_eq!(e.to_string(), "2:3: unexpected `)`");
    }
}
