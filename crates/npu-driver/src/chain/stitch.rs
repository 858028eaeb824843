//! Stitching: the AIR modules of a chain's ops (each lowered on its own, with its own grid)
//! become one module whose single function runs one `air.launch` per op, in order, over the
//! chain's combined buffers — what upstream's multilaunch builds for aircc's load_pdi path
//! (one full ELF, one runtime sequence, one dispatch).
//!
//! ```text
//! #op0_map = affine_map<(d0) -> (d0)>             aliases of op k, renamed #op<k>_…
//! module {
//!   func.func private @ext(…)                     external kernels: kept, declared once
//!   air.channel @op1_channel_0 [1, 1]             other module-level ops of op k, symbols @op<k>_…
//!   func.func @<chain>(%arg0: memref<*xf32>, …) { one buffer per combined index
//!     // op0: add_kernel …
//!     %op0_c4 = arith.constant 4 : index         op k's function-scope values, %op<k>_…
//!     air.launch (…) in (…) args(%arg16=%arg0, …) : … {  operands: combined buffers
//!       air.segment @op0_add_kernel_0 …            the launch's region: symbols and aliases
//!     }                                              renamed, values untouched (isolated)
//!     // op1: …
//!     return
//!   }
//! }
//! ```
//!
//! Names: every symbol an op defines or uses gets the prefix `op<k>_` except external
//! declarations (`func.func private @f(…)` without a body: kernels linked from object files,
//! which must keep their names); attribute and type aliases get it too. SSA values are renamed
//! only in the function's own scope — the hierarchy ops (`air.launch`, `air.segment`,
//! `air.herd`) are isolated from above, so names inside their regions, and the block
//! arguments their headers bind (`(%x) in (%n=…)`, `args(%a=…)`), belong to the op and stay
//! as printed; only the values they bind from outside are renamed. A buffer parameter of the
//! op's function becomes the chain function's `%arg<combined index>`. A scalar parameter
//! (Triton's grid ids, sizes) must no longer be used once lowered — chains pass buffers only.
//!
//! A lowered function without an `air.launch` (a bare `air.herd`, as canonicalisation leaves a
//! 1×1×1 launch) is first wrapped in `air.launch () in () args(…)` + `air.segment`, as
//! upstream does, because aircc's runtime-sequence lowering associates launches with devices
//! through segments. Module attributes are not carried over: they describe one op's module.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::Write;
use std::ops::Range;

use npu_mlir::edit::{self, Name};
use npu_mlir::{Func, Module, Param, ParseError, Type};

/// One op, lowered.
#[derive(Debug, Clone, Copy)]
pub(crate) struct StitchOp<'a> {
    /// The kernel function's name in `air`.
    pub kernel: &'a str,
    pub grid: [u32; 3],
    /// Buffer parameter i of the kernel → combined index `arg_map[i]`.
    pub arg_map: &'a [usize],
    /// The op's AIR module (the lowering's output).
    pub air: &'a str,
}

/// Why an op could not be stitched: `(op index, reason)`.
pub(crate) type StitchFailure = (usize, String);

/// The hierarchy ops whose regions are isolated from above.
const ISOLATED: [&str; 3] = ["air.launch", "air.segment", "air.herd"];

/// The reason for a text the reader refuses (it was read once already, so this is a bug in
/// what stitching generated, or an AIR module the reader cannot take).
fn unreadable(e: ParseError) -> String {
    format!("its AIR text cannot be read: {e}")
}

