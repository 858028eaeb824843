//! Structured addresses, as triton-shared's pointer and mask analyses see them: a pointer
//! tensor is `base + offset + Σ strides[d]·i_d` over its block, a mask keeps a leading number
//! of elements per dimension. What fits becomes `memref.reinterpret_cast` (+ `memref.subview`);
//! what does not is emitted element by element (`memref.load`/`memref.store` in a generic).

use super::{Emitter, Val, scalar_type};
use crate::ttir::TOp;

/// An index-typed quantity: a constant or an SSA value of type `index`.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Expr {
    C(i64),
    D(String),
}

/// An integer tensor of the form `offset + Σ strides[d]·i_d`.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Idx {
    pub offset: Expr,
    pub strides: Vec<Expr>,
    pub shape: Vec<u32>,
}

/// A pointer tensor into parameter `param`, `offset + Σ strides[d]·i_d` elements in.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Ptr {
    pub param: usize,
    pub offset: Expr,
    pub strides: Vec<Expr>,
    pub shape: Vec<u32>,
}

/// Per dimension, how many leading elements a mask keeps (`None`: all of them).
pub(super) type Mask = Vec<Option<Expr>>;

impl Emitter<'_> {
    pub(super) fn expr(&mut self, e: &Expr) -> String {
        match e {
            Expr::C(v) => self.index_const(*v),
            Expr::D(name) => name.clone(),
        }
    }

    fn arith(&mut self, op: &str, a: &Expr, b: &Expr) -> Expr {
        let (x, y) = (self.expr(a), self.expr(b));
        let name = self.names.num();
        self.line(&format!("{name} = arith.{op} {x}, {y} : index"));
        Expr::D(name)
    }

    pub(super) fn add(&mut self, a: &Expr, b: &Expr) -> Expr {
        match (a, b) {
            (Expr::C(x), Expr::C(y)) => Expr::C(x + y),
            (Expr::C(0), e) | (e, Expr::C(0)) => e.clone(),
            _ => self.arith("addi", a, b),
        }
    }

    pub(super) fn sub(&mut self, a: &Expr, b: &Expr) -> Expr {
        match (a, b) {
            (Expr::C(x), Expr::C(y)) => Expr::C(x - y),
            (e, Expr::C(0)) => e.clone(),
            _ => self.arith("subi", a, b),
        }
    }

    pub(super) fn mul(&mut self, a: &Expr, b: &Expr) -> Expr {
        match (a, b) {
            (Expr::C(x), Expr::C(y)) => Expr::C(x * y),
            (Expr::C(0), _) | (_, Expr::C(0)) => Expr::C(0),
            (Expr::C(1), e) | (e, Expr::C(1)) => e.clone(),
            _ => self.arith("muli", a, b),
        }
    }

    fn clamp(&mut self, v: &Expr, hi: u32) -> Expr {
        match v {
            Expr::C(x) => Expr::C((*x).clamp(0, i64::from(hi))),
            _ => {
                let lo = self.arith("maxsi", v, &Expr::C(0));
                self.arith("minsi", &lo, &Expr::C(i64::from(hi)))
            }
        }
    }

    /// A scalar integer TTIR value as an index: constants fold; anything else is computed as
    /// the kernel computes it (in its own type) and cast, as triton-shared does.
    pub(super) fn scalar_expr(&mut self, ssa: &str) -> Result<Expr, String> {
        if let Some(op) = self.defs.get(ssa).copied()
            && op.name == "arith.constant"
            && let Some(t) = op.result_type()
            && t.shape.is_empty()
            && let Some(v) = crate::meaning::constant(&op.body, &t.elem)
        {
            return Ok(Expr::C(v as i64));
        }
        let v = self.data(ssa)?;
        let name = self.names.num();
        self.line(&format!(
            "{name} = arith.index_cast {} : {} to index",
            v.name,
            v.mlir_type()
        ));
        Ok(Expr::D(name))
    }

    /// The structured form of an integer tensor (or scalar), if it has one.
    pub(super) fn idx(&mut self, ssa: &str) -> Result<Option<Idx>, String> {
        if let Some(i) = self.idx.get(ssa) {
            return Ok(i.clone());
        }
        let r = self.idx_uncached(ssa)?;
        self.idx.insert(ssa.to_owned(), r.clone());
        Ok(r)
    }

    fn idx_uncached(&mut self, ssa: &str) -> Result<Option<Idx>, String> {
        let Some(op) = self.defs.get(ssa).copied() else {
            // A scalar parameter: uniform.
            return Ok(Some(Idx {
                offset: self.scalar_expr(ssa)?,
                strides: vec![],
                shape: vec![],
            }));
        };
        let Some(ty) = op.result_type() else {
            return Ok(None);
        };
        if ty.shape.is_empty() {
            return Ok(Some(Idx {
                offset: self.scalar_expr(ssa)?,
                strides: vec![],
                shape: vec![],
            }));
        }
        let zeros = vec![Expr::C(0); ty.shape.len()];
        let operand = |i: usize| op.operands.get(i).cloned().unwrap_or_default();
        Ok(match op.name.as_str() {
            "tt.make_range" => Some(Idx {
                offset: Expr::C(op.int_attr("start").unwrap_or(0)),
                strides: vec![Expr::C(1)],
                shape: ty.shape,
            }),
            "arith.constant" => crate::meaning::constant(&op.body, &ty.elem).map(|v| Idx {
                offset: Expr::C(v as i64),
                strides: zeros,
                shape: ty.shape.clone(),
            }),
            "tt.splat" => Some(Idx {
                offset: self.scalar_expr(&operand(0))?,
                strides: zeros,
                shape: ty.shape,
            }),
            "tt.expand_dims" | "tt.broadcast" => self.idx(&operand(0))?.map(|i| {
                let (strides, shape) = reshape_dims(op, i.strides, &i.shape, &ty.shape);
                Idx {
                    offset: i.offset,
                    strides,
                    shape,
                }
            }),
            "arith.extsi" | "arith.trunci" | "arith.extui" => self.idx(&operand(0))?,
            "arith.addi" | "arith.subi" => {
                let (Some(a), Some(b)) = (self.idx(&operand(0))?, self.idx(&operand(1))?) else {
                    return Ok(None);
                };
                let add = op.name == "arith.addi";
                let combine = |e: &mut Self, x: &Expr, y: &Expr| {
                    if add { e.add(x, y) } else { e.sub(x, y) }
                };
                let offset = combine(self, &a.offset, &b.offset);
                let mut strides = Vec::new();
                for (x, y) in a.strides.iter().zip(&b.strides) {
                    strides.push(combine(self, x, y));
                }
                Some(Idx {
                    offset,
                    strides,
                    shape: ty.shape,
                })
            }
            "arith.muli" => {
                let (Some(a), Some(b)) = (self.idx(&operand(0))?, self.idx(&operand(1))?) else {
                    return Ok(None);
                };
                let uniform = |i: &Idx| i.strides.iter().all(|s| *s == Expr::C(0));
                let (var, factor) = if uniform(&b) {
                    (a, b.offset)
                } else if uniform(&a) {
                    (b, a.offset)
                } else {
                    return Ok(None);
                };
                let offset = self.mul(&var.offset, &factor);
                let mut strides = Vec::new();
                for s in &var.strides {
                    strides.push(self.mul(s, &factor));
                }
                Some(Idx {
                    offset,
                    strides,
                    shape: ty.shape,
                })
            }
            _ => None,
        })
    }

    /// The structured form of a pointer (tensor), if it has one.
    pub(super) fn ptr(&mut self, ssa: &str) -> Result<Option<Ptr>, String> {
        if let Some(p) = self.ptrs.get(ssa) {
            return Ok(p.clone());
        }
        let r = self.ptr_uncached(ssa)?;
        self.ptrs.insert(ssa.to_owned(), r.clone());
        Ok(r)
    }

    fn ptr_uncached(&mut self, ssa: &str) -> Result<Option<Ptr>, String> {
        if let Some(param) = self.k.params.iter().position(|p| p.ssa == ssa) {
            return Ok(self.k.params[param].pointee().map(|_| Ptr {
                param,
                offset: Expr::C(0),
                strides: vec![],
                shape: vec![],
            }));
        }
        let Some(op) = self.defs.get(ssa).copied() else {
            return Ok(None);
        };
        let Some(ty) = op.result_type() else {
            return Ok(None);
        };
        let operand = |i: usize| op.operands.get(i).cloned().unwrap_or_default();
        Ok(match op.name.as_str() {
            "tt.splat" => self.ptr(&operand(0))?.map(|p| Ptr {
                strides: vec![Expr::C(0); ty.shape.len()],
                shape: ty.shape.clone(),
                ..p
            }),
            "tt.expand_dims" | "tt.broadcast" => self.ptr(&operand(0))?.map(|p| {
                let (strides, shape) = reshape_dims(op, p.strides, &p.shape, &ty.shape);
                Ptr {
                    strides,
                    shape,
                    ..p
                }
            }),
            "tt.addptr" => {
                let (Some(p), Some(i)) = (self.ptr(&operand(0))?, self.idx(&operand(1))?) else {
                    return Ok(None);
                };
                let offset = self.add(&p.offset, &i.offset);
                let mut strides = Vec::new();
                for (x, y) in p.strides.iter().zip(&i.strides) {
                    strides.push(self.add(x, y));
                }
                Some(Ptr {
                    param: p.param,
                    offset,
                    strides,
                    shape: ty.shape,
                })
            }
            _ => None,
        })
    }

    /// The structured form of a load/store mask, if it has one.
    pub(super) fn mask(&mut self, ssa: &str) -> Result<Option<Mask>, String> {
        let Some(op) = self.defs.get(ssa).copied() else {
            return Ok(None);
        };
        let Some(ty) = op.result_type() else {
            return Ok(None);
        };
        let operand = |i: usize| op.operands.get(i).cloned().unwrap_or_default();
        Ok(match op.name.as_str() {
            "arith.constant" if crate::meaning::constant(&op.body, "i1") == Some(1.0) => {
                Some(vec![None; ty.shape.len()])
            }
            "arith.cmpi" => {
                let pred = op.body.split(',').next().unwrap_or("").trim();
                if pred != "slt" && pred != "ult" {
                    return Ok(None);
                }
                let (Some(a), Some(b)) = (self.idx(&operand(0))?, self.idx(&operand(1))?) else {
                    return Ok(None);
                };
                if b.strides.iter().any(|s| *s != Expr::C(0)) {
                    return Ok(None);
                }
                let varying: Vec<usize> = (0..a.strides.len())
                    .filter(|d| a.strides[*d] != Expr::C(0) && a.shape[*d] > 1)
                    .collect();
                let [d] = varying.as_slice() else {
                    return Ok(None);
                };
                if a.strides[*d] != Expr::C(1) {
                    return Ok(None);
                }
                let room = self.sub(&b.offset, &a.offset);
                let keep = self.clamp(&room, a.shape[*d]);
                let mut dims = vec![None; a.shape.len()];
                dims[*d] = Some(keep);
                Some(dims)
            }
            "arith.andi" => {
                let (Some(a), Some(b)) = (self.mask(&operand(0))?, self.mask(&operand(1))?) else {
                    return Ok(None);
                };
                let mut dims = Vec::new();
                for (x, y) in a.into_iter().zip(b) {
                    dims.push(match (x, y) {
                        (Some(x), Some(y)) => Some(match (&x, &y) {
                            (Expr::C(p), Expr::C(q)) => Expr::C(*p.min(q)),
                            _ => self.arith("minsi", &x, &y),
                        }),
                        (x, y) => x.or(y),
                    });
                }
                Some(dims)
            }
            "tt.expand_dims" | "tt.broadcast" => {
                let Some(m) = self.mask(&operand(0))? else {
                    return Ok(None);
                };
                let from = self
                    .defs
                    .get(operand(0).as_str())
                    .and_then(|d| d.result_type())
                    .map(|t| t.shape)
                    .unwrap_or_default();
                if op.name == "tt.broadcast"
                    && m.iter()
                        .zip(&from)
                        .zip(&ty.shape)
                        .any(|((k, f), t)| k.is_some() && f != t)
                {
                    // A bound on a dimension that broadcasting stretches: not a box.
                    return Ok(None);
                }
                let (dims, _) = reshape_dims(op, m, &from, &ty.shape);
                Some(dims)
            }
            _ => None,
        })
    }

    /// `%argK` cast to the block `p` addresses: `memref<4x64xT, strided<[S, 1], offset: ?>>`.
    pub(super) fn reinterpret_cast(&mut self, p: &Ptr, elem: &str) -> (String, String) {
        let shape: Vec<u32> = if p.shape.is_empty() {
            vec![1]
        } else {
            p.shape.clone()
        };
        let strides: Vec<Expr> = if p.shape.is_empty() {
            vec![Expr::C(1)]
        } else {
            p.strides.clone()
        };
        let offset_operand = match &p.offset {
            Expr::C(v) => v.to_string(),
            Expr::D(n) => n.clone(),
        };
        let stride_operands: Vec<String> = strides
            .iter()
            .map(|s| match s {
                Expr::C(v) => v.to_string(),
                Expr::D(n) => n.clone(),
            })
            .collect();
        let layout = |e: &Expr| match e {
            Expr::C(v) => v.to_string(),
            Expr::D(_) => "?".to_owned(),
        };
        let ty = format!(
            "memref<{}x{elem}, strided<[{}], offset: {}>>",
            dims(&shape),
            strides.iter().map(layout).collect::<Vec<_>>().join(", "),
            layout(&p.offset)
        );
        let name = self.names.named("reinterpret_cast");
        self.line(&format!(
            "{name} = memref.reinterpret_cast %arg{} to offset: [{offset_operand}], sizes: [{}], \
             strides: [{}] : memref<*x{elem}> to {ty}",
            p.param,
            shape
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(", "),
            stride_operands.join(", ")
        ));
        (name, ty)
    }

    /// A `memref.subview` of `source` (type `ty`, shape `shape`) keeping `mask`'s leading
    /// elements; returns the view and its type.
    pub(super) fn subview(
        &mut self,
        source: &str,
        ty: &str,
        shape: &[u32],
        mask: &Mask,
    ) -> (String, String) {
        let sizes: Vec<String> = shape
            .iter()
            .zip(mask)
            .map(|(d, m)| match m {
                None => d.to_string(),
                Some(Expr::C(v)) => v.to_string(),
                Some(Expr::D(n)) => n.clone(),
            })
            .collect();
        let result_dims: Vec<String> = shape
            .iter()
            .zip(mask)
            .map(|(d, m)| match m {
                None => d.to_string(),
                Some(Expr::C(v)) => v.to_string(),
                Some(Expr::D(_)) => "?".to_owned(),
            })
            .collect();
        // The layout stays the source's (offsets are 0, strides 1); an identity layout
        // becomes the explicit row-major strides.
        let elem = ty
            .split_once('<')
            .map(|(_, r)| r)
            .unwrap_or(ty)
            .split([',', '>'])
            .next()
            .unwrap_or("")
            .rsplit('x')
            .next()
            .unwrap_or("")
            .to_owned();
        let layout = match ty.find("strided<") {
            Some(at) => ty[at..ty.len() - 1].to_owned(),
            None => {
                let mut strides = vec![1u64; shape.len()];
                for d in (0..shape.len().saturating_sub(1)).rev() {
                    strides[d] = strides[d + 1] * u64::from(shape[d + 1]);
                }
                format!(
                    "strided<[{}]>",
                    strides
                        .iter()
                        .map(u64::to_string)
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            }
        };
        let view_ty = format!("memref<{}x{elem}, {layout}>", result_dims.join("x"));
        let zeros = vec!["0"; shape.len()].join(", ");
        let ones = vec!["1"; shape.len()].join(", ");
        let name = self.names.named("subview");
        self.line(&format!(
            "{name} = memref.subview {source}[{zeros}] [{}] [{ones}] : {ty} to {view_ty}",
            sizes.join(", ")
        ));
        (name, view_ty)
    }

    /// The element offsets a pointer tensor holds, as an integer tensor (for addresses that
    /// are not structured), and the parameter it points into.
    pub(super) fn offsets(&mut self, ssa: &str) -> Result<(usize, Val), String> {
        if let Some(param) = self.k.params.iter().position(|p| p.ssa == ssa) {
            let zero = self.constant("i32", "0");
            return Ok((
                param,
                Val {
                    name: zero,
                    ty: scalar_type("i32"),
                },
            ));
        }
        let op: &TOp =
            self.defs.get(ssa).copied().ok_or_else(|| {
                format!("the pointer {ssa} comes from nothing the stand-in reads")
            })?;
        let ty = op
            .result_type()
            .ok_or_else(|| format!("{} has no readable type", op.name))?;
        let operand = |i: usize| op.operands.get(i).cloned().unwrap_or_default();
        match op.name.as_str() {
            "tt.splat" => {
                let (param, base) = self.offsets(&operand(0))?;
                Ok((param, self.fill(&base, &ty.shape)))
            }
            "tt.expand_dims" | "tt.broadcast" => {
                let (param, inner) = self.offsets(&operand(0))?;
                let v = if op.name == "tt.broadcast" {
                    self.broadcast(&inner, &ty.shape)
                } else {
                    let axis = op.int_attr("axis").unwrap_or(0) as usize;
                    self.expand_dims(&inner, axis)
                };
                Ok((param, v))
            }
            "tt.addptr" => {
                let (param, base) = self.offsets(&operand(0))?;
                let step = self.data(&operand(1))?;
                let step = if step.ty.elem != base.ty.elem {
                    self.elementwise_cast(&step, &base.ty.elem)
                } else {
                    step
                };
                let elem = base.ty.elem.clone();
                Ok((param, self.elementwise("arith.addi", &[base, step], &elem)?))
            }
            other => Err(format!(
                "a pointer is computed by {other}, which the stand-in does not follow"
            )),
        }
    }
}

