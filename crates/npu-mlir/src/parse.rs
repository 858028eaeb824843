//! From tokens to a module: top-level items, operations with their regions, and function
//! signatures.
//!
//! The parser knows MLIR's generic structure, not its dialects' grammars. An operation is
//! `[results =] name …` up to the end of its line (outside brackets: a region's lines belong
//! to the operation that opens it), as MLIR prints one per line; a line that starts with `->`,
//! `:`, `,`, `=` or a bracket continues the previous one. Within an operation:
//!
//! * a `{` followed by a line break is a region (MLIR prints an attribute dictionary on one
//!   line, a region over several); after the keyword `attributes` it is always a dictionary;
//! * `ins(… : …)` and `outs(… : …)` are typed operand lists (linalg's syntax, also used by
//!   other structured ops);
//! * `%x = …` pairs, and `(…)` lists followed by `in`, `=` or a region, after the name bind
//!   region arguments in the op's header (`scf.for %i = …`, `air.launch (%x) in (%n=%c)`,
//!   `args(%a=%b)`, `linalg.reduce … (%in: f32, %init: f32) {`): those names are
//!   *bindings*, every other `%x` outside regions an operand;
//! * a final `loc(…)` is the op's location.
//!
//! `func.func` and `module` are read by their grammar: name, visibility, parameters with their
//! types, attribute dictionaries and locations, result types, attributes, body.

use std::ops::Range;

use crate::error::ParseError;
use crate::lex::{self, Bracket, Kind, Token};
use crate::types::Type;

/// A module read from text: the `module` op (or an implicit module, when the text is a bare
/// list of operations) and what surrounds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Module<'a> {
    /// The whole text.
    pub source: &'a str,
    /// Alias definitions before or after the module (`#map = …`, `!t = …`, and the
    /// `#loc3 = loc(…)` lines of `--mlir-print-debuginfo`), in order.
    pub aliases: Vec<AliasDef<'a>>,
    /// File-level metadata (`{-# … #-}`, e.g. dense resources), braces included.
    pub metadata: Option<&'a str>,
    /// Whether a `module` op holds the operations (false: the text is an implicit module).
    pub explicit: bool,
    /// The module's `@name`, if any.
    pub name: Option<&'a str>,
    /// The module's attribute dictionary (braces included), if any.
    pub attributes: Option<&'a str>,
    /// The module's location, `loc(…)` included.
    pub location: Option<&'a str>,
    /// The operations in the module's body, in order.
    pub ops: Vec<Op<'a>>,
}

/// `#name = value` (or `!name = value`) at the top level.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AliasDef<'a> {
    /// With its sigil: `#map`, `#loc3`, `!t`.
    pub name: &'a str,
    /// What follows `=`.
    pub value: &'a str,
    /// The whole definition.
    pub text: &'a str,
}

/// An SSA name where it occurs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Value<'a> {
    /// With its `%`.
    pub name: &'a str,
    /// Byte offset in the module's text.
    pub offset: usize,
}

/// An operand of an `ins(…)`/`outs(…)` list with its type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Typed<'a> {
    pub value: &'a str,
    /// `None` when the list has fewer types than values.
    pub ty: Option<Type<'a>>,
}

/// One operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Op<'a> {
    /// The whole operation, regions and location included.
    pub text: &'a str,
    /// Where `text` lies in the module's text.
    pub span: Range<usize>,
    /// Result names (`%0`; a result group `%0:2` gives `%0`).
    pub results: Vec<&'a str>,
    /// `linalg.matmul`, `func.func`, `return`; a generic op's quoted name without its quotes.
    pub name: &'a str,
    /// The text after the name, up to the location (trimmed).
    pub rest: &'a str,
    /// SSA values the op uses, in order, outside its regions.
    pub operands: Vec<Value<'a>>,
    /// SSA names the op's header binds for its regions (see the module docs).
    pub bindings: Vec<Value<'a>>,
    /// `ins(…)` operands.
    pub ins: Vec<Typed<'a>>,
    /// `outs(…)` operands.
    pub outs: Vec<Typed<'a>>,
    pub regions: Vec<Region<'a>>,
    /// The trailing `loc(…)`, if any.
    pub location: Option<&'a str>,
    /// For `func.func`: its signature (its body is `regions[0]`).
    pub signature: Option<Box<Signature<'a>>>,
}