/// Stitches `ops` into one module whose function `@chain` takes the combined buffers.
pub(crate) fn stitch(chain: &str, ops: &[StitchOp<'_>]) -> Result<String, StitchFailure> {
    let mut aliases: Vec<String> = Vec::new();
    // name → (text without locations, for comparison; text to emit; first op)
    let mut externals: BTreeMap<String, (String, String, usize)> = BTreeMap::new();
    let mut support: Vec<String> = Vec::new();
    let mut bodies: Vec<String> = Vec::new();
    let mut types: BTreeMap<usize, (String, usize)> = BTreeMap::new();

    for (k, op) in ops.iter().enumerate() {
        let fail = |reason: String| (k, reason);
        let module = Module::parse(op.air).map_err(|e| fail(unreadable(e)))?;
        one_module(&module).map_err(fail)?;
        if let Some(attributes) = module.attributes {
            tracing::debug!(op = k, attributes, "module attributes are not stitched");
        }
        // Names this op declares without a body: external kernels, which keep their names.
        let own_externals: HashSet<&str> = module
            .functions()
            .filter(|f| f.body().is_none())
            .map(|f| f.name())
            .collect();
        let prefix = format!("op{k}_");
        let alias_names: HashSet<&str> = module.aliases.iter().map(|a| a.name).collect();
        let globals = |text: &str| {
            rename_globals(text, &prefix, &alias_names, &own_externals)
                .map_err(|e| fail(unreadable(e)))
        };

        let mut entry = None;
        let mut defined: Vec<Func<'_, '_>> = Vec::new();
        let mut others: Vec<&str> = Vec::new();
        for item in &module.ops {
            match item.function() {
                Some(f) if f.body().is_none() => {
                    let bare = globals(
                        &edit::strip_locations(item.text).map_err(|e| fail(unreadable(e)))?,
                    )?;
                    let normal = bare.split_whitespace().collect::<Vec<_>>().join(" ");
                    match externals.get(f.name()) {
                        Some((seen, _, first)) if *seen != normal => {
                            return Err(fail(format!(
                                "it declares @{} as `{normal}`, op {first} as `{seen}`; an \
                                 external function has one signature",
                                f.name()
                            )));
                        }
                        Some(_) => {}
                        None => {
                            externals.insert(f.name().to_owned(), (normal, bare, k));
                        }
                    }
                }
                Some(f) if f.name() == op.kernel => entry = Some(f),
                Some(f) => {
                    defined.push(f);
                    others.push(item.text);
                }
                None => others.push(item.text),
            }
        }
        let Some(func) = entry else {
            let public: Vec<String> = defined
                .iter()
                .filter(|f| f.signature.visibility != Some("private"))
                .map(|f| format!("@{}", f.name()))
                .collect();
            return Err(fail(format!(
                "its AIR module has no function @{} (functions with a body: {})",
                op.kernel,
                if public.is_empty() {
                    "none".to_owned()
                } else {
                    public.join(", ")
                }
            )));
        };
        if !func.signature.results.is_empty() {
            return Err(fail(format!(
                "@{} returns values; a launched kernel returns nothing",
                op.kernel
            )));
        }

        // Buffer parameters → combined indices; their types must agree across ops.
        let buffers: Vec<&Param<'_>> = func.buffers().collect();
        if buffers.len() != op.arg_map.len() {
            return Err(fail(format!(
                "@{} has {} buffer parameters after lowering, its arg_map maps {}",
                op.kernel,
                buffers.len(),
                op.arg_map.len()
            )));
        }
        let mut values: HashMap<String, Binding> = HashMap::new();
        for (i, (param, &combined)) in buffers.iter().zip(op.arg_map).enumerate() {
            if let Some((ty, first)) = types.get(&combined)
                && ty != param.ty.text()
            {
                let what = if Type(ty).element_type() != param.ty.element_type() {
                    "conflicting element types"
                } else {
                    "conflicting types"
                };
                return Err(fail(format!(
                    "combined argument {combined} is {ty} in op {first} but buffer parameter \
                     {i} of @{} is {}: {what}",
                    op.kernel, param.ty
                )));
            }
            types.entry(combined).or_insert((param.ty.to_string(), k));
            if let Some(v) = param.value {
                values.insert(v.to_owned(), Binding::Combined(combined));
            }
        }
        for param in func.params().iter().filter(|p| !p.is_buffer()) {
            if let Some(v) = param.value {
                values.insert(v.to_owned(), Binding::Scalar(param.ty.to_string()));
            }
        }

        let body = body_without_return(&func, op.air, op.kernel).map_err(fail)?;
        let launches = Module::parse(&body)
            .map_err(|e| fail(unreadable(e)))?
            .walk()
            .any(|o| o.name == "air.launch");
        let body = if launches {
            body
        } else {
            wrap_in_launch(&body, op.kernel, func.params()).map_err(fail)?
        };

        let body = rename_function_scope(&body, &prefix, &values).map_err(|e| {
            fail(format!(
                "{e}; after lowering, @{} may only use its buffer parameters (chains pass \
                 buffers only: make scalars constexpr)",
                op.kernel
            ))
        })?;
        let mut text = format!(
            "    // op{k}: {} grid ({}, {}, {}), buffers {}\n",
            op.kernel,
            op.grid[0],
            op.grid[1],
            op.grid[2],
            op.arg_map
                .iter()
                .enumerate()
                .map(|(i, c)| format!("{i}->{c}"))
                .collect::<Vec<_>>()
                .join(", ")
        );
        text.push_str(globals(&body)?.trim_start_matches('\n'));
        bodies.push(text);
        for alias in &module.aliases {
            aliases.push(globals(alias.text)?);
        }
        for other in others {
            support.push(globals(other)?);
        }
    }

    // The combined signature: one buffer per index, 0..N without gaps.
    let mut params = Vec::with_capacity(types.len());
    for (expected, (index, (ty, _))) in types.iter().enumerate() {
        if *index != expected {
            return Err((
                0,
                format!("combined argument {expected} is used by no op; indices must be 0..N-1"),
            ));
        }
        params.push(format!("%arg{index}: {ty}"));
    }
    if externals.contains_key(chain) {
        let (_, _, first) = &externals[chain];
        return Err((
            *first,
            format!("it declares an external function @{chain}, the chain's own name"),
        ));
    }

    let mut out = String::new();
    let _ = writeln!(
        out,
        "// The chain @{chain}: {} launches stitched by triton-npu.",
        ops.len()
    );
    for alias in &aliases {
        let _ = writeln!(out, "{alias}");
    }
    out.push_str("module {\n");
    for (_, text, _) in externals.values() {
        let _ = writeln!(out, "  {text}");
    }
    for op in &support {
        let _ = writeln!(out, "  {op}");
    }
    let _ = writeln!(out, "  func.func @{chain}({}) {{", params.join(", "));
    for body in &bodies {
        out.push_str(body);
        if !body.ends_with('\n') {
            out.push('\n');
        }
    }
    out.push_str("    return\n  }\n}\n");
    Ok(out)
}

/// One op's text must be one module and nothing else.
fn one_module(module: &Module<'_>) -> Result<(), String> {
    if module.metadata.is_some() {
        return Err(
            "file-level metadata ({-# … #-}, e.g. dense resources) cannot be stitched".into(),
        );
    }
    match module.ops.iter().filter(|o| o.is_module()).count() {
        0 => Ok(()),
        _ if module.explicit => Err("a module nested in the module cannot be stitched".into()),
        1 => Err("the text has operations outside its module".into()),
        _ => Err("the text holds more than one top-level module".into()),
    }
}

/// What a parameter of an op's function stands for in the chain's function.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Binding {
    Combined(usize),
    Scalar(String),
}

