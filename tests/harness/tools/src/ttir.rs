//! Reading the TTIR Triton's frontend prints: the kernel function, its parameters and its
//! operations (with their operands, attributes, result types and regions), one op per line as
//! Triton prints them. What the kernel computes is derived from this by
//! [`crate::meaning`]; the Linalg the stand-in prints, by [`crate::linalg`].

use std::collections::HashMap;

/// A kernel parameter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Param {
    /// The SSA name, e.g. `%x_ptr` or `%arg0`.
    pub ssa: String,
    /// The type, e.g. `!tt.ptr<f32>` or `i32`.
    pub ty: String,
    /// The argument attributes, e.g. `{tt.divisibility = 16 : i32}`.
    pub attrs: Option<String>,
}

impl Param {
    /// The element type of a pointer parameter.
    pub fn pointee(&self) -> Option<&str> {
        self.ty
            .strip_prefix("!tt.ptr<")
            .and_then(|t| t.strip_suffix('>'))
            .map(|t| t.split(',').next().unwrap_or(t).trim())
    }
}

/// A TTIR type: a scalar or a tensor of scalars or pointers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TType {
    /// `[]` for a scalar.
    pub shape: Vec<u32>,
    /// The element type name (`f32`, `i1`, …); for pointers, the pointee.
    pub elem: String,
    pub pointer: bool,
}

impl TType {
    /// Reads `tensor<4x64xf32>`, `tensor<4x!tt.ptr<f32>>`, `!tt.ptr<bf16>`, `i32`.
    pub fn parse(text: &str) -> Option<TType> {
        let text = text.trim();
        if let Some(inner) = text
            .strip_prefix("tensor<")
            .and_then(|t| t.strip_suffix('>'))
        {
            let mut shape = Vec::new();
            let mut rest = inner;
            while let Some((dim, tail)) = rest.split_once('x') {
                match dim.parse::<u32>() {
                    Ok(d) => {
                        shape.push(d);
                        rest = tail;
                    }
                    Err(_) => break,
                }
            }
            let elem = TType::parse(rest)?;
            return Some(TType { shape, ..elem });
        }
        if let Some(p) = text
            .strip_prefix("!tt.ptr<")
            .and_then(|t| t.strip_suffix('>'))
        {
            return Some(TType {
                shape: vec![],
                elem: p.split(',').next().unwrap_or(p).trim().to_owned(),
                pointer: true,
            });
        }
        let scalar = text.starts_with('f') || text.starts_with('i') || text.starts_with("bf");
        (scalar && text.chars().all(|c| c.is_ascii_alphanumeric())).then(|| TType {
            shape: vec![],
            elem: text.to_owned(),
            pointer: false,
        })
    }

    pub fn numel(&self) -> u64 {
        self.shape.iter().map(|d| u64::from(*d)).product()
    }

    /// The MLIR spelling of the tensor (or scalar) type of the data.
    pub fn tensor(&self) -> String {
        if self.shape.is_empty() {
            self.elem.clone()
        } else {
            let dims: Vec<String> = self.shape.iter().map(u32::to_string).collect();
            format!("tensor<{}x{}>", dims.join("x"), self.elem)
        }
    }
}

/// One TTIR operation.
#[derive(Debug, Clone, PartialEq)]
pub struct TOp {
    /// Result names (`%a`, or `%a#0`, `%a#1` for `%a:2`).
    pub results: Vec<String>,
    /// `tt.load`, `arith.addf`, `tt.reduce`, …
    pub name: String,
    /// SSA operands in order.
    pub operands: Vec<String>,
    /// The text between the operands and the types: attributes, predicates (`slt`), `x`, …
    pub body: String,
    /// The type text after the top-level ` : `.
    pub types: String,
    /// The ops of its region (`tt.reduce`'s combiner, a loop's body), if it has one.
    pub region: Option<Vec<TOp>>,
    /// The location text (`loc(#loc5)`), if printed.
    pub loc: Option<String>,
}

impl TOp {
    /// The result type: the type after `->`, after ` to `, or the (last) type printed.
    pub fn result_type(&self) -> Option<TType> {
        let t = self.types.trim();
        let last = if let Some(i) = find_top(t, "->") {
            &t[i + 2..]
        } else if let Some(i) = find_top(t, " to ") {
            &t[i + 4..]
        } else {
            split_top(t, ',').into_iter().last().unwrap_or(t)
        };
        let t = TType::parse(last.trim())?;
        // Comparisons print their operands' type; the result is i1 of that shape.
        Some(if self.name == "arith.cmpi" || self.name == "arith.cmpf" {
            TType {
                elem: "i1".into(),
                ..t
            }
        } else {
            t
        })
    }

