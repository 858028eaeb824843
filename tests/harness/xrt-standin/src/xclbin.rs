//! The parts of an xclbin (axlf container) that XRT reads to know a kernel: the kernels and
//! their arguments from `EMBEDDED_METADATA` (XML), the memory connection of each argument from
//! `CONNECTIVITY`. Layout: XRT's `xrt/detail/xclbin.h`.

const MAGIC: &[u8; 8] = b"xclbin2\0";
// struct axlf: magic(8) + signature length(4) + reserved(28) + key block(256) + unique id(8),
// then struct axlf_header (152 bytes), then the section headers (40 bytes each).
const HEADER_AT: usize = 304;
const NUM_SECTIONS_AT: usize = HEADER_AT + 144;
const SECTIONS_AT: usize = HEADER_AT + 152;
const SECTION_HEADER_SIZE: usize = 40;
const EMBEDDED_METADATA: u32 = 2;
const CONNECTIVITY: u32 = 7;

/// An argument as the metadata declares it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArgKind {
    /// Passed by value, `size` bytes.
    Scalar { size: usize },
    /// A buffer, allocated in memory group `group`.
    Global { group: i32 },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Arg {
    pub name: String,
    pub kind: ArgKind,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Kernel {
    pub name: String,
    /// Indexed by argument id.
    pub args: Vec<Arg>,
}

#[derive(Debug, Clone)]
pub struct Xclbin {
    pub kernels: Vec<Kernel>,
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

fn number(text: &str) -> Option<u64> {
    let t = text.trim();
    match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => t.parse().ok(),
    }
}

/// Parses an xclbin file's bytes.
pub fn parse(bytes: &[u8]) -> Result<Xclbin, String> {
    if bytes.get(..8) != Some(MAGIC.as_slice()) {
        return Err("not an xclbin (no xclbin2 magic)".into());
    }
    let count = u32_at(bytes, NUM_SECTIONS_AT).ok_or("xclbin header is truncated")? as usize;
    let mut metadata = None;
    let mut connectivity = None;
    for i in 0..count {
        let at = SECTIONS_AT + i * SECTION_HEADER_SIZE;
        let kind = u32_at(bytes, at).ok_or("xclbin section table is truncated")?;
        let offset = u64_at(bytes, at + 24).ok_or("xclbin section table is truncated")? as usize;
        let size = u64_at(bytes, at + 32).ok_or("xclbin section table is truncated")? as usize;
        let data = offset
            .checked_add(size)
            .and_then(|end| bytes.get(offset..end))
            .ok_or_else(|| format!("xclbin section {i} lies outside the file"))?;
        match kind {
            EMBEDDED_METADATA => metadata = Some(data),
            CONNECTIVITY => connectivity = Some(data),
            _ => {}
        }
    }
    let metadata = metadata
        .ok_or("the xclbin has no EMBEDDED_METADATA section, so XRT finds no kernels in it")?;
    let connections = connectivity.map(parse_connectivity).transpose()?;
    let kernels = parse_metadata(metadata, connections.as_deref())?;
    Ok(Xclbin { kernels })
}

/// `(argument index, memory index)` pairs.
fn parse_connectivity(data: &[u8]) -> Result<Vec<(i32, i32)>, String> {
    let count = u32_at(data, 0).ok_or("CONNECTIVITY section is truncated")? as usize;
    (0..count)
        .map(|i| {
            let at = 4 + i * 12;
            match (u32_at(data, at), u32_at(data, at + 8)) {
                (Some(arg), Some(mem)) => Ok((arg as i32, mem as i32)),
                _ => Err("CONNECTIVITY section is truncated".to_owned()),
            }
        })
        .collect()
}

fn parse_metadata(xml: &[u8], connections: Option<&[(i32, i32)]>) -> Result<Vec<Kernel>, String> {
    let text = std::str::from_utf8(xml)
        .map_err(|_| "EMBEDDED_METADATA is not UTF-8 text".to_owned())?
        .trim_end_matches('\0');
    let doc = roxmltree::Document::parse(text)
        .map_err(|e| format!("EMBEDDED_METADATA is not XML: {e}"))?;
    let mut kernels = Vec::new();
    for node in doc.descendants().filter(|n| n.has_tag_name("kernel")) {
        let name = node
            .attribute("name")
            .ok_or("a <kernel> in EMBEDDED_METADATA has no name")?;
        let mut args: Vec<(usize, Arg)> = Vec::new();
        for arg in node.children().filter(|n| n.has_tag_name("arg")) {
            let field = |attr: &str| {
                arg.attribute(attr)
                    .ok_or_else(|| format!("kernel {name}: an <arg> has no {attr}"))
            };
            let id = number(field("id")?)
                .ok_or_else(|| format!("kernel {name}: bad argument id"))?
                as usize;
            let arg_name = field("name")?.to_owned();
            let kind = match field("addressQualifier")? {
                "0" => ArgKind::Scalar {
                    size: number(field("size")?)
                        .ok_or_else(|| format!("kernel {name}: bad size of {arg_name}"))?
                        as usize,
                },
                "1" => ArgKind::Global {
                    group: group_of(id, connections),
                },
                q => return Err(format!("kernel {name}: unknown addressQualifier {q}")),
            };
            args.push((
                id,
                Arg {
                    name: arg_name,
                    kind,
                },
            ));
        }
        args.sort_by_key(|(id, _)| *id);
        if args.iter().enumerate().any(|(i, (id, _))| i != *id) {
            return Err(format!("kernel {name}: argument ids are not 0..n"));
        }
        kernels.push(Kernel {
            name: name.to_owned(),
            args: args.into_iter().map(|(_, a)| a).collect(),
        });
    }
    Ok(kernels)
}

/// XRT's rule: the largest memory index the argument connects to. Without a CONNECTIVITY
/// section, the layout aiecc writes: the instruction buffer (argument 1) in bank 1 ("SRAM"),
/// every other buffer in bank 0 ("HOST").
fn group_of(arg: usize, connections: Option<&[(i32, i32)]>) -> i32 {
    match connections {
        Some(list) => list
            .iter()
            .filter(|(a, _)| *a as usize == arg)
            .map(|(_, m)| *m)
            .max()
            .unwrap_or(-1),
        None => i32::from(arg == 1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const XML: &str = r#"<?xml version="1.0"?><project><platform><device><core>
        <kernel name="MLIR_AIE" language="c">
          <arg name="ninstr" addressQualifier="0" id="2" size="0x4"/>
          <arg name="opcode" addressQualifier="0" id="0" size="0x8"/>
          <arg name="instr" addressQualifier="1" id="1" size="0x8"/>
          <arg name="bo0" addressQualifier="1" id="3" size="0x8"/>
          <arg name="bo1" addressQualifier="1" id="4" size="0x8"/>
        </kernel></core></device></platform></project>"#;

    #[test]
    fn arguments_come_sorted_with_their_groups() {
        let kernels = parse_metadata(XML.as_bytes(), None).unwrap();
        assert_eq!(kernels.len(), 1);
        let kinds: Vec<_> = kernels[0]
            .args
            .iter()
            .map(|a| (a.name.as_str(), a.kind.clone()))
            .collect();
        assert_eq!(
            kinds,
            vec![
                ("opcode", ArgKind::Scalar { size: 8 }),
                ("instr", ArgKind::Global { group: 1 }),
                ("ninstr", ArgKind::Scalar { size: 4 }),
                ("bo0", ArgKind::Global { group: 0 }),
                ("bo1", ArgKind::Global { group: 0 }),
            ]
        );
    }

    #[test]
    fn connectivity_decides_groups_when_present() {
        // count 3: (arg 1 → bank 4), (arg 3 → bank 2), (arg 3 → bank 5); arg 4 unconnected.
        let mut section = 3u32.to_le_bytes().to_vec();
        for (arg, mem) in [(1u32, 4u32), (3, 2), (3, 5)] {
            for w in [arg, 0, mem] {
                section.extend_from_slice(&w.to_le_bytes());
            }
        }
        let connections = parse_connectivity(&section).unwrap();
        let kernels = parse_metadata(XML.as_bytes(), Some(&connections)).unwrap();
        let groups: Vec<_> = kernels[0]
            .args
            .iter()
            .filter_map(|a| match a.kind {
                ArgKind::Global { group } => Some(group),
                ArgKind::Scalar { .. } => None,
            })
            .collect();
        assert_eq!(
            groups,
            vec![4, 5, -1],
            "the largest bank; -1 without a connection"
        );
        assert!(parse_connectivity(&3u32.to_le_bytes()).is_err());
    }

    #[test]
    fn refuses_what_xrt_would_not_read() {
        assert!(parse(b"not an xclbin").unwrap_err().contains("magic"));
        let mut header = b"xclbin2\0".to_vec();
        header.resize(SECTIONS_AT, 0);
        assert!(parse(&header).unwrap_err().contains("EMBEDDED_METADATA"));
        let gap = XML.replace("id=\"4\"", "id=\"7\"");
        assert!(
            parse_metadata(gap.as_bytes(), None)
                .unwrap_err()
                .contains("0..n")
        );
    }
}
