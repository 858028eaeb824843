//! Values: each TTIR op a store depends on, printed the way triton-shared lowers it.

use super::addr::{Mask, dims};
use super::{Emitter, Val, is_float, literal, scalar_type};
use crate::ttir::{TOp, TType};

const CASTS: [&str; 11] = [
    "arith.extf",
    "arith.truncf",
    "arith.sitofp",
    "arith.uitofp",
    "arith.fptosi",
    "arith.fptoui",
    "arith.extsi",
    "arith.extui",
    "arith.trunci",
    "arith.bitcast",
    "arith.index_cast",
];

/// `tensor<4x64xf32>`, or `tensor<f32>` for a rank-0 tensor.
fn tensor_ty(shape: &[u32], elem: &str) -> String {
    if shape.is_empty() {
        format!("tensor<{elem}>")
    } else {
        format!("tensor<{}x{elem}>", dims(shape))
    }
}

fn tensor(shape: &[u32], elem: &str) -> TType {
    TType {
        shape: shape.to_vec(),
        elem: elem.to_owned(),
        pointer: false,
    }
}

impl Emitter<'_> {
    /// The emitted data of a TTIR value, printing what it needs first.
    pub(super) fn data(&mut self, ssa: &str) -> Result<Val, String> {
        if let Some(v) = self.data.get(ssa) {
            return Ok(v.clone());
        }
        if let Some(p) = self.data_of_param(ssa) {
            return p;
        }
        let op =
            self.defs.get(ssa).copied().ok_or_else(|| {
                format!("the value {ssa} is defined by nothing the stand-in reads")
            })?;
        let saved = std::mem::replace(&mut self.loc, op.loc.clone());
        let r = self.data_op(op);
        self.loc = saved;
        let v = r?;
        self.data.insert(ssa.to_owned(), v.clone());
        Ok(v)
    }

    fn data_op(&mut self, op: &TOp) -> Result<Val, String> {
        let mut ty = op
            .result_type()
            .ok_or_else(|| format!("{} has no readable result type", op.name))?;
        // A load's printed type is its pointer's; the data has the pointee's.
        ty.pointer = false;
        if op.results.len() != 1 {
            return Err(format!("{} with {} results", op.name, op.results.len()));
        }
        let operand = |i: usize| op.operands.get(i).cloned().unwrap_or_default();
        Ok(match op.name.as_str() {
            "arith.constant" => {
                let lit = op.body.trim();
                let lit = lit
                    .strip_prefix("dense<")
                    .and_then(|l| l.strip_suffix('>'))
                    .unwrap_or(lit)
                    .trim();
                if lit.starts_with('[') || lit.starts_with('"') {
                    return Err(format!("the non-splat constant {lit}"));
                }
                let c = self.constant(&ty.elem, lit);
                let scalar = Val {
                    name: c,
                    ty: scalar_type(&ty.elem),
                };
                if ty.shape.is_empty() {
                    scalar
                } else {
                    self.fill(&scalar, &ty.shape)
                }
            }
            "tt.get_program_id" | "tt.get_num_programs" => {
                let axis = match op.body.trim() {
                    "y" => 1,
                    "z" => 2,
                    _ => 0,
                };
                Val {
                    name: self.grid_arg(op.name == "tt.get_program_id", axis),
                    ty: scalar_type("i32"),
                }
            }
            "tt.make_range" => self.make_range(op.int_attr("start").unwrap_or(0), &ty),
            "tt.splat" => {
                let s = self.data(&operand(0))?;
                self.fill(&s, &ty.shape)
            }
            "tt.broadcast" => {
                let x = self.data(&operand(0))?;
                self.broadcast(&x, &ty.shape)
            }
            "tt.expand_dims" => {
                let x = self.data(&operand(0))?;
                self.expand_dims(&x, op.int_attr("axis").unwrap_or(0) as usize)
            }
            "tt.reshape" => {
                let x = self.data(&operand(0))?;
                self.reshape(&x, &ty.shape)
            }
            "tt.trans" => {
                let x = self.data(&operand(0))?;
                let perm = op.array_attr("order").ok_or("tt.trans without an order")?;
                self.transpose(&x, &perm)
            }
            "tt.load" => self.load(op, &ty)?,
            "tt.dot" => self.dot(op, &ty)?,
            "tt.reduce" => self.reduce(op, &ty)?,
            name => {
                let mlir = elementwise_name(op, &ty)
                    .ok_or_else(|| format!("it uses {name}, which the stand-in does not print"))?;
                let mut ins = Vec::new();
                for o in &op.operands {
                    ins.push(self.data(o)?);
                }
                self.elementwise(&mlir, &ins, &ty.elem)?
            }
        })
    }

    fn empty(&mut self, ty: &str) -> String {
        let name = self.names.num();
        self.line(&format!("{name} = tensor.empty() : {ty}"));
        name
    }

    /// `tensor.empty` + `linalg.fill` of the scalar `s`.
    pub(super) fn fill(&mut self, s: &Val, shape: &[u32]) -> Val {
        let t = tensor_ty(shape, &s.ty.elem);
        let e = self.empty(&t);
        let name = self.names.num();
        self.line(&format!(
            "{name} = linalg.fill ins({} : {}) outs({e} : {t}) -> {t}",
            s.name, s.ty.elem
        ));
        Val {
            name,
            ty: tensor(shape, &s.ty.elem),
        }
    }

    /// One op on scalars; returns the result's name.
    fn scalar_op(
        &mut self,
        op: &str,
        args: &[String],
        arg_elems: &[String],
        result: &str,
    ) -> String {
        let name = self.names.num();
        let (opname, pred) = match op.split_once(' ') {
            Some((n, p)) => (n, Some(p)),
            None => (op, None),
        };
        let first = arg_elems.first().map_or(result, String::as_str);
        let text = if let Some(p) = pred {
            format!("{name} = {opname} {p}, {} : {first}", args.join(", "))
        } else if CASTS.contains(&opname) {
            format!("{name} = {opname} {} : {first} to {result}", args[0])
        } else if opname == "arith.select" {
            format!("{name} = arith.select {} : {result}", args.join(", "))
        } else {
            format!("{name} = {opname} {} : {first}", args.join(", "))
        };
        self.line(&text);
        name
    }

    /// One elementwise op: on scalars directly, on tensors as one `linalg.generic` whose
    /// `outs` reuses an input of the result's type (else a `tensor.empty`).
    pub(super) fn elementwise(
        &mut self,
        op: &str,
        ins: &[Val],
        result: &str,
    ) -> Result<Val, String> {
        let names: Vec<String> = ins.iter().map(|v| v.name.clone()).collect();
        let elems: Vec<String> = ins.iter().map(|v| v.ty.elem.clone()).collect();
        let Some(shape) = ins
            .iter()
            .find(|v| !v.is_scalar())
            .map(|v| v.ty.shape.clone())
        else {
            let name = self.scalar_op(op, &names, &elems, result);
            return Ok(Val {
                name,
                ty: scalar_type(result),
            });
        };
        let rty = tensor(&shape, result);
        let tensors: Vec<&Val> = ins.iter().filter(|v| !v.is_scalar()).collect();
        if tensors.iter().any(|v| v.ty.shape != shape) {
            return Err(format!("{op} on operands of different shapes"));
        }
        let out = match tensors.iter().find(|v| v.ty == rty) {
            Some(v) => v.name.clone(),
            None => self.empty(&rty.tensor()),
        };
        let rank = shape.len();
        let map = self.identity_map(rank);
        let maps = vec![map.as_str(); tensors.len() + 1].join(", ");
        let name = self.names.num();
        self.raw(&format!(
            "{name} = linalg.generic {{indexing_maps = [{maps}], iterator_types = [{}]}} ins({} : {}) outs({out} : {}) {{",
            parallel(rank),
            tensors.iter().map(|v| v.name.as_str()).collect::<Vec<_>>().join(", "),
            tensors.iter().map(|v| v.mlir_type()).collect::<Vec<_>>().join(", "),
            rty.tensor()
        ));
        let mut block = Vec::new();
        let mut args = Vec::new();
        for v in ins {
            if v.is_scalar() {
                args.push(v.name.clone());
            } else {
                let a = self.names.named("in");
                block.push(format!("{a}: {}", v.ty.elem));
                args.push(a);
            }
        }
        let o = self.names.named("out");
        block.push(format!("{o}: {result}"));
        self.raw(&format!("^bb0({}):", block.join(", ")));
        self.depth += 1;
        let r = self.scalar_op(op, &args, &elems, result);
        self.raw(&format!("linalg.yield {r} : {result}"));
        self.depth -= 1;
        self.line(&format!("}} -> {}", rty.tensor()));
        Ok(Val { name, ty: rty })
    }

    /// An elementwise cast of an integer tensor (index widths of pointer offsets).
    pub(super) fn elementwise_cast(&mut self, v: &Val, to: &str) -> Val {
        let op = if super::addr::bits(&v.ty.elem) < super::addr::bits(to) {
            "arith.extsi"
        } else {
            "arith.trunci"
        };
        self.elementwise(op, std::slice::from_ref(v), to)
            .unwrap_or_else(|_| v.clone())
    }

    fn make_range(&mut self, start: i64, ty: &TType) -> Val {
        let e = self.empty(&ty.tensor());
        let map = self.identity_map(1);
        let name = self.names.num();
        self.raw(&format!(
            "{name} = linalg.generic {{indexing_maps = [{map}], iterator_types = [\"parallel\"]}} outs({e} : {}) {{",
            ty.tensor()
        ));
        let o = self.names.named("out");
        self.raw(&format!("^bb0({o}: {}):", ty.elem));
        self.depth += 1;
        let i = self.names.num();
        self.line(&format!("{i} = linalg.index 0 : index"));
        let mut v = self.scalar_op("arith.index_cast", &[i], &["index".into()], &ty.elem);
        if start != 0 {
            let c = self.constant(&ty.elem, &start.to_string());
            v = self.scalar_op(
                "arith.addi",
                &[v, c],
                std::slice::from_ref(&ty.elem),
                &ty.elem,
            );
        }
        self.raw(&format!("linalg.yield {v} : {}", ty.elem));
        self.depth -= 1;
        self.line(&format!("}} -> {}", ty.tensor()));
        Val {
            name,
            ty: ty.clone(),
        }
    }

    /// `tt.broadcast`: a generic whose input map pins the stretched dimensions to 0.
    pub(super) fn broadcast(&mut self, x: &Val, shape: &[u32]) -> Val {
        if x.is_scalar() {
            return self.fill(x, shape);
        }
        let rank = shape.len();
        let results: Vec<String> = (0..rank)
            .map(|d| {
                if x.ty.shape[d] == 1 && shape[d] != 1 {
                    "0".to_owned()
                } else {
                    format!("d{d}")
                }
            })
            .collect();
        let in_map = self.map(rank, &results);
        let out_map = self.identity_map(rank);
        let rty = tensor(shape, &x.ty.elem);
        let e = self.empty(&rty.tensor());
        let name = self.names.num();
        self.raw(&format!(
            "{name} = linalg.generic {{indexing_maps = [{in_map}, {out_map}], iterator_types = [{}]}} ins({} : {}) outs({e} : {}) {{",
            parallel(rank),
            x.name,
            x.mlir_type(),
            rty.tensor()
        ));
        let (i, o) = (self.names.named("in"), self.names.named("out"));
        self.raw(&format!("^bb0({i}: {0}, {o}: {0}):", x.ty.elem));
        self.depth += 1;
        self.raw(&format!("linalg.yield {i} : {}", x.ty.elem));
        self.depth -= 1;
        self.line(&format!("}} -> {}", rty.tensor()));
        Val { name, ty: rty }
    }

    /// `tt.expand_dims` as `tensor.expand_shape`.
    pub(super) fn expand_dims(&mut self, x: &Val, axis: usize) -> Val {
        let r = x.ty.shape.len();
        let mut shape = x.ty.shape.clone();
        shape.insert(axis.min(r), 1);
        let mut groups: Vec<Vec<usize>> = (0..r)
            .map(|i| match i.cmp(&axis) {
                std::cmp::Ordering::Less => vec![i],
                std::cmp::Ordering::Equal => vec![axis, axis + 1],
                std::cmp::Ordering::Greater => vec![i + 1],
            })
            .collect();
        if axis >= r
            && let Some(last) = groups.last_mut()
        {
            last.push(r);
        }
        let rty = tensor(&shape, &x.ty.elem);
        let name = self.names.num();
        self.line(&format!(
            "{name} = tensor.expand_shape {} {} output_shape [{}] : {} into {}",
            x.name,
            reassociation(&groups),
            list(&shape),
            x.mlir_type(),
            rty.tensor()
        ));
        Val { name, ty: rty }
    }

    /// `tt.reshape` through a 1-D `tensor.collapse_shape` / `tensor.expand_shape`.
    fn reshape(&mut self, x: &Val, shape: &[u32]) -> Val {
        let n: u32 = x.ty.shape.iter().product();
        let mut v = x.clone();
        if v.ty.shape.len() > 1 {
            let flat = tensor(&[n], &x.ty.elem);
            let name = self.names.num();
            let group: Vec<usize> = (0..v.ty.shape.len()).collect();
            self.line(&format!(
                "{name} = tensor.collapse_shape {} {} : {} into {}",
                v.name,
                reassociation(&[group]),
                v.mlir_type(),
                flat.tensor()
            ));
            v = Val { name, ty: flat };
        }
        if shape.len() > 1 {
            let rty = tensor(shape, &x.ty.elem);
            let name = self.names.num();
            let group: Vec<usize> = (0..shape.len()).collect();
            self.line(&format!(
                "{name} = tensor.expand_shape {} {} output_shape [{}] : {} into {}",
                v.name,
                reassociation(&[group]),
                list(shape),
                v.mlir_type(),
                rty.tensor()
            ));
            v = Val { name, ty: rty };
        }
        v
    }

    /// `tt.trans` as `linalg.transpose`.
    fn transpose(&mut self, x: &Val, perm: &[u32]) -> Val {
        let shape: Vec<u32> = perm.iter().map(|p| x.ty.shape[*p as usize]).collect();
        let rty = tensor(&shape, &x.ty.elem);
        let e = self.empty(&rty.tensor());
        let name = self.names.named("transposed");
        self.line(&format!(
            "{name} = linalg.transpose ins({} : {}) outs({e} : {}) permutation = [{}]",
            x.name,
            x.mlir_type(),
            rty.tensor(),
            list(perm)
        ));
        Val { name, ty: rty }
    }

    /// The scalar a load's `other` splats, if it is one.
    fn other_scalar(&mut self, ssa: &str) -> Result<Option<Val>, String> {
        let Some(op) = self.defs.get(ssa).copied() else {
            return Ok(None);
        };
        match op.name.as_str() {
            "arith.constant" => {
                let t = op.result_type().ok_or("constant without a type")?;
                let lit = op
                    .body
                    .trim()
                    .strip_prefix("dense<")
                    .and_then(|l| l.strip_suffix('>'))
                    .unwrap_or(op.body.trim())
                    .trim()
                    .to_owned();
                let name = self.constant(&t.elem, &lit);
                Ok(Some(Val {
                    name,
                    ty: scalar_type(&t.elem),
                }))
            }
            "tt.splat" => Ok(Some(self.data(&op.operands[0])?)),
            _ => Ok(None),
        }
    }

    fn load(&mut self, op: &TOp, ty: &TType) -> Result<Val, String> {
        let elem = ty.elem.clone();
        let ptr = self.ptr(&op.operands[0])?;
        let mask = match op.operands.get(1) {
            None => Some(vec![None; ty.shape.len()]),
            Some(m) => self.mask(m)?,
        };
        let other = match op.operands.get(2) {
            Some(o) => self.other_scalar(o)?.map(Some),
            None => Some(None),
        };
        let (Some(p), Some(mask), Some(other)) = (ptr, mask, other) else {
            return self.gather(op, ty);
        };
        let (rc, rty) = self.reinterpret_cast(&p, &elem);
        if p.shape.is_empty() {
            let c0 = self.index_const(0);
            let name = self.names.num();
            self.line(&format!("{name} = memref.load {rc}[{c0}] : {rty}"));
            return Ok(Val {
                name,
                ty: scalar_type(&elem),
            });
        }
        let alloc_ty = format!("memref<{}x{elem}>", dims(&p.shape));
        let alloc = self.names.named("alloc");
        self.line(&format!("{alloc} = memref.alloc() : {alloc_ty}"));
        if mask.iter().any(Option::is_some) {
            if let Some(o) = other {
                self.line(&format!(
                    "linalg.fill ins({} : {elem}) outs({alloc} : {alloc_ty})",
                    o.name
                ));
            }
            let (sv, sty) = self.subview(&rc, &rty, &p.shape, &mask);
            let (av, aty) = self.subview(&alloc, &alloc_ty, &p.shape, &mask);
            self.line(&format!("memref.copy {sv}, {av} : {sty} to {aty}"));
        } else {
            self.line(&format!("memref.copy {rc}, {alloc} : {rty} to {alloc_ty}"));
        }
        let name = self.names.num();
        self.line(&format!(
            "{name} = bufferization.to_tensor {alloc} restrict writable : {alloc_ty} to {}",
            ty.tensor()
        ));
        Ok(Val {
            name,
            ty: ty.clone(),
        })
    }

    /// The whole buffer of parameter `param`, for element-by-element access.
    fn whole_buffer(&mut self, param: usize, elem: &str) -> (String, String) {
        let ty = format!("memref<1073741823x{elem}, strided<[1]>>");
        let name = self.names.named("reinterpret_cast");
        self.line(&format!(
            "{name} = memref.reinterpret_cast %arg{param} to offset: [0], sizes: [1073741823], \
             strides: [1] : memref<*x{elem}> to {ty}"
        ));
        (name, ty)
    }

    /// A load whose address or mask is not structured: a generic of `memref.load`.
    fn gather(&mut self, op: &TOp, ty: &TType) -> Result<Val, String> {
        let elem = ty.elem.clone();
        let (param, offsets) = self.offsets(&op.operands[0])?;
        let mut ins = vec![offsets];
        if let Some(m) = op.operands.get(1) {
            ins.push(self.data(m)?);
        }
        let other = match op.operands.get(2) {
            Some(o) => self.data(o)?,
            None => {
                let c = self.constant(&elem, &literal(0.0, &elem));
                Val {
                    name: c,
                    ty: scalar_type(&elem),
                }
            }
        };
        if !other.is_scalar() {
            ins.push(other.clone());
        }
        let (buf, buf_ty) = self.whole_buffer(param, &elem);
        let rank = ty.shape.len();
        let map = self.identity_map(rank);
        let e = self.empty(&ty.tensor());
        let name = self.names.num();
        self.raw(&format!(
            "{name} = linalg.generic {{indexing_maps = [{}], iterator_types = [{}]}} ins({} : {}) outs({e} : {}) {{",
            vec![map.as_str(); ins.len() + 1].join(", "),
            parallel(rank),
            ins.iter().map(|v| v.name.as_str()).collect::<Vec<_>>().join(", "),
            ins.iter().map(|v| v.mlir_type()).collect::<Vec<_>>().join(", "),
            ty.tensor()
        ));
        let args: Vec<String> = ins.iter().map(|_| self.names.named("in")).collect();
        let o = self.names.named("out");
        let mut block: Vec<String> = args
            .iter()
            .zip(&ins)
            .map(|(a, v)| format!("{a}: {}", v.ty.elem))
            .collect();
        block.push(format!("{o}: {elem}"));
        self.raw(&format!("^bb0({}):", block.join(", ")));
        self.depth += 1;
        let at = self.scalar_op(
            "arith.index_cast",
            &[args[0].clone()],
            &[ins[0].ty.elem.clone()],
            "index",
        );
        let value = if op.operands.len() > 1 {
            let other_name = if other.is_scalar() {
                other.name.clone()
            } else {
                args[2].clone()
            };
            let v = self.names.num();
            self.raw(&format!("{v} = scf.if {} -> ({elem}) {{", args[1]));
            self.depth += 1;
            let x = self.names.num();
            self.raw(&format!("{x} = memref.load {buf}[{at}] : {buf_ty}"));
            self.raw(&format!("scf.yield {x} : {elem}"));
            self.depth -= 1;
            self.raw("} else {");
            self.depth += 1;
            self.raw(&format!("scf.yield {other_name} : {elem}"));
            self.depth -= 1;
            self.raw("}");
            v
        } else {
            let x = self.names.num();
            self.raw(&format!("{x} = memref.load {buf}[{at}] : {buf_ty}"));
            x
        };
        self.raw(&format!("linalg.yield {value} : {elem}"));
        self.depth -= 1;
        self.line(&format!("}} -> {}", ty.tensor()));
        Ok(Val {
            name,
            ty: ty.clone(),
        })
    }

    /// `tt.store`: `bufferization.materialize_in_destination` into the cast (masked: a slice
    /// into a subview), `memref.store` for a scalar, a generic of `memref.store` otherwise.
    pub(super) fn store(&mut self, op: &TOp) -> Result<(), String> {
        let v = self.data(&op.operands[1])?;
        let ptr = self.ptr(&op.operands[0])?;
        let mask: Option<Mask> = match op.operands.get(2) {
            None => Some(vec![None; v.ty.shape.len()]),
            Some(m) => self.mask(m)?,
        };
        let elem = v.ty.elem.clone();
        let (Some(p), Some(mask)) = (ptr, mask) else {
            return self.scatter(op, &v);
        };
        let (rc, rty) = self.reinterpret_cast(&p, &elem);
        if p.shape.is_empty() {
            let c0 = self.index_const(0);
            self.line(&format!("memref.store {}, {rc}[{c0}] : {rty}", v.name));
            return Ok(());
        }
        if !mask.iter().any(Option::is_some) {
            self.line(&format!(
                "bufferization.materialize_in_destination {} in writable {rc} : ({}, {rty}) -> ()",
                v.name,
                v.mlir_type()
            ));
            return Ok(());
        }
        let sizes: Vec<String> = p
            .shape
            .iter()
            .zip(&mask)
            .map(|(d, m)| match m {
                None => d.to_string(),
                Some(super::addr::Expr::C(c)) => c.to_string(),
                Some(super::addr::Expr::D(n)) => n.clone(),
            })
            .collect();
        let slice_dims: Vec<String> = p
            .shape
            .iter()
            .zip(&mask)
            .map(|(d, m)| match m {
                None => d.to_string(),
                Some(super::addr::Expr::C(c)) => c.to_string(),
                Some(_) => "?".to_owned(),
            })
            .collect();
        let slice_ty = format!("tensor<{}x{elem}>", slice_dims.join("x"));
        let slice = self.names.named("extracted_slice");
        let zeros = vec!["0"; p.shape.len()].join(", ");
        let ones = vec!["1"; p.shape.len()].join(", ");
        self.line(&format!(
            "{slice} = tensor.extract_slice {}[{zeros}] [{}] [{ones}] : {} to {slice_ty}",
            v.name,
            sizes.join(", "),
            v.mlir_type()
        ));
        let (sv, sty) = self.subview(&rc, &rty, &p.shape, &mask);
        self.line(&format!(
            "bufferization.materialize_in_destination {slice} in writable {sv} : ({slice_ty}, {sty}) -> ()"
        ));
        Ok(())
    }

    /// A store whose address or mask is not structured: a generic of `memref.store`.
    fn scatter(&mut self, op: &TOp, v: &Val) -> Result<(), String> {
        let elem = v.ty.elem.clone();
        let (param, offsets) = self.offsets(&op.operands[0])?;
        let (buf, buf_ty) = self.whole_buffer(param, &elem);
        if v.is_scalar() {
            let at = self.scalar_op(
                "arith.index_cast",
                std::slice::from_ref(&offsets.name),
                std::slice::from_ref(&offsets.ty.elem),
                "index",
            );
            self.line(&format!("memref.store {}, {buf}[{at}] : {buf_ty}", v.name));
            return Ok(());
        }
        let mut ins = vec![offsets, v.clone()];
        if let Some(m) = op.operands.get(2) {
            ins.push(self.data(m)?);
        }
        let rank = v.ty.shape.len();
        let map = self.identity_map(rank);
        self.raw(&format!(
            "linalg.generic {{indexing_maps = [{}], iterator_types = [{}]}} ins({} : {}) {{",
            vec![map.as_str(); ins.len()].join(", "),
            parallel(rank),
            ins.iter()
                .map(|x| x.name.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            ins.iter()
                .map(|x| x.mlir_type())
                .collect::<Vec<_>>()
                .join(", "),
        ));
        let args: Vec<String> = ins.iter().map(|_| self.names.named("in")).collect();
        let block: Vec<String> = args
            .iter()
            .zip(&ins)
            .map(|(a, x)| format!("{a}: {}", x.ty.elem))
            .collect();
        self.raw(&format!("^bb0({}):", block.join(", ")));
        self.depth += 1;
        let at = self.scalar_op(
            "arith.index_cast",
            &[args[0].clone()],
            &[ins[0].ty.elem.clone()],
            "index",
        );
        if ins.len() > 2 {
            self.raw(&format!("scf.if {} {{", args[2]));
            self.depth += 1;
            self.raw(&format!("memref.store {}, {buf}[{at}] : {buf_ty}", args[1]));
            self.depth -= 1;
            self.raw("}");
        } else {
            self.raw(&format!("memref.store {}, {buf}[{at}] : {buf_ty}", args[1]));
        }
        self.raw("linalg.yield");
        self.depth -= 1;
        self.line("}");
        Ok(())
    }

    /// `tt.dot`: `linalg.fill` of zero + `linalg.matmul`, then the accumulator added by a
    /// generic of its own unless it is a zero constant.
    fn dot(&mut self, op: &TOp, ty: &TType) -> Result<Val, String> {
        let (a, b) = (self.data(&op.operands[0])?, self.data(&op.operands[1])?);
        let zero_lit = literal(0.0, &ty.elem);
        let zero = self.constant(&ty.elem, &zero_lit);
        let t = ty.tensor();
        let e = self.empty(&t);
        let filled = self.names.num();
        self.line(&format!(
            "{filled} = linalg.fill ins({zero} : {}) outs({e} : {t}) -> {t}",
            ty.elem
        ));
        let name = self.names.num();
        self.line(&format!(
            "{name} = linalg.matmul ins({}, {} : {}, {}) outs({filled} : {t}) -> {t}",
            a.name,
            b.name,
            a.mlir_type(),
            b.mlir_type()
        ));
        let product = Val {
            name,
            ty: ty.clone(),
        };
        let acc = &op.operands[2];
        let zero_acc = self.defs.get(acc.as_str()).is_some_and(|d| {
            d.name == "arith.constant" && crate::meaning::constant(&d.body, &ty.elem) == Some(0.0)
        });
        if zero_acc {
            return Ok(product);
        }
        let acc = self.data(acc)?;
        let add = if is_float(&ty.elem) {
            "arith.addf"
        } else {
            "arith.addi"
        };
        self.elementwise(add, &[product, acc], &ty.elem)
    }

    /// `tt.reduce`: `linalg.fill` of the combiner's identity + `linalg.reduce`; over the last
    /// of several axes through `linalg.transpose` and `dimensions = [0]`.
    fn reduce(&mut self, op: &TOp, ty: &TType) -> Result<Val, String> {
        let x = self.data(&op.operands[0])?;
        let axis = op.int_attr("axis").unwrap_or(0) as usize;
        let combiner = op
            .region
            .as_deref()
            .unwrap_or(&[])
            .iter()
            .find(|o| o.name != "tt.reduce.return")
            .map(|o| o.name.clone())
            .ok_or("tt.reduce without a combiner")?;
        let elem = x.ty.elem.clone();
        let ident = identity(&combiner, &elem)
            .ok_or_else(|| format!("a reduction combining with {combiner}"))?;
        let init = self.constant(&elem, &ident);
        let rt = tensor_ty(&ty.shape, &elem);
        let e = self.empty(&rt);
        let filled = self.names.num();
        self.line(&format!(
            "{filled} = linalg.fill ins({init} : {elem}) outs({e} : {rt}) -> {rt}"
        ));
        let rank = x.ty.shape.len();
        let (input, dim) = if rank > 1 && axis == rank - 1 {
            let perm: Vec<u32> = std::iter::once(axis as u32).chain(0..axis as u32).collect();
            (self.transpose(&x, &perm), 0)
        } else {
            (x, axis)
        };
        let name = self.names.named("reduced");
        self.raw(&format!(
            "{name} = linalg.reduce ins({} : {}) outs({filled} : {rt}) dimensions = [{dim}]",
            input.name,
            input.mlir_type()
        ));
        let (a, b) = (self.names.named("in"), self.names.named("init"));
        self.raw(&format!("  ({a}: {elem}, {b}: {elem}) {{"));
        self.depth += 1;
        let r = self.scalar_op(&combiner, &[a, b], &[elem.clone(), elem.clone()], &elem);
        self.raw(&format!("linalg.yield {r} : {elem}"));
        self.depth -= 1;
        self.line("  }");
        if ty.shape.is_empty() {
            let s = self.names.num();
            self.line(&format!("{s} = tensor.extract {name}[] : {rt}"));
            return Ok(Val {
                name: s,
                ty: scalar_type(&elem),
            });
        }
        Ok(Val {
            name,
            ty: tensor(&ty.shape, &elem),
        })
    }
}