    /// The types of the operands as printed (`a, b` or `(a) -> r` or `a * b -> c`).
    pub fn operand_types(&self) -> Vec<TType> {
        let t = self.types.trim();
        let ins = match find_top(t, "->") {
            Some(i) => &t[..i],
            None => match find_top(t, " to ") {
                Some(i) => &t[..i],
                None => t,
            },
        };
        let ins = ins.trim().trim_start_matches('(').trim_end_matches(')');
        ins.split([',', '*'])
            .filter_map(|s| TType::parse(s.trim()))
            .collect()
    }

    /// An integer attribute `name = N` in the op's body.
    pub fn int_attr(&self, name: &str) -> Option<i64> {
        let key = format!("{name} = ");
        let at = self.body.find(&key)? + key.len();
        let digits: String = self.body[at..]
            .chars()
            .take_while(|c| c.is_ascii_digit() || *c == '-')
            .collect();
        digits.parse().ok()
    }

    /// An `array<i32: 1, 0>` attribute `name = array<…>`.
    pub fn array_attr(&self, name: &str) -> Option<Vec<u32>> {
        let key = format!("{name} = array<i32:");
        let at = self.body.find(&key)? + key.len();
        let end = self.body[at..].find('>')? + at;
        self.body[at..end]
            .split(',')
            .map(|v| v.trim().parse().ok())
            .collect()
    }
}

/// What the stand-in triton-shared-opt read from a TTIR module.
#[derive(Debug, Clone, PartialEq)]
pub struct Kernel {
    pub name: String,
    pub params: Vec<Param>,
    /// The parameters' locations, in order (`loc("x_ptr"(#loc))`).
    pub param_locs: Vec<Option<String>>,
    pub ops: Vec<TOp>,
    /// The `#locN = loc(…)` definitions printed before the module, in order.
    pub locs_before: Vec<String>,
    /// … and after it.
    pub locs_after: Vec<String>,
}

impl Kernel {
    pub fn pointer_params(&self) -> impl Iterator<Item = &Param> {
        self.params.iter().filter(|p| p.pointee().is_some())
    }

    /// The op defining each SSA name.
    pub fn defs(&self) -> HashMap<&str, &TOp> {
        let mut defs = HashMap::new();
        for op in &self.ops {
            for r in &op.results {
                defs.insert(r.as_str(), op);
            }
        }
        defs
    }
}

/// Reads the first public `tt.func` (else the first `tt.func`) of a TTIR module.
pub fn parse(ttir: &str) -> Result<Kernel, String> {
    let func_at = ttir
        .find("tt.func public @")
        .or_else(|| ttir.find("tt.func @"))
        .or_else(|| ttir.find("tt.func private @"))
        .ok_or("expected a Triton module (no tt.func found)")?;
    let header = &ttir[func_at..];
    let at = header.find('@').ok_or("malformed tt.func")?;
    let name: String = header[at + 1..]
        .chars()
        .take_while(|c| *c != '(' && !c.is_whitespace())
        .collect();
    let open = at
        + header[at..]
            .find('(')
            .ok_or("malformed tt.func signature")?;
    let close = matching(header, open).ok_or("unterminated tt.func signature")?;
    let mut params = Vec::new();
    let mut param_locs = Vec::new();
    for text in split_top(&header[open + 1..close], ',') {
        if text.trim().is_empty() {
            continue;
        }
        let (param, loc) = parse_param(text)?;
        params.push(param);
        param_locs.push(loc);
    }
    let rest = &header[close + 1..];
    let body_open = rest.find('{').ok_or("tt.func without a body")?;
    // Skip the attribute dictionary (`attributes {noinline = false}`) before the body.
    let body_open = if rest[..body_open].trim_end().ends_with("attributes") {
        let dict_end = matching(rest, body_open).ok_or("unterminated attributes")?;
        dict_end
            + 1
            + rest[dict_end + 1..]
                .find('{')
                .ok_or("tt.func without a body")?
    } else {
        body_open
    };
    let body_close = matching_brace(rest, body_open).ok_or("unterminated tt.func body")?;
    let lines: Vec<&str> = rest[body_open + 1..body_close].lines().collect();
    let (ops, _) = parse_ops(&lines, 0)?;
    let module_line = ttir
        .lines()
        .position(|l| l.starts_with("module"))
        .unwrap_or(0);
    let (mut locs_before, mut locs_after) = (Vec::new(), Vec::new());
    for (i, l) in ttir.lines().enumerate() {
        if l.starts_with("#loc") {
            let list = if i < module_line {
                &mut locs_before
            } else {
                &mut locs_after
            };
            list.push(l.trim().to_owned());
        }
    }
    Ok(Kernel {
        name,
        params,
        param_locs,
        ops,
        locs_before,
        locs_after,
    })
}