/// The width of an element type (`i32` → 32, `bf16` → 16).
pub(super) fn bits(elem: &str) -> u32 {
    elem.trim_start_matches(|c: char| c.is_ascii_alphabetic())
        .parse()
        .unwrap_or(32)
}

/// `4x64`
pub(super) fn dims(shape: &[u32]) -> String {
    shape
        .iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join("x")
}

/// Per-dimension entries after `tt.expand_dims` (a new unit dimension gets `T::default()`)
/// or `tt.broadcast` (stretched dimensions get `T::default()`).
fn reshape_dims<T: Clone + Default + PartialEq>(
    op: &TOp,
    entries: Vec<T>,
    from: &[u32],
    to: &[u32],
) -> (Vec<T>, Vec<u32>) {
    if op.name == "tt.expand_dims" {
        let axis = op.int_attr("axis").unwrap_or(0) as usize;
        let mut e = entries;
        e.insert(axis.min(e.len()), T::default());
        (e, to.to_vec())
    } else {
        let e = entries
            .into_iter()
            .zip(from.iter().zip(to))
            .map(|(x, (f, t))| if f == t { x } else { T::default() })
            .collect();
        (e, to.to_vec())
    }
}

impl Default for Expr {
    fn default() -> Expr {
        Expr::C(0)
    }
}