/// The MLIR op (with a predicate for comparisons) a TTIR elementwise op prints as.
fn elementwise_name(op: &TOp, ty: &TType) -> Option<String> {
    let name = op.name.as_str();
    Some(match name {
        "arith.cmpi" | "arith.cmpf" => {
            format!("{name} {}", op.body.split(',').next()?.trim())
        }
        "tt.precise_sqrt" => "math.sqrt".into(),
        "tt.precise_divf" => "arith.divf".into(),
        "tt.bitcast" => "arith.bitcast".into(),
        "tt.fp_to_fp" => {
            let from = op.operand_types().first()?.elem.clone();
            if super::addr::bits(&ty.elem) < super::addr::bits(&from) {
                "arith.truncf".into()
            } else {
                "arith.extf".into()
            }
        }
        _ if name.starts_with("arith.") || name.starts_with("math.") => name.to_owned(),
        _ => return None,
    })
}

/// The identity of a reduction's combiner, as a literal of `elem`.
fn identity(combiner: &str, elem: &str) -> Option<String> {
    let bits = super::addr::bits(elem);
    Some(match combiner.strip_prefix("arith.")? {
        "addf" => literal(0.0, elem),
        "mulf" => literal(1.0, elem),
        "maxnumf" | "maximumf" => literal(f64::NEG_INFINITY, elem),
        "minnumf" | "minimumf" => literal(f64::INFINITY, elem),
        "addi" | "ori" | "xori" | "maxui" => "0".into(),
        "muli" => "1".into(),
        "andi" | "minui" => "-1".into(),
        "maxsi" => format!("-{}", 1u64 << (bits - 1)),
        "minsi" => format!("{}", (1u64 << (bits - 1)) - 1),
        _ => return None,
    })
}

fn parallel(rank: usize) -> String {
    vec!["\"parallel\""; rank].join(", ")
}

fn list<T: ToString>(v: &[T]) -> String {
    v.iter().map(T::to_string).collect::<Vec<_>>().join(", ")
}

fn reassociation(groups: &[Vec<usize>]) -> String {
    let inner: Vec<String> = groups.iter().map(|g| format!("[{}]", list(g))).collect();
    format!("[{}]", inner.join(", "))
}
