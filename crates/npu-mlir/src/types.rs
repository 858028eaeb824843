//! Types as printed: kept as text, with tensor and memref types taken apart on demand.

use std::fmt;

/// A type as printed (`memref<*xf32>`, `tensor<32x64xbf16>`, `i32`, `!air.async.token`).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Type<'a>(pub &'a str);

impl fmt::Debug for Type<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Type({})", self.0)
    }
}

impl fmt::Display for Type<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }
}

/// Which shaped type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShapedKind {
    Tensor,
    MemRef,
}

/// One dimension of a ranked shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dim {
    Static(u64),
    /// `?`
    Dynamic,
}

/// A tensor or memref type taken apart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shaped<'a> {
    pub kind: ShapedKind,
    /// The dimensions; `None` for an unranked type (`*`), empty for rank 0.
    pub shape: Option<Vec<Dim>>,
    /// The element type: `f32`, `bf16`, `vector<4xi8>`, `!my.type`.
    pub element: &'a str,
    /// What follows the element type: a memref's layout and memory space, a tensor's
    /// encoding (`strided<[1], offset: ?>, 2`).
    pub rest: Option<&'a str>,
}

impl Shaped<'_> {
    /// The static sizes, when every dimension is static.
    pub fn static_shape(&self) -> Option<Vec<u64>> {
        self.shape
            .as_ref()?
            .iter()
            .map(|d| match d {
                Dim::Static(n) => Some(*n),
                Dim::Dynamic => None,
            })
            .collect()
    }
}

impl<'a> Type<'a> {
    pub fn text(&self) -> &'a str {
        self.0
    }

    /// The tensor or memref type, taken apart; `None` for any other type or one that does not
    /// read as a shaped type.
    pub fn shaped(&self) -> Option<Shaped<'a>> {
        let text = self.0.trim();
        let (kind, inner) = if let Some(rest) = text.strip_prefix("tensor<") {
            (ShapedKind::Tensor, rest)
        } else if let Some(rest) = text.strip_prefix("memref<") {
            (ShapedKind::MemRef, rest)
        } else {
            return None;
        };
        let inner = inner.strip_suffix('>')?;
        let (mut body, rest) = match top_level_comma(inner) {
            Some(at) => (&inner[..at], Some(inner[at + 1..].trim())),
            None => (inner, None),
        };
        body = body.trim();
        let shape = if let Some(after) = body.strip_prefix("*x") {
            body = after;
            None
        } else {
            let mut dims = Vec::new();
            loop {
                let end = body
                    .bytes()
                    .position(|c| !(c.is_ascii_digit() || c == b'?'))
                    .unwrap_or(body.len());
                if end == 0 || body.as_bytes().get(end) != Some(&b'x') {
                    break;
                }
                let dim = &body[..end];
                dims.push(if dim == "?" {
                    Dim::Dynamic
                } else {
                    Dim::Static(dim.parse().ok()?)
                });
                body = &body[end + 1..];
            }
            Some(dims)
        };
        (!body.is_empty()).then_some(Shaped {
            kind,
            shape,
            element: body,
            rest: rest.filter(|r| !r.is_empty()),
        })
    }

    pub fn is_memref(&self) -> bool {
        self.shaped().is_some_and(|s| s.kind == ShapedKind::MemRef)
    }

    pub fn is_tensor(&self) -> bool {
        self.shaped().is_some_and(|s| s.kind == ShapedKind::Tensor)
    }

    /// The element type of a tensor or memref type.
    pub fn element_type(&self) -> Option<&'a str> {
        self.shaped().map(|s| s.element)
    }
}

/// The first `,` of `text` outside brackets (`<…>` included; the `>` of `->` and `>=` are no
/// brackets) and strings.
fn top_level_comma(text: &str) -> Option<usize> {
    let b = text.as_bytes();
    let mut depth = 0i64;
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'"' => {
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
            }
            b'-' if b.get(i + 1) == Some(&b'>') => i += 1,
            b'<' | b'>' if b.get(i + 1) == Some(&b'=') => i += 1,
            b'(' | b'[' | b'{' | b'<' => depth += 1,
            b')' | b']' | b'}' | b'>' => depth -= 1,
            b',' if depth == 0 => return Some(i),
            _ => {}
        }
        i += 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shaped(text: &str) -> Shaped<'_> {
        Type(text).shaped().unwrap()
    }

    #[test]
    fn shapes_and_element_types() {
        let t = shaped("tensor<32x64xbf16>");
        assert_eq!(t.kind, ShapedKind::Tensor);
        assert_eq!(t.shape, Some(vec![Dim::Static(32), Dim::Static(64)]));
        assert_eq!((t.element, t.rest), ("bf16", None));
        assert_eq!(t.static_shape(), Some(vec![32, 64]));

        let m = shaped("memref<4x?xf32, strided<[?, 1], offset: ?>, 2>");
        assert_eq!(m.kind, ShapedKind::MemRef);
        assert_eq!(m.shape, Some(vec![Dim::Static(4), Dim::Dynamic]));
        assert_eq!(m.element, "f32");
        assert_eq!(m.rest, Some("strided<[?, 1], offset: ?>, 2"));
        assert_eq!(m.static_shape(), None);

        let u = shaped("memref<*xi8>");
        assert_eq!((u.shape, u.element), (None, "i8"));
        assert_eq!(shaped("memref<f16>").shape, Some(vec![]));
        assert_eq!(shaped("memref<2xvector<4xi8>>").element, "vector<4xi8>");
        assert_eq!(shaped("tensor<0x4xf32>").static_shape(), Some(vec![0, 4]));
        let mapped = shaped("memref<2xf32, affine_map<(d0) -> (d0 + 1)>>");
        assert_eq!(mapped.rest, Some("affine_map<(d0) -> (d0 + 1)>"));

        assert!(Type("memref<*xf32>").is_memref() && !Type("memref<*xf32>").is_tensor());
        assert_eq!(Type("i32").shaped(), None);
        assert_eq!(Type("memref<4x>").shaped(), None);
        assert_eq!(Type("tensor<99999999999999999999xf32>").shaped(), None);
        assert_eq!(Type("vector<4xf32>").element_type(), None);
    }
}