/// The body of `func` (a function of `source`) without its final `return` (which must
/// return nothing); one block only.
fn body_without_return(func: &Func<'_, '_>, source: &str, kernel: &str) -> Result<String, String> {
    let region = func
        .body()
        .ok_or_else(|| format!("@{kernel} has no body"))?;
    if let Some(label) = region.blocks.iter().find_map(|b| b.label) {
        return Err(format!(
            "@{kernel} has several blocks ({label}); only a single-block function can be stitched"
        ));
    }
    let last = region
        .blocks
        .first()
        .and_then(|b| b.ops.last())
        .filter(|o| matches!(o.name, "return" | "func.return"));
    let Some(last) = last else {
        return Err(format!("@{kernel}'s body does not end with `return`"));
    };
    if !last.rest.is_empty() {
        return Err(format!(
            "@{kernel} returns `{}`; a launched kernel returns nothing",
            last.rest
        ));
    }
    Ok(source[region.inner.start..last.span.start]
        .trim_end()
        .to_owned()
        + "\n")
}

/// Wraps a body that has no `air.launch` in `air.launch () in () args(…)` and an
/// `air.segment`, binding every buffer parameter.
fn wrap_in_launch(body: &str, kernel: &str, params: &[Param<'_>]) -> Result<String, String> {
    let used: HashSet<&str> = edit::names(body)
        .map_err(unreadable)?
        .into_iter()
        .filter_map(|(n, _)| match n {
            Name::Value(v) => Some(v),
            _ => None,
        })
        .collect();
    let fresh = |stem: &str| {
        let mut stem = stem.to_owned();
        while used.iter().any(|u| u.starts_with(&stem)) {
            stem.push('_');
        }
        stem
    };
    let (launch, segment) = (fresh("%launch_arg"), fresh("%segment_arg"));
    let buffers: Vec<(&str, &str)> = params
        .iter()
        .filter(|p| p.is_buffer())
        .filter_map(|p| Some((p.value?, p.ty.text())))
        .collect();
    let types: Vec<&str> = buffers.iter().map(|(_, t)| *t).collect();
    let launch_args: Vec<String> = buffers
        .iter()
        .enumerate()
        .map(|(i, (v, _))| format!("{launch}{i}={v}"))
        .collect();
    let segment_args: Vec<String> = (0..buffers.len())
        .map(|i| format!("{segment}{i}={launch}{i}"))
        .collect();
    let inner: HashMap<String, Binding> = buffers
        .iter()
        .enumerate()
        .map(|(i, (v, _))| ((*v).to_owned(), Binding::Combined(i)))
        .chain(
            params
                .iter()
                .filter(|p| !p.is_buffer())
                .filter_map(|p| Some((p.value?.to_owned(), Binding::Scalar(p.ty.to_string())))),
        )
        .collect();
    // Inside the segment, the body reads the segment's arguments.
    let renamed = rename_scope(body, &|token| match inner.get(token) {
        Some(Binding::Combined(i)) => Ok(Some(format!("{segment}{i}"))),
        Some(Binding::Scalar(ty)) => Err(format!("it uses the scalar parameter {token} ({ty})")),
        None => Ok(None),
    })?;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "    air.launch () in () args({}) : {} {{",
        launch_args.join(", "),
        types.join(", ")
    );
    let _ = writeln!(
        out,
        "      air.segment @{kernel}_seg  args({}) : {} {{",
        segment_args.join(", "),
        types.join(", ")
    );
    for line in renamed.lines() {
        let _ = writeln!(out, "    {line}");
    }
    out.push_str("      }\n    }\n");
    Ok(out)
}