fn parse_param(text: &str) -> Result<(Param, Option<String>), String> {
    let text = text.trim();
    let (bare, loc) = split_loc(text);
    let (ssa, rest) = bare
        .split_once(':')
        .ok_or_else(|| format!("malformed parameter {text:?}"))?;
    let rest = rest.trim();
    let ty_end = top_level_space(rest).unwrap_or(rest.len());
    let attrs = rest[ty_end..].trim();
    Ok((
        Param {
            ssa: ssa.trim().to_owned(),
            ty: rest[..ty_end].to_owned(),
            attrs: (!attrs.is_empty()).then(|| attrs.to_owned()),
        },
        loc,
    ))
}

/// Parses ops from `lines[from..]` until a line closing the enclosing region (`}` or `})`);
/// returns the ops and the index of that closing line (or `lines.len()`).
fn parse_ops(lines: &[&str], from: usize) -> Result<(Vec<TOp>, usize), String> {
    let mut ops = Vec::new();
    let mut i = from;
    while i < lines.len() {
        let raw = lines[i].trim();
        if raw.starts_with('}') {
            return Ok((ops, i));
        }
        if raw.is_empty() || raw.starts_with('^') || raw.starts_with("//") {
            i += 1;
            continue;
        }
        let (line, loc) = split_loc(raw);
        if line.ends_with('{') && depth_at(line, line.len()) > 0 {
            // An op with a region: its body follows; the closing line carries the rest
            // (`}) : (tensor<…>) -> f32`).
            let (region, close) = parse_ops(lines, i + 1)?;
            let closing = lines.get(close).map_or("}", |l| l.trim());
            let (after, close_loc) = split_loc(
                closing
                    .trim_start_matches('}')
                    .trim_start_matches(')')
                    .trim(),
            );
            let head = line.trim_end_matches('{').trim_end().trim_end_matches('(');
            let mut op = parse_op(&format!("{head} {after}"))?;
            op.region = Some(region);
            op.loc = close_loc.or(loc);
            ops.push(op);
            i = close + 1;
            continue;
        }
        let mut op = parse_op(line)?;
        op.loc = loc;
        ops.push(op);
        i += 1;
    }
    Ok((ops, i))
}

fn parse_op(line: &str) -> Result<TOp, String> {
    let (results, rhs) = match line.find(" = ") {
        Some(eq) if line.starts_with('%') => (result_names(&line[..eq]), line[eq + 3..].trim()),
        _ => (vec![], line.trim()),
    };
    let (name, rest) = op_name(rhs);
    let (operand_part, types) = match find_top(rest, " : ") {
        Some(i) => (&rest[..i], rest[i + 3..].trim()),
        None => (rest, ""),
    };
    // Operands are the SSA names outside attribute dictionaries.
    let operands = ssa_names(&strip_dicts(operand_part));
    Ok(TOp {
        results,
        name: name.to_owned(),
        operands,
        body: operand_part.trim().to_owned(),
        types: types.to_owned(),
        region: None,
        loc: None,
    })
}

/// `text` without its `{…}` and `<{…}>` dictionaries.
fn strip_dicts(text: &str) -> String {
    let mut out = String::new();
    let mut depth = 0;
    for c in text.chars() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            _ if depth == 0 => out.push(c),
            _ => {}
        }
    }
    out
}

/// `%a` → [%a]; `%a:2` → [%a#0, %a#1]; `%a, %b` → [%a, %b].
fn result_names(lhs: &str) -> Vec<String> {
    let mut out = Vec::new();
    for part in lhs.split(',') {
        let part = part.trim();
        match part.split_once(':') {
            Some((name, n)) => {
                let n: usize = n.trim().parse().unwrap_or(1);
                out.extend((0..n).map(|i| format!("{name}#{i}")));
            }
            None => out.push(part.to_owned()),
        }
    }
    out
}