/// A region: its blocks, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Region<'a> {
    /// From `{` to `}`, both included.
    pub span: Range<usize>,
    /// Between the braces.
    pub inner: Range<usize>,
    /// The blocks; empty for an empty region.
    pub blocks: Vec<Block<'a>>,
}

/// A block: its label (none for an entry block printed without one), arguments and ops.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Block<'a> {
    /// `^bb1`
    pub label: Option<&'a str>,
    pub arguments: Vec<Param<'a>>,
    pub ops: Vec<Op<'a>>,
}

/// A parameter (of a function or block) or a result type of a function.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Param<'a> {
    /// `%arg0`; `None` in a declaration's signature and for results.
    pub value: Option<&'a str>,
    pub ty: Type<'a>,
    /// The attribute dictionary, braces included.
    pub attributes: Option<&'a str>,
    /// `loc(…)`
    pub location: Option<&'a str>,
}

impl Param<'_> {
    /// A buffer parameter: a memref (Triton's pointers after triton-shared).
    pub fn is_buffer(&self) -> bool {
        self.ty.is_memref()
    }
}

/// The signature of a `func.func`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signature<'a> {
    /// Without the `@` (and without quotes for a quoted name).
    pub name: &'a str,
    /// `private`, `public`, `nested`; `None` when not printed (public).
    pub visibility: Option<&'a str>,
    pub params: Vec<Param<'a>>,
    /// The result types (empty when the function returns nothing).
    pub results: Vec<Param<'a>>,
    /// The `attributes {…}` dictionary, braces included.
    pub attributes: Option<&'a str>,
}

/// A `func.func` operation: its op and its signature.
#[derive(Debug, Clone, Copy)]
pub struct Func<'m, 'a> {
    pub op: &'m Op<'a>,
    pub signature: &'m Signature<'a>,
}

impl<'m, 'a> Func<'m, 'a> {
    pub fn name(&self) -> &'a str {
        self.signature.name
    }
    pub fn params(&self) -> &'m [Param<'a>] {
        &self.signature.params
    }
    /// The body; `None` for a declaration.
    pub fn body(&self) -> Option<&'m Region<'a>> {
        self.op.regions.first()
    }
    /// The buffer parameters (memrefs), in order.
    pub fn buffers(&self) -> impl Iterator<Item = &'m Param<'a>> + use<'m, 'a> {
        self.signature.params.iter().filter(|p| p.is_buffer())
    }
}

impl<'a> Op<'a> {
    /// The function this op defines, if it is a `func.func`.
    pub fn function(&self) -> Option<Func<'_, 'a>> {
        self.signature.as_deref().map(|signature| Func {
            op: self,
            signature,
        })
    }
    /// Whether this op is a (nested) `module`.
    pub fn is_module(&self) -> bool {
        matches!(self.name, "module" | "builtin.module")
    }
    /// This op and every op nested in it, in textual order.
    pub fn walk(&self) -> Walk<'_, 'a> {
        Walk {
            stack: vec![std::slice::from_ref(self).iter()],
        }
    }
}

impl<'a> Region<'a> {
    /// The ops of every block, in order (not nested ones).
    pub fn ops(&self) -> impl Iterator<Item = &Op<'a>> {
        self.blocks.iter().flat_map(|b| b.ops.iter())
    }
}

/// Depth-first, textual-order iteration over ops and the ops nested in their regions.
pub struct Walk<'m, 'a> {
    stack: Vec<std::slice::Iter<'m, Op<'a>>>,
}