/// Renames the function-scope values of an op's body: buffer parameters to the chain's
/// `%arg<combined>`, everything else to `%<prefix><name>`; a scalar parameter is an error.
fn rename_function_scope(
    body: &str,
    prefix: &str,
    params: &HashMap<String, Binding>,
) -> Result<String, String> {
    rename_scope(body, &|token| match params.get(token) {
        Some(Binding::Combined(c)) => Ok(Some(format!("%arg{c}"))),
        Some(Binding::Scalar(ty)) => Err(format!("it uses the scalar parameter {token} ({ty})")),
        None => Ok(Some(format!("%{prefix}{}", &token[1..]))),
    })
}

type Renamer<'r> = dyn Fn(&str) -> Result<Option<String>, String> + 'r;

/// Applies `rename` to the values of `body`'s own scope (see the module docs).
fn rename_scope(body: &str, rename: &Renamer<'_>) -> Result<String, String> {
    let inner = isolated_ranges(&Module::parse(body).map_err(unreadable)?);
    let mut error = None;
    let out = edit::rename(body, |name, range| {
        let Name::Value(v) = name else {
            return None;
        };
        if inner.iter().any(|r| r.contains(&range.start)) {
            return None;
        }
        match rename(v) {
            Ok(new) => new,
            Err(e) => {
                error.get_or_insert(e);
                None
            }
        }
    })
    .map_err(unreadable)?;
    match error {
        Some(e) => Err(e),
        None => Ok(out),
    }
}

/// The byte ranges that belong to isolated hierarchy ops: their regions and the names their
/// headers bind (block arguments and induction variables).
fn isolated_ranges(body: &Module<'_>) -> Vec<Range<usize>> {
    body.walk()
        .filter(|op| ISOLATED.contains(&op.name))
        .flat_map(|op| {
            let regions = op.regions.iter().map(|r| r.span.clone());
            let bound = op
                .bindings
                .iter()
                .map(|v| v.offset..v.offset + v.name.len());
            regions.chain(bound).collect::<Vec<_>>()
        })
        .collect()
}

/// Prefixes the op's symbols (except its external declarations) and aliases.
fn rename_globals(
    text: &str,
    prefix: &str,
    aliases: &HashSet<&str>,
    externals: &HashSet<&str>,
) -> Result<String, ParseError> {
    edit::rename(text, |name, _| match name {
        Name::Symbol(s) => {
            let name = s[1..].trim_matches('"');
            if externals.contains(name) {
                None
            } else if s[1..].starts_with('"') {
                Some(format!("@\"{prefix}{name}\""))
            } else {
                Some(format!("@{prefix}{name}"))
            }
        }
        Name::Alias(a) if aliases.contains(a) => Some(format!("{}{prefix}{}", &a[..1], &a[1..])),
        _ => None,
    })
}

#[cfg(test)]
mod tests;