/// Splits `op rest` (or the generic `"op"(…)` form).
fn op_name(rhs: &str) -> (&str, &str) {
    if let Some(q) = rhs.strip_prefix('"')
        && let Some(end) = q.find('"')
    {
        return (&q[..end], &q[end + 1..]);
    }
    let end = rhs
        .find(|c: char| c.is_whitespace() || c == '(')
        .unwrap_or(rhs.len());
    (&rhs[..end], &rhs[end..])
}

fn ssa_names(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'"' {
            i = skip_quoted(bytes, i);
            continue;
        }
        if bytes[i] == b'%' {
            let start = i;
            i += 1;
            while i < bytes.len()
                && (bytes[i].is_ascii_alphanumeric() || b"_.$-#".contains(&bytes[i]))
            {
                i += 1;
            }
            out.push(text[start..i].to_owned());
        } else {
            i += 1;
        }
    }
    out
}

fn skip_quoted(b: &[u8], at: usize) -> usize {
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

/// Splits a trailing top-level `loc(...)` off a line.
pub fn split_loc(line: &str) -> (&str, Option<String>) {
    let mut cut = None;
    let mut from = 0;
    while let Some(i) = line[from..].find("loc(") {
        let at = from + i;
        let word_start = at == 0 || !line.as_bytes()[at - 1].is_ascii_alphanumeric();
        if word_start && depth_at(line, at) == 0 {
            cut = Some(at);
        }
        from = at + 4;
    }
    match cut {
        Some(at) => (line[..at].trim_end(), Some(line[at..].trim().to_owned())),
        None => (line, None),
    }
}

/// Bracket depth just before byte `at` (quotes respected; `->` is not a bracket).
fn depth_at(s: &str, at: usize) -> i32 {
    let mut depth = 0;
    let mut in_str = false;
    let mut prev = '\0';
    for (i, c) in s.char_indices() {
        if i >= at {
            break;
        }
        if in_str {
            if c == '"' && prev != '\\' {
                in_str = false;
            }
        } else {
            match c {
                '"' => in_str = true,
                '(' | '[' | '{' | '<' => depth += 1,
                '>' if prev == '-' => {}
                ')' | ']' | '}' | '>' => depth -= 1,
                _ => {}
            }
        }
        prev = c;
    }
    depth
}

fn find_top(s: &str, pat: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(i) = s[from..].find(pat) {
        let at = from + i;
        if depth_at(s, at) == 0 {
            return Some(at);
        }
        from = at + 1;
    }
    None
}

fn top_level_space(s: &str) -> Option<usize> {
    s.char_indices()
        .find(|(i, c)| c.is_whitespace() && depth_at(s, *i) == 0)
        .map(|(i, _)| i)
}

fn split_top(s: &str, sep: char) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut start = 0;
    for (i, c) in s.char_indices() {
        if c == sep && depth_at(s, i) == 0 {
            parts.push(&s[start..i]);
            start = i + c.len_utf8();
        }
    }
    parts.push(&s[start..]);
    parts
}

/// The index of the `)` closing the `(` at `open`.
fn matching(s: &str, open: usize) -> Option<usize> {
    let target = depth_at(s, open);
    s.char_indices()
        .skip_while(|(i, _)| *i <= open)
        .find(|(i, c)| matches!(c, ')' | '}') && depth_at(s, *i) == target + 1)
        .map(|(i, _)| i)
}

