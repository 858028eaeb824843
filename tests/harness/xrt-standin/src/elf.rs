//! A small ELF32 reader for AIE full ELFs: which kernel instances the ELF holds and their
//! control code. Layout (see `tests/fixtures/hsaco-vectors/README.md`): `.symtab` holds the kernel
//! symbol (a mangled name such as `_Z4mainPcPcPc`) and instance symbols whose `st_shndx` is the
//! kernel symbol's index; one COMDAT `.group.N` per instance, whose `sh_info` is the instance
//! symbol and whose members include that instance's `.ctrltext.N`.

const SHT_SYMTAB: u32 = 2;
const SHT_GROUP: u32 = 17;

/// One `<kernel>:<instance>` and its control code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Instance {
    pub name: String,
    pub ctrltext: Vec<u8>,
}

struct Section {
    name: u32,
    kind: u32,
    offset: usize,
    size: usize,
    link: u32,
    info: u32,
}

struct Reader<'a> {
    bytes: &'a [u8],
    sections: Vec<Section>,
    shstrndx: usize,
}

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

impl<'a> Reader<'a> {
    fn new(bytes: &'a [u8]) -> Result<Reader<'a>, String> {
        if bytes.get(..4) != Some(b"\x7fELF".as_slice()) {
            return Err("not an ELF file".into());
        }
        if bytes.get(4) != Some(&1) || bytes.get(5) != Some(&1) {
            return Err("not a little-endian ELF32 file (AIE full ELFs are)".into());
        }
        let truncated = || "the ELF header is truncated".to_owned();
        let shoff = u32_at(bytes, 32).ok_or_else(truncated)? as usize;
        let shentsize = u16_at(bytes, 46).ok_or_else(truncated)? as usize;
        let shnum = u16_at(bytes, 48).ok_or_else(truncated)? as usize;
        if shentsize != 40 {
            return Err(format!("section header size {shentsize}, expected 40"));
        }
        let mut sections = Vec::with_capacity(shnum);
        for i in 0..shnum {
            let at = shoff + i * 40;
            let field = |o: usize| {
                u32_at(bytes, at + o).ok_or_else(|| format!("section header {i} is truncated"))
            };
            let section = Section {
                name: field(0)?,
                kind: field(4)?,
                offset: field(16)? as usize,
                size: field(20)? as usize,
                link: field(24)?,
                info: field(28)?,
            };
            if section.kind != 8
                && bytes
                    .get(section.offset..section.offset + section.size)
                    .is_none()
            {
                return Err(format!("section {i} lies outside the file"));
            }
            sections.push(section);
        }
        let shstrndx = u16_at(bytes, 50).ok_or_else(truncated)? as usize;
        if shstrndx >= sections.len() {
            return Err("no section name table".into());
        }
        Ok(Reader {
            bytes,
            sections,
            shstrndx,
        })
    }

    fn data(&self, index: usize) -> Result<&'a [u8], String> {
        let s = self
            .sections
            .get(index)
            .ok_or_else(|| format!("section index {index} out of range"))?;
        Ok(&self.bytes[s.offset..s.offset + s.size])
    }

    fn string(&self, table: usize, offset: u32) -> Result<String, String> {
        let data = self.data(table)?;
        let tail = data
            .get(offset as usize..)
            .ok_or_else(|| format!("string offset {offset} out of range"))?;
        let end = tail.iter().position(|b| *b == 0).unwrap_or(tail.len());
        Ok(String::from_utf8_lossy(&tail[..end]).into_owned())
    }

    fn section_name(&self, index: usize) -> Result<String, String> {
        self.string(self.shstrndx, self.sections[index].name)
    }
}

/// `(name offset, shndx)` of symbol `index` in a symbol table section.
fn symbol(reader: &Reader<'_>, symtab: usize, index: usize) -> Result<(u32, u16), String> {
    let data = reader.data(symtab)?;
    let at = index * 16;
    match (u32_at(data, at), u16_at(data, at + 14)) {
        (Some(name), Some(shndx)) => Ok((name, shndx)),
        _ => Err(format!("symbol {index} out of range")),
    }
}

