//! The crate's error type and the rules it names.
//!
//! [`Rule`] is one rule of the format or of ROCr's AIE loader; packing refuses an input that
//! breaks one ([`Error::Refused`]) and [`crate::check`] reports the first one a file breaks.
//! [`FullElfError`] and [`XclbinError`] are the reasons the two input readers give.

use std::path::PathBuf;

use crate::arch::Arch;

/// The status ROCr returns for a refused code object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HsaStatus {
    /// `HSA_STATUS_ERROR_INVALID_CODE_OBJECT`.
    InvalidCodeObject,
    /// `HSA_STATUS_ERROR_INCOMPATIBLE_ARGUMENTS` (no section for the agent's architecture).
    IncompatibleArguments,
}

impl HsaStatus {
    /// The HSA constant's name.
    pub fn name(self) -> &'static str {
        match self {
            HsaStatus::InvalidCodeObject => "HSA_STATUS_ERROR_INVALID_CODE_OBJECT",
            HsaStatus::IncompatibleArguments => "HSA_STATUS_ERROR_INCOMPATIBLE_ARGUMENTS",
        }
    }
}

/// What ROCr does with a file that breaks a [`Rule`]. This crate refuses every such file; the
/// verdict says whether ROCr agrees.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RocrVerdict {
    /// ROCr refuses the file with this status.
    Refuses(HsaStatus),
    /// ROCr crashes or throws on the file instead of returning a status (a null dereference or
    /// a `std::string` built from a null pointer); refusing it is the only safe answer.
    Faults,
    /// ROCr loads the file; this crate refuses it anyway, for the reason given.
    Accepts {
        /// Why refusing protects the user.
        because: &'static str,
    },
    /// Whether ROCr loads the file depends on something outside it (the order of a hash map);
    /// this crate refuses it, for the reason given.
    Undetermined {
        /// Why the verdict cannot be known.
        because: &'static str,
    },
}