impl<'m, 'a> Iterator for Walk<'m, 'a> {
    type Item = &'m Op<'a>;
    fn next(&mut self) -> Option<&'m Op<'a>> {
        loop {
            let top = self.stack.last_mut()?;
            let Some(op) = top.next() else {
                self.stack.pop();
                continue;
            };
            // Push nested blocks last-first so that they come out in order.
            for region in op.regions.iter().rev() {
                for block in region.blocks.iter().rev() {
                    self.stack.push(block.ops.iter());
                }
            }
            return Some(op);
        }
    }
}

impl<'a> Module<'a> {
    /// Reads `source`. Every error says where (line:column) and what.
    pub fn parse(source: &'a str) -> Result<Module<'a>, ParseError> {
        let tokens = lex::tokenize(source)?;
        Parser {
            src: source,
            t: &tokens,
        }
        .module()
    }

    /// The module's functions (top level), in order.
    pub fn functions(&self) -> impl Iterator<Item = Func<'_, 'a>> {
        self.ops.iter().filter_map(Op::function)
    }

    /// The function named `name` (without `@`).
    pub fn function(&self, name: &str) -> Option<Func<'_, 'a>> {
        self.functions().find(|f| f.name() == name)
    }

    /// The kernel: the first function with a body (triton-shared emits one).
    pub fn kernel(&self) -> Option<Func<'_, 'a>> {
        self.functions().find(|f| f.body().is_some())
    }

    /// Every op of the module, nested ones included, in textual order.
    pub fn walk(&self) -> Walk<'_, 'a> {
        Walk {
            stack: vec![self.ops.iter()],
        }
    }
}

struct Parser<'s, 'a> {
    src: &'a str,
    t: &'s [Token],
}

/// Token index ranges.
type Span = (usize, usize);

impl<'a> Parser<'_, 'a> {
    /// An error at token `token` of a construct that ends before token `hi`: at the end of
    /// the construct's last token when `token` is past it.
    fn err(&self, token: usize, hi: usize, message: impl Into<String>) -> ParseError {
        let offset = if token < hi {
            self.t[token].start
        } else {
            hi.checked_sub(1)
                .and_then(|last| self.t.get(last))
                .map_or(self.src.len(), |t| t.end)
        };
        ParseError::at(self.src, offset, message)
    }

