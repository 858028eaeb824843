//! The two AIE architectures an hsaco section can target.

use std::fmt;
use std::str::FromStr;

/// An AIE architecture; its name is also the name of its hsaco section and of ROCr's agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Arch {
    /// AIE2 (npu1: Phoenix, Hawk Point).
    Aie2,
    /// AIE2P (npu2 and later: Strix, Strix Halo, Krackan, Gorgon Point).
    Aie2p,
}

impl Arch {
    /// Both architectures, in the order the reference dumper prints them.
    pub const ALL: [Arch; 2] = [Arch::Aie2, Arch::Aie2p];

    /// The section and agent name: `aie2` or `aie2p`.
    pub fn name(self) -> &'static str {
        match self {
            Arch::Aie2 => "aie2",
            Arch::Aie2p => "aie2p",
        }
    }

    /// Parses a section or agent name.
    pub fn from_name(name: &str) -> Option<Arch> {
        match name {
            "aie2" => Some(Arch::Aie2),
            "aie2p" => Some(Arch::Aie2p),
            _ => None,
        }
    }

    /// The column count ROCr reports for an agent of this architecture: npu1 agents expose the
    /// device columns minus one (4), npu4-class agents all 8 (`GetNodeProperties` in
    /// `amd_xdna_driver.cpp`). No agent has more, so packing refuses wider kernels.
    pub fn default_agent_columns(self) -> u32 {
        match self {
            Arch::Aie2 => 4,
            Arch::Aie2p => 8,
        }
    }

    /// Whether ROCr has a full-ELF (kind `FullElf`) format for this architecture.
    pub fn supports_full_elf(self) -> bool {
        self == Arch::Aie2p
    }
}

impl fmt::Display for Arch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Arch {
    type Err = String;

    fn from_str(s: &str) -> Result<Arch, String> {
        Arch::from_name(s)
            .ok_or_else(|| format!("unknown AIE architecture '{s}' (expected aie2 or aie2p)"))
    }
}