/// One rule of the AIE hsaco format or of ROCr's loader, with the values that broke it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Rule {
    // --- container ---
    /// Shorter than an ELF64 header or without the ELF magic.
    #[error("not an ELF file (needs the \\x7fELF magic and at least 64 bytes)")]
    NotElf,
    /// ELF32 or big-endian.
    #[error("not a 64-bit little-endian ELF (class {class}, data {data})")]
    NotElf64Le { class: u8, data: u8 },
    /// `e_ident[EI_VERSION]` other than 1: libelf does not recognise the file as ELF.
    #[error(
        "e_ident[EI_VERSION] is {0}; libelf (under ROCr's ELF reader) opens only version 1 files"
    )]
    IdentVersion(u8),
    /// `e_version` other than 1: ROCr's size computation returns 0 and every section fails.
    #[error("ELF e_version is {0}; ROCr needs 1 and otherwise sees no section at all")]
    ElfVersion(u32),
    /// `e_shentsize` other than 64.
    #[error("section header entry size is {0}, not 64")]
    ShentSize(u16),
    /// The section header table does not fit in the file.
    #[error("the section header table (offset {offset}, {count} entries) lies outside the file")]
    ShdrsOutOfFile { offset: u64, count: u16 },
    /// The program header table does not fit in the file.
    #[error(
        "the program header table ({count} entries at offset {offset}) does not fit in the file"
    )]
    ProgramHeaders { offset: u64, count: u64 },
    /// `e_shstrndx` is not a section index: ROCr's ELF reader fails to open the file.
    #[error("e_shstrndx {0} does not name a section")]
    BadShstrndx(u16),
    /// The section-name table cannot be read (outside the file, empty, `SHT_NOBITS`, or a size
    /// that is not a whole number of its type's entries).
    #[error("the section-name table (section {0}) cannot be read")]
    UnreadableShstrtab(u16),
    /// A section's `sh_name` lies outside the section-name table.
    #[error("section {0}'s name offset lies outside the section-name table")]
    UnreadableSectionName(usize),
    /// A section's name has no terminating NUL inside the section-name table.
    #[error("section {0}'s name is not terminated inside the section-name table")]
    UnterminatedSectionName(usize),
    /// A section of type `SHT_NULL` other than section 0.
    #[error("section {0} has type SHT_NULL; only section 0 may")]
    NullSection(usize),
    /// A symbol table whose `sh_link` does not name a string table.
    #[error("symbol table section {section} links to section {link}, which is not a string table")]
    SymbolTableLink { section: usize, link: u32 },
    /// A relocation section whose `sh_link` is not a symbol table or whose `sh_info` is not a
    /// section index.
    #[error(
        "relocation section {section} names symbol table {link} and target section {info}, which do not both exist"
    )]
    RelocationLinks {
        section: usize,
        link: u32,
        info: u32,
    },
    /// A relocation section libelf cannot read.
    #[error(
        "relocation section {0} cannot be read (it lies outside the file or is not a whole number of 24-byte entries)"
    )]
    UnreadableRelocations(usize),
    /// No section carries the AIEK magic.
    #[error("no section carries the AIEK magic: not an AIE code object")]
    NotAieCodeObject,
    /// The only sections with the AIEK magic are ones libelf cannot read, so ROCr sees none.
    #[error(
        "section {section} carries the AIEK magic but has type {sh_type}, whose {entry_size}-byte entries do not divide its size, so libelf (and ROCr) cannot read it"
    )]
    UnreadableAieSection {
        section: usize,
        sh_type: u32,
        entry_size: u64,
    },
    /// No usable AIEK section has the agent's architecture name.
    #[error("no AIEK section named '{0}' (the agent's architecture)")]
    NoArchSection(Arch),

    // --- section table ---
    /// A section smaller than the 48-byte header.
    #[error("the section is {0} bytes, smaller than the 48-byte AIEK header")]
    SectionTooSmall(u64),
    /// The first four bytes are not `AIEK`.
    #[error("the section does not start with the AIEK magic")]
    BadMagic,
    /// `version_major` other than 1.
    #[error("section version_major is {0}; only 1 is supported")]
    VersionMajor(u16),
    /// `header_size` below 48.
    #[error("header_size is {0}, less than 48")]
    HeaderSize(u32),
    /// `kernel_entry_size` below 44.
    #[error("kernel_entry_size is {0}, less than 44")]
    EntrySize(u32),
    /// The kernel table runs past the section end.
    #[error(
        "the kernel table ({count} entries of {entry_size} bytes at {offset}) runs past the section end {size}"
    )]
    KernelTableOutOfSection {
        offset: u32,
        count: u32,
        entry_size: u32,
        size: u64,
    },
    /// The string table starts inside the kernel table.
    #[error("the string table at {offset} starts before the kernel table ends at {table_end}")]
    StringTableOverlapsKernelTable { offset: u32, table_end: u64 },
    /// The string table runs past the section end.
    #[error("the string table ({size} bytes at {offset}) runs past the section end {section_size}")]
    StringTableOutOfSection {
        offset: u32,
        size: u32,
        section_size: u64,
    },
    /// The blob pool starts inside the string table.
    #[error("the blob pool at {offset} starts before the string table ends at {strings_end}")]
    PoolOverlapsStringTable { offset: u32, strings_end: u64 },
    /// The blob pool starts past the section end.
    #[error("the blob pool at {offset} starts past the section end {size}")]
    PoolOutOfSection { offset: u32, size: u64 },
    /// A table without kernels.
    #[error("the section holds no kernels")]
    NoKernels,
    /// A section whose offsets would not fit the u32 fields.
    #[error("the section would be {0} bytes; AIEK offsets are 32-bit, so it must stay below 4 GiB")]
    SectionTooLarge(u64),

    // --- kernel entry ---
    /// `insts_size` 0.
    #[error("empty instruction stream (insts_size 0)")]
    EmptyInsts,
    /// A PdiInsts stream whose size is not a whole number of 32-bit words.
    #[error("instruction stream of {0} bytes is not a multiple of 4 (ROCr submits 32-bit words)")]
    InstsNotWordMultiple(u64),
    /// The insts blob is not inside `[pool, section end)`.
    #[error("instruction blob ({size} bytes at {offset}) lies outside the blob pool")]
    InstsOutsidePool { offset: u32, size: u32 },
    /// The PDI blob is not inside the pool.
    #[error("PDI blob ({size} bytes at {offset}) lies outside the blob pool")]
    PdiOutsidePool { offset: u32, size: u32 },
    /// `pdi_size` 0 with a non-zero `pdi_offset`.
    #[error("pdi_size is 0 but pdi_offset is {0}")]
    PdiOffsetWithoutPdi(u32),
    /// A FullElf kernel with a PDI blob.
    #[error("a FullElf kernel must not carry a PDI blob (its PDIs live in the ELF)")]
    FullElfWithPdi,
    /// `name_offset` outside the string table.
    #[error("name_offset {offset} is outside the {size}-byte string table")]
    NameOffsetOutOfTable { offset: u32, size: u32 },
    /// No NUL between the name and the end of the string table.
    #[error("the name is not NUL-terminated inside the string table")]
    NameNotTerminated,
    /// A name that is not UTF-8 (the reference dumper decodes names).
    #[error("the name is not valid UTF-8")]
    NameNotUtf8,
    /// A name with an embedded NUL, which the string table cannot hold.
    #[error("the name contains a NUL byte")]
    NameHasNul,
    /// An empty kernel name.
    #[error("the kernel name is empty")]
    EmptyName,
    /// Two kernels with one name.
    #[error("duplicate kernel name (names must be unique within a section)")]
    DuplicateName,
    /// `kind` 2 or more.
    #[error("kind {0} is not a kernel kind (0 = PdiInsts, 1 = FullElf)")]
    InvalidKind(u32),
    /// A PdiInsts kernel without a PDI.
    #[error("a PdiInsts kernel needs a PDI (ROCr refuses pdi_size 0 at load)")]
    MissingPdi,
    /// `num_cols` 0.
    #[error("num_cols is 0; a kernel needs at least one column")]
    ZeroColumns,
    /// More columns than the agent has.
    #[error("num_cols {cols} exceeds the agent's {agent} columns")]
    TooManyColumns { cols: u32, agent: u32 },
    /// A FullElf kernel on an architecture without a full-ELF format.
    #[error("FullElf kernels need aie2p; ROCr has no full-ELF format for {0}")]
    FullElfArch(Arch),
    /// A kernarg size that disagrees with the one derived from the full ELF.
    #[error(
        "kernarg_size {stored} disagrees with the full ELF's {derived} (16 bytes per buffer argument; 0 lets ROCr derive it)"
    )]
    KernargMismatch { stored: u32, derived: u32 },
    /// A column count that disagrees with the one the input file records.
    #[error("num_cols {given} disagrees with the {derived} columns recorded in the {source_kind}")]
    ColumnsMismatch {
        given: u32,
        derived: u32,
        source_kind: &'static str,
    },
    /// The nested full ELF is refused by ROCr's reader.
    #[error("full ELF: {0}")]
    FullElf(FullElfError),
    /// The kernel name is not one the nested full ELF defines.
    #[error("the full ELF defines no kernel of this name (it has: {available})")]
    NotInFullElf { available: String },
    /// A FullElf kernel whose control code loads no PDI.
    #[error("the control code has no PDI patch site, so nothing configures the array")]
    NoPdiSite,
    /// A kernarg size that is not 16 bytes for each of 1 to 16 buffer arguments.
    #[error(
        "kernarg_size {0} is not 16 bytes for each of 1 to 16 buffer arguments (16, 32, ..., 256)"
    )]
    KernargSize(u32),
    /// Entries that share one nested full ELF but give it different sizes.
    #[error(
        "the entries {names} share the nested ELF at offset {offset} but give it different sizes ({sizes})"
    )]
    SharedElfSizes {
        offset: u32,
        names: String,
        sizes: String,
    },
}

