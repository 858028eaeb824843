//! Property tests: pack → parse round trips for random kernel sets, and the readers never
//! panicking on random or mutated input (the same entry points the fuzz targets drive).

mod common;

use std::collections::HashSet;

use common::{read, real_dir, vectors_dir};
use npu_hsaco::full_elf::FullElf;
use npu_hsaco::section::Reader;
use npu_hsaco::{Arch, Kernel, check, check_bytes, dump, pack, parse, xclbin};
use proptest::prelude::*;

#[derive(Debug, Clone)]
struct KernelCase {
    name: String,
    insts: usize,
    pdi: usize,
    kernarg: u32,
    cols: u32,
}

/// A few distinct blobs; kernels pick among them so that de-duplication is exercised.
fn blobs() -> Vec<Vec<u8>> {
    (0..5)
        .map(|i| common::pseudo_random(i, 4 * (1 + i as usize * 7)))
        .collect()
}

fn kernel_case() -> impl Strategy<Value = KernelCase> {
    // Names, kernarg sizes and widths every agent of either architecture accepts.
    (
        "[^\u{0}]{1,12}",
        0..5usize,
        0..5usize,
        (1..=16u32).prop_map(|buffers| 16 * buffers),
        1..=4u32,
    )
        .prop_map(|(name, insts, pdi, kernarg, cols)| KernelCase {
            name,
            insts,
            pdi,
            kernarg,
            cols,
        })
}

fn kernel_set() -> impl Strategy<Value = Vec<KernelCase>> {
    prop::collection::vec(kernel_case(), 1..8).prop_map(|mut v| {
        let mut seen = HashSet::new();
        v.retain(|k| seen.insert(k.name.clone()));
        v
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn pack_then_parse_round_trips(cases in kernel_set(), aie2p in any::<bool>(), other_first in any::<bool>()) {
        let blobs = blobs();
        let arch = if aie2p { Arch::Aie2p } else { Arch::Aie2 };
        let kernels: Vec<Kernel<'_>> = cases
            .iter()
            .map(|c| Kernel::pdi_insts(c.name.as_str(), &blobs[c.insts][..], &blobs[c.pdi][..], c.kernarg, c.cols))
            .collect();
        // Optionally pack into a file that already holds the other architecture.
        let other = if aie2p { Arch::Aie2 } else { Arch::Aie2p };
        let existing = other_first.then(|| pack::pack(None, other, &kernels[..1]).unwrap());
        let file = pack::pack(existing.as_deref(), arch, &kernels).unwrap();
        let hsaco = parse(&file).unwrap();
        let read = hsaco.kernels(arch).unwrap();
        prop_assert_eq!(read.len(), cases.len());
        for (k, c) in read.iter().zip(&cases) {
            prop_assert_eq!(k.name, c.name.as_bytes());
            prop_assert_eq!(k.insts, &blobs[c.insts][..]);
            prop_assert_eq!(k.pdi, Some(&blobs[c.pdi][..]));
            prop_assert_eq!((k.entry.kernarg_size, k.entry.num_cols, k.entry.kind), (c.kernarg, c.cols, 0));
        }
        // The pool holds each distinct blob once.
        let section = hsaco.section(arch).unwrap();
        let table = section.table.as_ref().unwrap();
        let distinct: HashSet<usize> = cases.iter().flat_map(|c| [c.insts, c.pdi]).collect();
        let pool: usize = distinct.iter().map(|&i| blobs[i].len()).sum();
        prop_assert_eq!(table.bytes().len() - table.header.blob_pool_offset as usize, pool);
        // Both readers agree, the loader accepts it, and the other architecture is untouched.
        prop_assert_eq!(section.kernels(Reader::Dumper).unwrap(), read.clone());
        prop_assert!(check(&hsaco, arch, 8).accepted());
        let d = dump(&hsaco);
        prop_assert_eq!(d.exit_code(), 0);
        prop_assert_eq!(d.stdout.matches("  kernel ").count(), cases.len() + usize::from(other_first));
        if other_first {
            prop_assert_eq!(hsaco.kernels(other).unwrap()[0].name, cases[0].name.as_bytes());
        }
    }
}

/// Runs every reader over `bytes`; they must return, never panic.
fn read_everything(bytes: &[u8]) {
    if let Ok(h) = parse(bytes) {
        let _ = dump(&h);
        for arch in Arch::ALL {
            let _ = check(&h, arch, 8).to_string();
            let _ = h.kernels(arch);
        }
    }
    let _ = check_bytes(bytes, Arch::Aie2p, 4);
    let _ = FullElf::parse(bytes);
    let _ = xclbin::partition(bytes);
    let _ = npu_hsaco::container::replace_section(bytes, Arch::Aie2, b"AIEK");
}

fn seeds() -> Vec<Vec<u8>> {
    let v = vectors_dir();
    vec![
        read(v.join("01_doc_example/t.hsaco")),
        read(v.join("09_fullelf_basic/vsadd_elf.hsaco")),
        read(v.join("10_fullelf_abi1_multi/multi.elf")),
        read(v.join("10_fullelf_abi1_multi/multi.hsaco")),
        read(real_dir().join("aie.xclbin")),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn readers_survive_mutated_reference_files(
        seed in 0..5usize,
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..16),
        cut in any::<prop::sample::Index>(),
        truncate in any::<bool>(),
    ) {
        let mut bytes = seeds()[seed].clone();
        for (at, value) in edits {
            let i = at.index(bytes.len());
            bytes[i] = value;
        }
        if truncate {
            bytes.truncate(cut.index(bytes.len() + 1));
        }
        read_everything(&bytes);
    }

    #[test]
    fn readers_survive_random_bytes(mut bytes in prop::collection::vec(any::<u8>(), 0..512), elf in any::<bool>()) {
        if elf && bytes.len() >= 6 {
            bytes[..4].copy_from_slice(b"\x7fELF");
        }
        read_everything(&bytes);
    }
}