    /// Source text of tokens `lo..hi` (non-empty range).
    fn text(&self, lo: usize, hi: usize) -> &'a str {
        &self.src[self.t[lo].start..self.t[hi - 1].end]
    }

    fn tok(&self, i: usize) -> &'a str {
        self.t[i].text(self.src)
    }

    fn is_ident(&self, i: usize, hi: usize, word: &str) -> bool {
        i < hi && self.t[i].kind == Kind::Ident && self.tok(i) == word
    }

    fn is_open(&self, i: usize, hi: usize, b: Bracket) -> bool {
        i < hi && self.t[i].is_open(b)
    }

    /// Indices of tokens `lo..hi` outside nested groups (a group's opening bracket stands
    /// for the group).
    fn top(&self, lo: usize, hi: usize) -> impl Iterator<Item = usize> + '_ {
        std::iter::successors((lo < hi).then_some(lo), move |&i| {
            let next = self.skip(i);
            (next < hi).then_some(next)
        })
    }

    /// The index just past token `i`, or past its group when it opens one.
    fn skip(&self, i: usize) -> usize {
        match self.t[i].kind {
            Kind::Open(_) => self.t[i].partner + 1,
            _ => i + 1,
        }
    }

    fn module(&self) -> Result<Module<'a>, ParseError> {
        let mut module = Module {
            source: self.src,
            aliases: Vec::new(),
            metadata: None,
            explicit: false,
            name: None,
            attributes: None,
            location: None,
            ops: Vec::new(),
        };
        let mut op_lines = Vec::new();
        for (lo, hi) in self.lines(0, self.t.len()) {
            let first = self.t[lo];
            if first.kind == Kind::Alias && lo + 1 < hi && self.t[lo + 1].is_punct(b'=') {
                if lo + 2 == hi {
                    return Err(self.err(lo + 1, hi, "expected a value after `=`"));
                }
                module.aliases.push(AliasDef {
                    name: self.tok(lo),
                    value: self.text(lo + 2, hi),
                    text: self.text(lo, hi),
                });
            } else if first.is_open(Bracket::Metadata) {
                if module.metadata.is_some() {
                    return Err(self.err(lo, hi, "a second file-metadata block `{-# … #-}`"));
                }
                if first.partner + 1 != hi {
                    return Err(self.err(first.partner + 1, hi, "unexpected text after `#-}`"));
                }
                module.metadata = Some(self.text(lo, hi));
            } else {
                module.ops.push(self.op(lo, hi)?);
                op_lines.push((lo, hi));
            }
        }
        if let ([op], [(lo, hi)]) = (module.ops.as_slice(), op_lines.as_slice())
            && op.is_module()
        {
            let (name, attributes) = self.module_header(*lo, *hi);
            let mut op = module.ops.pop().expect("one op");
            module.explicit = true;
            module.name = name;
            module.attributes = attributes;
            module.location = op.location;
            if let Some(body) = op.regions.pop() {
                module.ops = body.blocks.into_iter().flat_map(|b| b.ops).collect();
            }
        }
        Ok(module)
    }

    /// The `@name` and attribute dictionary of the `module` op whose name is token `at`.
    fn module_header(&self, at: usize, hi: usize) -> (Option<&'a str>, Option<&'a str>) {
        let mut i = at + 1;
        let mut name = None;
        if i < hi && self.t[i].kind == Kind::Symbol {
            name = Some(self.tok(i));
            i += 1;
        }
        let attributes = (self.is_ident(i, hi, "attributes")
            && self.is_open(i + 1, hi, Bracket::Brace))
        .then(|| self.text(i + 1, self.t[i + 1].partner + 1));
        (name, attributes)
    }

    /// Splits tokens `lo..hi` into items: one per line, a bracket group continuing its line.
    fn lines(&self, lo: usize, hi: usize) -> Vec<Span> {
        let mut out = Vec::new();
        let mut start = lo;
        let mut i = lo;
        while i < hi {
            let t = self.t[i];
            let continues = matches!(
                t.kind,
                Kind::Arrow
                    | Kind::Punct(b':' | b',' | b'=')
                    | Kind::Open(Bracket::Paren | Bracket::Square | Bracket::Brace)
            );
            if t.line_start && i > start && !continues {
                out.push((start, i));
                start = i;
            }
            i = self.skip(i).min(hi);
        }
        if start < hi {
            out.push((start, hi));
        }
        out
    }

    fn op(&self, lo: usize, hi: usize) -> Result<Op<'a>, ParseError> {
        let mut i = lo;
        let mut results = Vec::new();
        if self.t[i].kind == Kind::Value {
            loop {
                results.push(self.tok(i));
                i += 1;
                // `%0:2`: a result group.
                if i + 1 < hi && self.t[i].is_punct(b':') && self.t[i + 1].kind == Kind::Number {
                    i += 2;
                }
                if i + 1 < hi && self.t[i].is_punct(b',') && self.t[i + 1].kind == Kind::Value {
                    i += 1;
                    continue;
                }
                break;
            }
            if !(i < hi && self.t[i].is_punct(b'=')) {
                return Err(self.err(i, hi, "expected `=` after the operation's results"));
            }
            i += 1;
        }
        let name = match self.t.get(i).filter(|_| i < hi).map(|t| t.kind) {
            Some(Kind::Ident) => self.tok(i),
            Some(Kind::String) => {
                let quoted = self.tok(i);
                &quoted[1..quoted.len() - 1]
            }
            _ => return Err(self.err(i, hi, "expected an operation name")),
        };
        i += 1;
        // A trailing `loc(…)`.
        let mut body_hi = hi;
        let mut location = None;
        let last = self.t[hi - 1];
        if last.kind == Kind::Close(Bracket::Paren) {
            let open = last.partner;
            if open > i && self.is_ident(open - 1, hi, "loc") {
                location = Some(self.text(open - 1, hi));
                body_hi = open - 1;
            }
        }
        let rest_start = self.t[i - 1].end;
        let rest_end = if body_hi > i {
            self.t[body_hi - 1].end
        } else {
            rest_start
        };
        let mut op = Op {
            text: self.text(lo, hi),
            span: self.t[lo].start..self.t[hi - 1].end,
            results,
            name,
            rest: self.src[rest_start..rest_end].trim(),
            operands: Vec::new(),
            bindings: Vec::new(),
            ins: Vec::new(),
            outs: Vec::new(),
            regions: Vec::new(),
            location,
            signature: None,
        };
        match name {
            "func.func" => self.function(i, body_hi, &mut op)?,
            "module" | "builtin.module" => self.scan(i, body_hi, &mut op, true)?,
            _ => self.scan(i, body_hi, &mut op, false)?,
        }
        Ok(op)
    }

    /// Reads operands, bindings, `ins`/`outs` and regions from tokens `lo..hi` of an op.
    /// `braces_are_regions`: every `{` not after `attributes` is a region (`module`).
    fn scan(
        &self,
        lo: usize,
        hi: usize,
        op: &mut Op<'a>,
        braces_are_regions: bool,
    ) -> Result<(), ParseError> {
        let mut i = lo;
        while i < hi {
            let t = self.t[i];
            match t.kind {
                Kind::Value => {
                    let v = Value {
                        name: self.tok(i),
                        offset: t.start,
                    };
                    if i + 1 < hi && self.t[i + 1].is_punct(b'=') {
                        op.bindings.push(v);
                    } else {
                        op.operands.push(v);
                    }
                }
                Kind::Ident
                    if matches!(self.tok(i), "ins" | "outs")
                        && self.is_open(i + 1, hi, Bracket::Paren) =>
                {
                    let close = self.t[i + 1].partner;
                    let list = self.typed_list(i + 2, close);
                    op.operands.extend(self.values(i + 2, close));
                    if self.tok(i) == "ins" {
                        op.ins.extend(list);
                    } else {
                        op.outs.extend(list);
                    }
                    i = close + 1;
                    continue;
                }
                Kind::Open(Bracket::Brace) => {
                    if self.opens_region(i, lo, hi, braces_are_regions) {
                        op.regions.push(self.region(i)?);
                    }
                    i = t.partner + 1;
                    continue;
                }
                Kind::Open(Bracket::Paren) => {
                    let after = t.partner + 1;
                    let binds = after < hi
                        && (self.is_ident(after, hi, "in")
                            || self.t[after].is_punct(b'=')
                            || self.opens_region(after, lo, hi, braces_are_regions));
                    if binds {
                        op.bindings.extend(self.values(i + 1, t.partner));
                    } else {
                        self.scan(i + 1, t.partner, op, false)?;
                    }
                    i = after;
                    continue;
                }
                Kind::Open(Bracket::Square) => {
                    self.scan(i + 1, t.partner, op, false)?;
                    i = t.partner + 1;
                    continue;
                }
                Kind::Open(Bracket::Metadata) => {
                    i = t.partner + 1;
                    continue;
                }
                _ => {}
            }
            i += 1;
        }
        Ok(())
    }

    /// Whether token `i` (of an op's tokens `lo..hi`) opens a region: a `{` not after
    /// `attributes`, followed by a line break (or any such `{` when `braces_are_regions`).
    fn opens_region(&self, i: usize, lo: usize, hi: usize, braces_are_regions: bool) -> bool {
        self.is_open(i, hi, Bracket::Brace)
            && !(i > lo && self.is_ident(i - 1, hi, "attributes"))
            && (braces_are_regions || self.t[i + 1].line_start)
    }

    /// Every `%x` in tokens `lo..hi`, nested ones included.
    fn values(&self, lo: usize, hi: usize) -> impl Iterator<Item = Value<'a>> + '_ {
        (lo..hi)
            .filter(|&i| self.t[i].kind == Kind::Value)
            .map(|i| Value {
                name: self.tok(i),
                offset: self.t[i].start,
            })
    }

    /// `%a, %b : T, U` (tokens `lo..hi`) as typed operands.
    fn typed_list(&self, lo: usize, hi: usize) -> Vec<Typed<'a>> {
        let colon = self
            .top(lo, hi)
            .find(|&i| self.t[i].is_punct(b':'))
            .unwrap_or(hi);
        let values: Vec<&'a str> = self
            .commas(lo, colon)
            .into_iter()
            .filter_map(|(a, b)| (a..b).find(|&i| self.t[i].kind == Kind::Value))
            .map(|i| self.tok(i))
            .collect();
        let types: Vec<Type<'a>> = if colon < hi {
            self.commas(colon + 1, hi)
                .into_iter()
                .map(|(a, b)| Type(self.text(a, b)))
                .collect()
        } else {
            Vec::new()
        };
        values
            .into_iter()
            .enumerate()
            .map(|(k, value)| Typed {
                value,
                ty: types.get(k).copied(),
            })
            .collect()
    }

    /// Splits tokens `lo..hi` at commas outside brackets, `<…>` included; empty pieces are
    /// dropped.
    fn commas(&self, lo: usize, hi: usize) -> Vec<Span> {
        let mut out = Vec::new();
        let (mut start, mut angle, mut i) = (lo, 0usize, lo);
        while i < hi {
            match self.t[i].kind {
                Kind::Punct(b'<') => angle += 1,
                Kind::Punct(b'>') => angle = angle.saturating_sub(1),
                Kind::Punct(b',') if angle == 0 => {
                    if start < i {
                        out.push((start, i));
                    }
                    start = i + 1;
                }
                _ => {}
            }
            i = self.skip(i).min(hi);
        }
        if start < hi {
            out.push((start, hi));
        }
        out
    }

    /// Where a type that starts at `lo` ends: before an attribute dictionary, `attributes`, a
    /// location or `hi`, at `<…>` depth 0.
    fn type_end(&self, lo: usize, hi: usize) -> usize {
        let (mut angle, mut i) = (0usize, lo);
        while i < hi {
            match self.t[i].kind {
                Kind::Punct(b'<') => angle += 1,
                Kind::Punct(b'>') => angle = angle.saturating_sub(1),
                Kind::Open(Bracket::Brace) if angle == 0 => return i,
                Kind::Ident
                    if angle == 0
                        && (self.tok(i) == "attributes"
                            || (self.tok(i) == "loc"
                                && self.is_open(i + 1, hi, Bracket::Paren))) =>
                {
                    return i;
                }
                _ => {}
            }
            i = self.skip(i).min(hi);
        }
        hi
    }

    /// `[%x :] type [{attrs}] [loc(…)]` pieces of the list in tokens `lo..hi`.
    fn params(&self, lo: usize, hi: usize) -> Result<Vec<Param<'a>>, ParseError> {
        self.commas(lo, hi)
            .into_iter()
            .map(|(a, b)| {
                let (value, ts) =
                    if self.t[a].kind == Kind::Value && a + 1 < b && self.t[a + 1].is_punct(b':') {
                        (Some(self.tok(a)), a + 2)
                    } else {
                        (None, a)
                    };
                let te = self.type_end(ts, b);
                if te == ts {
                    return Err(self.err(ts, b, "expected a type"));
                }
                let mut param = Param {
                    value,
                    ty: Type(self.text(ts, te)),
                    attributes: None,
                    location: None,
                };
                let mut i = te;
                if self.is_open(i, b, Bracket::Brace) {
                    let close = self.t[i].partner;
                    param.attributes = Some(self.text(i, close + 1));
                    i = close + 1;
                }
                if self.is_ident(i, b, "loc") && self.is_open(i + 1, b, Bracket::Paren) {
                    let close = self.t[i + 1].partner;
                    param.location = Some(self.text(i, close + 1));
                    i = close + 1;
                }
                if i < b {
                    return Err(self.err(
                        i,
                        b,
                        format!("unexpected `{}` in a parameter", self.tok(i)),
                    ));
                }
                Ok(param)
            })
            .collect()
    }

    /// `func.func [visibility] @name(params) [-> results] [attributes {…}] [{ body }]`, tokens
    /// `lo..hi` (after the op name, before its location).
    fn function(&self, lo: usize, hi: usize, op: &mut Op<'a>) -> Result<(), ParseError> {
        let mut i = lo;
        let mut visibility = None;
        if i + 1 < hi && self.t[i].kind == Kind::Ident && self.t[i + 1].kind == Kind::Symbol {
            visibility = Some(self.tok(i));
            i += 1;
        }
        if !(i < hi && self.t[i].kind == Kind::Symbol) {
            return Err(self.err(i, hi, "func.func: expected the function's @name"));
        }
        let symbol = self.tok(i);
        let name = symbol[1..]
            .strip_prefix('"')
            .and_then(|s| s.strip_suffix('"'))
            .unwrap_or(&symbol[1..]);
        i += 1;
        if !self.is_open(i, hi, Bracket::Paren) {
            return Err(self.err(
                i,
                hi,
                format!("func.func @{name}: expected `(` and its parameters"),
            ));
        }
        let close = self.t[i].partner;
        let params = self.params(i + 1, close)?;
        i = close + 1;
        let mut results = Vec::new();
        if i < hi && self.t[i].kind == Kind::Arrow {
            i += 1;
            if self.is_open(i, hi, Bracket::Paren) {
                let close = self.t[i].partner;
                results = self.params(i + 1, close)?;
                i = close + 1;
            } else {
                let end = self.type_end(i, hi);
                if end == i {
                    return Err(self.err(
                        i,
                        hi,
                        format!("func.func @{name}: expected result types after `->`"),
                    ));
                }
                results.push(Param {
                    value: None,
                    ty: Type(self.text(i, end)),
                    attributes: None,
                    location: None,
                });
                i = end;
            }
        }
        let mut attributes = None;
        if self.is_ident(i, hi, "attributes") && self.is_open(i + 1, hi, Bracket::Brace) {
            let close = self.t[i + 1].partner;
            attributes = Some(self.text(i + 1, close + 1));
            i = close + 1;
        }
        if self.is_open(i, hi, Bracket::Brace) {
            op.regions.push(self.region(i)?);
            i = self.t[i].partner + 1;
        }
        if i < hi {
            return Err(self.err(
                i,
                hi,
                format!("func.func @{name}: unexpected `{}`", self.tok(i)),
            ));
        }
        op.signature = Some(Box::new(Signature {
            name,
            visibility,
            params,
            results,
            attributes,
        }));
        Ok(())
    }

    /// The region whose `{` is token `open`.
    fn region(&self, open: usize) -> Result<Region<'a>, ParseError> {
        let close = self.t[open].partner;
        let mut blocks: Vec<Block<'a>> = Vec::new();
        for (lo, hi) in self.lines(open + 1, close) {
            if self.t[lo].kind != Kind::Block {
                if blocks.is_empty() {
                    blocks.push(Block {
                        label: None,
                        arguments: Vec::new(),
                        ops: Vec::new(),
                    });
                }
                let op = self.op(lo, hi)?;
                blocks.last_mut().expect("a block").ops.push(op);
                continue;
            }
            // `^bb1(%a: i32, …):`, possibly followed by an op on the same line.
            let mut i = lo + 1;
            let mut arguments = Vec::new();
            if self.is_open(i, hi, Bracket::Paren) {
                let close = self.t[i].partner;
                arguments = self.params(i + 1, close)?;
                i = close + 1;
            }
            if !(i < hi && self.t[i].is_punct(b':')) {
                return Err(self.err(i, hi, "expected `:` after the block label"));
            }
            let mut block = Block {
                label: Some(self.tok(lo)),
                arguments,
                ops: Vec::new(),
            };
            if i + 1 < hi {
                block.ops.push(self.op(i + 1, hi)?);
            }
            blocks.push(block);
        }
        Ok(Region {
            span: self.t[open].start..self.t[close].end,
            inner: self.t[open].end..self.t[close].start,
            blocks,
        })
    }
}

#[cfg(test)]
mod tests;