impl Rule {
    /// What ROCr does with a file that breaks this rule. Sources (the newest versions read, in
    /// ROCm/rocm-systems and its fork StefanBS/rocm-systems, over elfutils' libelf) are named in
    /// the crate documentation and next to each check.
    pub fn rocr(&self) -> RocrVerdict {
        let accepts = |because| RocrVerdict::Accepts { because };
        match self {
            Rule::NoArchSection(_) => RocrVerdict::Refuses(HsaStatus::IncompatibleArguments),
            Rule::UnreadableShstrtab(_)
            | Rule::UnreadableSectionName(_)
            | Rule::NullSection(_)
            | Rule::UnreadableRelocations(_) => RocrVerdict::Faults,
            Rule::ShentSize(_) => accepts(
                "libelf reads section headers 64 bytes apart whatever e_shentsize says, while \
                 other ELF tools step by e_shentsize and would read different headers",
            ),
            Rule::UnterminatedSectionName(_) => accepts(
                "ROCr then reads the name on into the bytes after the table, so which section \
                 it picks depends on unrelated data",
            ),
            Rule::EmptyName => accepts(
                "no kernel can be looked up by an empty name (hsa_executable_get_symbol_by_name)",
            ),
            Rule::KernargSize(_) => accepts(
                "the kernarg block holds an address and a size (16 bytes) per buffer argument, \
                 and triton-npu's dispatcher, like upstream's (TRITON_NPU_HSA_MAX_KERNARGS), \
                 passes 1 to 16 buffers",
            ),
            Rule::FullElf(e) => match e.rocr_accepts() {
                Some(because) => accepts(because),
                None => RocrVerdict::Refuses(HsaStatus::InvalidCodeObject),
            },
            Rule::SharedElfSizes { .. } => RocrVerdict::Undetermined {
                because: "ROCr parses a nested ELF once, with the size of whichever entry its \
                          kernel hash map (an unordered_map) visits first",
            },
            _ => RocrVerdict::Refuses(HsaStatus::InvalidCodeObject),
        }
    }