/// The plain name in an Itanium-mangled function symbol (`_Z4mainPcPcPc` → `main`); other
/// names are returned as they are.
pub fn base_name(symbol: &str) -> &str {
    let Some(rest) = symbol.strip_prefix("_Z") else {
        return symbol;
    };
    let digits = rest.chars().take_while(char::is_ascii_digit).count();
    match rest[..digits].parse::<usize>() {
        Ok(len) if rest.len() >= digits + len => &rest[digits..digits + len],
        _ => symbol,
    }
}

/// Every kernel instance of a full ELF.
pub fn instances(bytes: &[u8]) -> Result<Vec<Instance>, String> {
    let reader = Reader::new(bytes)?;
    let mut found = Vec::new();
    for (index, section) in reader.sections.iter().enumerate() {
        if section.kind != SHT_GROUP {
            continue;
        }
        let symtab = section.link as usize;
        if reader.sections.get(symtab).map(|s| s.kind) != Some(SHT_SYMTAB) {
            return Err(format!(
                "group section {index} does not link to a symbol table"
            ));
        }
        let strtab = reader.sections[symtab].link as usize;
        let (instance_name, kernel_index) = symbol(&reader, symtab, section.info as usize)?;
        let (kernel_name, _) = symbol(&reader, symtab, kernel_index as usize)?;
        let kernel = reader.string(strtab, kernel_name)?;
        let instance = reader.string(strtab, instance_name)?;
        let members = reader.data(index)?;
        let mut ctrltext = None;
        for word in members.chunks_exact(4).skip(1) {
            let member = u32::from_le_bytes([word[0], word[1], word[2], word[3]]) as usize;
            if member < reader.sections.len()
                && reader.section_name(member)?.starts_with(".ctrltext")
            {
                ctrltext = Some(reader.data(member)?.to_vec());
            }
        }
        let name = format!("{}:{instance}", base_name(&kernel));
        let ctrltext =
            ctrltext.ok_or_else(|| format!("kernel instance {name} has no .ctrltext section"))?;
        found.push(Instance { name, ctrltext });
    }
    if found.is_empty() {
        return Err("the ELF holds no kernel instance (no COMDAT .group section)".into());
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_names() {
        assert_eq!(base_name("_Z4mainPcPcPc"), "main");
        assert_eq!(base_name("_Z6vecaddPiS_"), "vecadd");
        assert_eq!(base_name("plain"), "plain");
        assert_eq!(base_name("_Z99x"), "_Z99x");
    }

    #[test]
    fn reads_the_reference_vectors() {
        let dir =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/hsaco-vectors");
        let read = |name: &str| {
            let path = dir.join(name);
            std::fs::read(&path).unwrap_or_else(|e| panic!("fixture {}: {e}", path.display()))
        };
        let basic = read("09_fullelf_basic/aie.elf");
        let multi = read("10_fullelf_abi1_multi/multi.elf");
        let basic = instances(&basic).unwrap();
        assert_eq!(basic.len(), 1);
        assert_eq!(basic[0].name, "main:sequence");
        assert_eq!(basic[0].ctrltext.len(), 96);
        let multi = instances(&multi).unwrap();
        let names: Vec<_> = multi
            .iter()
            .map(|i| (i.name.as_str(), i.ctrltext.len()))
            .collect();
        assert_eq!(names, vec![("vecadd:inst_a", 128), ("vecadd:inst_b", 160)]);
    }

    #[test]
    fn refuses_what_is_not_a_full_elf() {
        assert!(instances(b"nope").unwrap_err().contains("not an ELF"));
        let mut elf64 = b"\x7fELF\x02\x01".to_vec();
        elf64.resize(64, 0);
        assert!(instances(&elf64).unwrap_err().contains("ELF32"));
    }
}
