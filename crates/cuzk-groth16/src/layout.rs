//! Where a `.params` file's five queries lie ([`ParamsLayout`], one [`Section`] each):
//! what a reader needs to find the points without decoding them. Parsed and checked by
//! [`crate::format`].

/// Where one query's points lie in a `.params` file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Section {
    /// "h", "l", "a", "b_g1" or "b_g2", as in errors.
    pub name: &'static str,
    /// Byte offset of the first point (after the count).
    pub offset: u64,
    pub count: usize,
    /// 96 (G1) or 192 (G2).
    pub point_bytes: usize,
}

impl Section {
    pub fn bytes(&self) -> u64 {
        (self.count * self.point_bytes) as u64
    }

    /// Byte offset of point `index`.
    pub fn point_offset(&self, index: usize) -> u64 {
        self.offset + (index * self.point_bytes) as u64
    }
}

/// Where a `.params` file's five queries lie, with every count checked against the
/// file's length, against each other and against the verifying key's inputs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParamsLayout {
    /// Public inputs, the constant one included (the verifying key's IC length).
    pub inputs: usize,
    pub h: Section,
    pub l: Section,
    pub a: Section,
    pub b_g1: Section,
    pub b_g2: Section,
    /// The file's length: a reader of the sections checks the file still has it.
    pub file_len: u64,
}

impl ParamsLayout {
    pub fn sections(&self) -> [&Section; 5] {
        [&self.h, &self.l, &self.a, &self.b_g1, &self.b_g2]
    }

    /// The evaluation domain size these parameters were made for.
    pub fn domain_size(&self) -> usize {
        self.h.count + 1
    }

    /// Host bytes the set takes once read ([`crate::params::ParameterSet::size_bytes`]):
    /// every query's points decoded, or (`points_in_file`) only the public inputs' rows
    /// of A and B, the others left in the file for the GPUs
    /// ([`crate::format::read_params_layout`]). Known from the header alone, before
    /// any point is read.
    pub fn host_bytes(&self, points_in_file: bool) -> usize {
        let (g1, g2) = if points_in_file {
            let b = self.inputs.min(self.b_g1.count);
            (self.inputs + b, b)
        } else {
            (self.h.count + self.l.count + self.a.count + self.b_g1.count, self.b_g2.count)
        };
        host_bytes(self.inputs, g1, g2)
    }
}

/// Host bytes of a set holding `ic` input points of the verifying key and `g1`, `g2`
/// query points ([`crate::params::ParameterSet::size_bytes`]; from a file's header,
/// [`ParamsLayout::host_bytes`]).
pub(crate) fn host_bytes(ic: usize, g1: usize, g2: usize) -> usize {
    (ic + g1) * std::mem::size_of::<blstrs::G1Affine>() + g2 * std::mem::size_of::<blstrs::G2Affine>()
}