    /// The status ROCr returns when it refuses a file that breaks this rule; `None` when it
    /// crashes on the file or does not refuse it.
    pub fn status(&self) -> Option<HsaStatus> {
        match self.rocr() {
            RocrVerdict::Refuses(status) => Some(status),
            _ => None,
        }
    }
}

/// Where a [`Rule`] was broken: which section and which kernel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// The section name (`aie2`, `aie2p`) when the rule concerns one.
    pub section: Option<String>,
    /// The kernel name, or `#index` when the name itself is unreadable.
    pub kernel: Option<String>,
    /// The broken rule.
    pub rule: Rule,
}

impl Violation {
    /// A violation not tied to a kernel.
    pub fn new(rule: Rule) -> Violation {
        Violation {
            section: None,
            kernel: None,
            rule,
        }
    }

    /// The same violation, attributed to `kernel`.
    pub fn kernel(mut self, kernel: impl Into<String>) -> Violation {
        self.kernel = Some(kernel.into());
        self
    }

    /// The same violation, attributed to section `section`.
    pub fn section(mut self, section: impl Into<String>) -> Violation {
        self.section = Some(section.into());
        self
    }
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if let Some(section) = &self.section {
            write!(f, "section {section}: ")?;
        }
        if let Some(kernel) = &self.kernel {
            write!(f, "kernel '{kernel}': ")?;
        }
        write!(f, "{}", self.rule)
    }
}

impl std::error::Error for Violation {}

