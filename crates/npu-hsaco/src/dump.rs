//! The reference dumper's text (`aie-hsaco-dump`).

use std::fmt::Write;

use crate::arch::Arch;
use crate::container::SHDR_SIZE;
use crate::error::Rule;
use crate::inspect::Hsaco;
use crate::section::{KernelKind, Reader};

/// What the dumper prints: `stdout` exactly as the reference, and one message per damaged
/// section (the reference prints those on stderr and exits 1).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Dump {
    /// The text for standard output.
    pub stdout: String,
    /// `<arch>: <reason>` for each damaged section, or the "no section" message.
    pub errors: Vec<String>,
}

impl Dump {
    /// The exit status the reference dumper returns.
    pub fn exit_code(&self) -> u8 {
        u8::from(!self.errors.is_empty())
    }
}

/// Describes the first `aie2` and the first `aie2p` section, in that order.
pub fn dump(hsaco: &Hsaco<'_>) -> Dump {
    let mut out = Dump::default();
    let header = &hsaco.container.header;
    if header.e_shnum != 0 && usize::from(header.e_shentsize) != SHDR_SIZE {
        // Which section headers a reader finds then depends on the reader.
        out.errors
            .push(Rule::ShentSize(header.e_shentsize).to_string());
        return out;
    }
    let mut found = false;
    for arch in Arch::ALL {
        let Some(section) = hsaco.section(arch) else {
            continue;
        };
        found = true;
        if hsaco.container.contents(section.index).is_none() {
            out.errors
                .push(format!("{arch}: the section lies outside the file"));
            continue;
        }
        let kernels = match section.kernels(Reader::Dumper) {
            Ok(k) => k,
            Err(v) => {
                let at = v
                    .kernel
                    .map(|k| format!("kernel '{k}': "))
                    .unwrap_or_default();
                out.errors.push(format!("{arch}: {at}{}", v.rule));
                continue;
            }
        };
        let header = section.table.as_ref().expect("kernels() succeeded").header;
        let _ = writeln!(out.stdout, "arch section: {arch}");
        let _ = writeln!(
            out.stdout,
            "version: {}.{}",
            header.version_major, header.version_minor
        );
        for k in kernels {
            let kind =
                KernelKind::from_code(k.entry.kind).expect("the dumper rules check the kind");
            let _ = writeln!(
                out.stdout,
                "  kernel {}: kind={} insts={}B pdi={} kernarg={} cols={}",
                std::str::from_utf8(k.name).expect("the dumper rules check UTF-8"),
                kind.name(),
                k.entry.insts_size,
                if k.pdi.is_some() { "yes" } else { "no" },
                k.entry.kernarg_size,
                k.entry.num_cols,
            );
        }
    }
    if !found {
        out.errors.push("no aie2/aie2p section found".to_string());
    }
    out
}