/// The `}` closing the `{` at `open`, counting only braces (bodies hold `<`/`>` freely, e.g.
/// `arith.cmpi slt`-free text but `->` in types).
fn matching_brace(s: &str, open: usize) -> Option<usize> {
    let b = s.as_bytes();
    let mut depth = 0;
    let mut i = open;
    while i < b.len() {
        match b[i] {
            b'"' => {
                i = skip_quoted(b, i);
                continue;
            }
            b'{' => depth += 1,
            b'}' => {
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

#[cfg(test)]
mod tests {
    use super::*;

    const REDUCE: &str = r#"module {
  tt.func public @k(%x_ptr: !tt.ptr<f32> {tt.divisibility = 16 : i32} loc("x_ptr"(#loc)), %n: i32 loc("n"(#loc))) attributes {noinline = false} {
    %r = tt.make_range {end = 4 : i32, start = 0 : i32} : tensor<4xi32> loc(#loc1)
    %p = tt.splat %x_ptr : !tt.ptr<f32> -> tensor<4x!tt.ptr<f32>> loc(#loc2)
    %a = tt.addptr %p, %r : tensor<4x!tt.ptr<f32>>, tensor<4xi32> loc(#loc2)
    %x = tt.load %a : tensor<4x!tt.ptr<f32>> loc(#loc3)
    %s = "tt.reduce"(%x) <{axis = 0 : i32}> ({
    ^bb0(%s_1: f32 loc(callsite(#loc9 at #loc31)), %s_2: f32 loc(callsite(#loc9 at #loc31))):
      %s_3 = arith.addf %s_1, %s_2 : f32 loc(#loc39)
      tt.reduce.return %s_3 : f32 loc(#loc35)
    }) : (tensor<4xf32>) -> f32 loc(#loc35)
    %c = arith.cmpi slt, %r, %r : tensor<4xi32> loc(#loc4)
    tt.store %x_ptr, %s : !tt.ptr<f32> loc(#loc5)
    tt.return loc(#loc)
  } loc(#loc)
} loc(#loc)
#loc = loc("/tmp/k.py":1:1)
"#;

    #[test]
    fn reads_ops_regions_and_types() {
        let k = parse(REDUCE).unwrap();
        assert_eq!(k.name, "k");
        assert_eq!(k.params.len(), 2);
        assert_eq!(k.params[0].pointee(), Some("f32"));
        assert_eq!(
            k.params[0].attrs.as_deref(),
            Some("{tt.divisibility = 16 : i32}")
        );
        assert_eq!(k.param_locs[1].as_deref(), Some("loc(\"n\"(#loc))"));
        let names: Vec<&str> = k.ops.iter().map(|o| o.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "tt.make_range",
                "tt.splat",
                "tt.addptr",
                "tt.load",
                "tt.reduce",
                "arith.cmpi",
                "tt.store",
                "tt.return"
            ]
        );
        let reduce = &k.ops[4];
        assert_eq!(reduce.operands, ["%x"]);
        assert_eq!(reduce.int_attr("axis"), Some(0));
        assert_eq!(
            reduce.result_type(),
            Some(TType {
                shape: vec![],
                elem: "f32".into(),
                pointer: false
            })
        );
        let region = reduce.region.as_ref().unwrap();
        assert_eq!(region[0].name, "arith.addf");
        assert_eq!(region[1].name, "tt.reduce.return");
        assert_eq!(reduce.loc.as_deref(), Some("loc(#loc35)"));
        assert_eq!(k.ops[0].int_attr("end"), Some(4));
        assert_eq!(k.ops[5].operands, ["%r", "%r"]);
        assert_eq!(k.ops[5].body, "slt, %r, %r");
        assert_eq!(k.ops[1].result_type().unwrap().tensor(), "tensor<4xf32>");
        assert!(k.ops[1].result_type().unwrap().pointer);
        assert!(k.locs_before.is_empty());
        assert_eq!(k.locs_after, ["#loc = loc(\"/tmp/k.py\":1:1)"]);
    }

    #[test]
    fn types() {
        let t = TType::parse("tensor<4x64x!tt.ptr<bf16>>").unwrap();
        assert_eq!(
            (t.shape.as_slice(), t.elem.as_str(), t.pointer),
            (&[4, 64][..], "bf16", true)
        );
        assert_eq!(TType::parse("i1").unwrap().shape, Vec::<u32>::new());
        assert_eq!(TType::parse("tensor<8xi64>").unwrap().numel(), 8);
        assert_eq!(TType::parse("memref<4xf32>"), None);
        let op = parse_op("%d = tt.dot %a, %b, %c, inputPrecision = tf32 : tensor<4x8xbf16> * tensor<8x2xbf16> -> tensor<4x2xf32>").unwrap();
        assert_eq!(op.operands, ["%a", "%b", "%c"]);
        assert_eq!(op.result_type().unwrap().tensor(), "tensor<4x2xf32>");
        assert_eq!(op.operand_types().len(), 2);
        let cast = parse_op("%t = arith.truncf %s : tensor<4xf32> to tensor<4xbf16>").unwrap();
        assert_eq!(cast.result_type().unwrap().elem, "bf16");
        let trans = parse_op(
            "%t = tt.trans %x {order = array<i32: 1, 0>} : tensor<4x8xf32> -> tensor<8x4xf32>",
        )
        .unwrap();
        assert_eq!(trans.array_attr("order"), Some(vec![1, 0]));
        assert_eq!(result_names("%a:2"), ["%a#0", "%a#1"]);
        assert_eq!(
            split_loc(r#"%x: !tt.ptr<f32> loc("x"(#loc))"#),
            ("%x: !tt.ptr<f32>", Some(r#"loc("x"(#loc))"#.to_owned()))
        );
    }
}