/// Why ROCr's full-ELF reader (or ours, which follows it) refuses an AIE full ELF.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FullElfError {
    #[error("not a little-endian ELF32 file")]
    NotElf32Le,
    #[error("not an aie2p AIE ELF (EI_OSABI is {0:#x}, expected 0x45)")]
    WrongOsAbi(u8),
    #[error("malformed section headers: {0}")]
    MalformedSectionHeaders(&'static str),
    #[error("missing or malformed .symtab: {0}")]
    MissingSymtab(&'static str),
    #[error("malformed .symtab: it lies outside the file")]
    MalformedSymtab,
    #[error("bad group signature symbol in section {section}")]
    BadGroupSignature { section: usize },
    #[error("bad kernel symbol for the group in section {section}")]
    BadKernelSymbol { section: usize },
    #[error("malformed group section {section} (outside the file or empty)")]
    MalformedGroup { section: usize },
    #[error("group section {section} is not a COMDAT group")]
    NotComdat { section: usize },
    #[error("group section {section} names member {member}, which does not exist")]
    GroupMemberOutOfRange { section: usize, member: u32 },
    #[error("control code section {section} holds no data (not SHT_PROGBITS)")]
    ControlCodeNotProgbits { section: usize },
    #[error("no COMDAT groups: not a group ELF")]
    NoGroups,
    #[error("malformed .rela.dyn: {0}")]
    MalformedRelaDyn(&'static str),
    #[error("relocation symbol {0} out of range")]
    RelocationSymbolOutOfRange(u32),
    #[error("bad relocation symbol name (symbol {0})")]
    BadRelocationSymbolName(u32),
    #[error("unexpected patch scheme {scheme} for PDI symbol {symbol} (expected 8, Address64)")]
    PdiScheme { symbol: String, scheme: u32 },
    #[error("ambiguous PDI: sections named {0} differ")]
    AmbiguousPdi(String),
    #[error("PDI section {0} not found")]
    PdiSectionNotFound(String),
    #[error(
        "unsupported patch scheme {scheme} for kernel argument {symbol} (expected 5, ShimDma48)"
    )]
    ArgumentScheme { symbol: String, scheme: u32 },
    #[error("kernel argument index {0} out of range (at most 4095)")]
    ArgumentIndexOutOfRange(String),
    #[error("unsupported patch scheme {scheme} for external variable {symbol} (only 8, Address64)")]
    ExternalScheme { symbol: String, scheme: u32 },
    #[error("section {0} extends past end of file")]
    SectionPastEnd(usize),
    #[error("empty control code for kernel {0}")]
    EmptyControlCode(String),
    #[error(
        "PDI patch site at {offset} does not fit the {size}-byte control code of {kernel} (needs 8 bytes, 4-aligned)"
    )]
    PdiSiteOutOfBounds {
        kernel: String,
        offset: u32,
        size: u64,
    },
    #[error("PDI patch site at offset 0 is indistinguishable from no patch ({0})")]
    PdiSiteAtZero(String),
    #[error(
        "argument patch site at {offset} does not fit the {size}-byte control code of {kernel} (needs 12 bytes, 4-aligned)"
    )]
    ArgumentSiteOutOfBounds {
        kernel: String,
        offset: u32,
        size: u64,
    },
    #[error(
        "external variable {symbol} patch site at {offset} does not fit the {size}-byte control code of {kernel}"
    )]
    ExternalSiteOutOfBounds {
        kernel: String,
        symbol: String,
        offset: u32,
        size: u64,
    },
    #[error("no dispatchable kernels (no COMDAT group holds a .ctrltext section)")]
    NoDispatchableKernels,
    #[error("two groups both define kernel {0}")]
    DuplicateKernel(String),
    #[error("kernel name {0:?} is not valid UTF-8")]
    NameNotUtf8(String),
    #[error("malformed .note.xrt.configuration: {0}")]
    BadConfigurationNote(&'static str),
    #[error(
        "section {0} is truncated: its last entry runs past the end of the file (ROCr reads only its whole entries)"
    )]
    TruncatedTable(usize),
    #[error(
        "unsupported relocation symbol {0:?} (neither a PDI, an argument index nor a UTF-8 external variable name)"
    )]
    UnsupportedRelocationSymbol(String),
}

impl FullElfError {
    /// Why this crate refuses a full ELF that ROCr's reader accepts, or `None` when ROCr refuses
    /// it too.
    pub fn rocr_accepts(&self) -> Option<&'static str> {
        match self {
            FullElfError::DuplicateKernel(_) => Some(
                "ROCr silently keeps the first group of the name, so which control code runs is \
                 not what the file's other group says",
            ),
            FullElfError::NameNotUtf8(_) => {
                Some("the packer's kernel names are text; ROCr treats names as bytes")
            }
            FullElfError::BadConfigurationNote(_) => Some(
                "ROCr does not read the note, but the packer takes the partition width from it \
                 and a malformed note means the width is unknown",
            ),
            FullElfError::TruncatedTable(_) => {
                Some("a table that runs past the end of the file means the file is truncated")
            }
            _ => None,
        }
    }
}

/// Why an xclbin (axlf container) cannot give a PDI and column count.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum XclbinError {
    #[error("not an xclbin: the file does not start with the axlf magic \"xclbin2\\0\"")]
    BadMagic,
    #[error("truncated: {0}")]
    Truncated(&'static str),
    #[error("section {index} ({size} bytes at {offset}) lies outside the file")]
    SectionOutOfFile { index: u32, offset: u64, size: u64 },
    #[error("no AIE_PARTITION section (kind 32); was it built for an NPU?")]
    NoAiePartition,
    #[error("{0} AIE_PARTITION sections; exactly one is supported")]
    SeveralAiePartitions(usize),
    #[error("malformed AIE_PARTITION: {0}")]
    MalformedPartition(&'static str),
    #[error("AIE_PARTITION holds {0} PDIs; exactly one is supported")]
    PdiCount(u32),
    #[error("the AIE_PARTITION PDI image is empty")]
    EmptyPdi,
    #[error("AIE_PARTITION column_width is 0")]
    ZeroColumnWidth,
}

/// A refusal, saying why when ROCr itself would load the file.
fn refusal(v: &Violation) -> String {
    match v.rule.rocr() {
        RocrVerdict::Accepts { because } => {
            format!("{v} (refused here, ROCr accepts it, because {because})")
        }
        RocrVerdict::Undetermined { because } => {
            format!("{v} (refused here, ROCr may accept it, because {because})")
        }
        _ => v.to_string(),
    }
}

/// Why an existing file cannot receive an AIE section.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ContainerError {
    #[error("{0}")]
    Unreadable(Rule),
    #[error("section {0} lies outside the file")]
    SectionOutOfFile(usize),
    #[error("the file uses extended section numbering, which is not supported")]
    ExtendedNumbering,
    #[error("the section-name table itself is named '{0}', so it cannot be replaced")]
    NameTableNamedLikeArch(Arch),
    #[error("ROCr would not load the file with the new section: {0}")]
    NotLoadable(Rule),
}

/// Everything that can go wrong in this crate.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Packing refused: the result would break a format or loader rule.
    #[error("{}", refusal(.0))]
    Refused(Violation),
    /// A full ELF that cannot be read.
    #[error("full ELF: {0}")]
    FullElf(FullElfError),
    /// An xclbin that cannot be read.
    #[error("xclbin: {0}")]
    Xclbin(XclbinError),
    /// An existing hsaco that cannot take an AIE section.
    #[error("hsaco container: {0}")]
    Container(ContainerError),
    /// A `--kernel` specification or option group that does not follow the grammar.
    #[error("{0}")]
    Spec(String),
    /// An input file that cannot be read or an output that cannot be written.
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// An error about a named input file.
    #[error("{}: {source}", path.display())]
    Input { path: PathBuf, source: Box<Error> },
}

impl Error {
    /// Attributes the error to input file `path`.
    pub fn in_file(self, path: impl Into<PathBuf>) -> Error {
        Error::Input {
            path: path.into(),
            source: Box::new(self),
        }
    }

    /// The broken rule, when packing was refused.
    pub fn violation(&self) -> Option<&Violation> {
        match self {
            Error::Refused(v) => Some(v),
            Error::Input { source, .. } => source.violation(),
            _ => None,
        }
    }
}

impl From<Violation> for Error {
    fn from(v: Violation) -> Error {
        Error::Refused(v)
    }
}

impl From<FullElfError> for Error {
    fn from(e: FullElfError) -> Error {
        Error::FullElf(e)
    }
}

impl From<XclbinError> for Error {
    fn from(e: XclbinError) -> Error {
        Error::Xclbin(e)
    }
}

impl From<ContainerError> for Error {
    fn from(e: ContainerError) -> Error {
        Error::Container(e)
    }
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
