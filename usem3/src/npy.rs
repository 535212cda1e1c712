//! The `.npy` format (numpy's one-array file), as far as `weights.npz` needs it.
//!
//! A file is a magic string, a version, a little header that is a Python dict literal
//! (`{'descr': '<f4', 'fortran_order': False, 'shape': (512, 256), }`) and then the raw
//! elements in C order. Only the dtypes the weights use are understood (little-endian
//! float32/float64, uint8, int8); anything else is an error rather than a guess.

use crate::Error;

/// The element types found in `weights.npz`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dtype {
    F32,
    F64,
    U8,
    I8,
}

impl Dtype {
    fn parse(descr: &str) -> Option<Self> {
        // '|' means "byte order not applicable"; one-byte types may also say '<' or '='.
        match descr {
            "<f4" => Some(Dtype::F32),
            "<f8" => Some(Dtype::F64),
            "|u1" | "<u1" | "=u1" => Some(Dtype::U8),
            "|i1" | "<i1" | "=i1" => Some(Dtype::I8),
            _ => None,
        }
    }

    fn size(self) -> usize {
        match self {
            Dtype::F32 => 4,
            Dtype::F64 => 8,
            Dtype::U8 | Dtype::I8 => 1,
        }
    }
}

/// One array: its shape and its elements' bytes (little-endian, C order).
#[derive(Debug)]
pub struct Array {
    pub dtype: Dtype,
    pub shape: Vec<usize>,
    /// The file's bytes; the elements start at `data_offset`. Kept whole so that a 4 MB
    /// uint8 block is not copied just to drop its ~128-byte header.
    bytes: Vec<u8>,
    data_offset: usize,
}

impl Array {
    /// Parses a whole `.npy` file. `name` only labels errors.
    pub fn parse(name: &str, bytes: Vec<u8>) -> Result<Self, Error> {
        let bad = |reason: String| Error::Npy {
            name: name.to_owned(),
            reason,
        };
        if bytes.len() < 10 || &bytes[..6] != b"\x93NUMPY" {
            return Err(bad("not an .npy file (bad magic)".into()));
        }
        // Version 1 has a u16 header length; versions 2 and 3 a u32 (3 only allows UTF-8).
        let (header_len, header_start) = match bytes[6] {
            1 => (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10),
            2 | 3 if bytes.len() >= 12 => (
                u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize,
                12,
            ),
            version => return Err(bad(format!("unsupported .npy version {version}"))),
        };
        let data_offset = header_start + header_len;
        let header = bytes
            .get(header_start..data_offset)
            .and_then(|h| std::str::from_utf8(h).ok())
            .ok_or_else(|| bad("truncated or non-UTF-8 header".into()))?;

        let descr = dict_value(header, "descr")
            .and_then(quoted)
            .ok_or_else(|| bad(format!("no 'descr' in header {header:?}")))?;
        let dtype =
            Dtype::parse(descr).ok_or_else(|| bad(format!("unsupported dtype {descr:?}")))?;
        match dict_value(header, "fortran_order") {
            Some(v) if v.starts_with("False") => {}
            Some(v) if v.starts_with("True") => {
                return Err(bad("Fortran-order arrays are not supported".into()));
            }
            _ => return Err(bad(format!("no 'fortran_order' in header {header:?}"))),
        }
        let shape = dict_value(header, "shape")
            .and_then(parse_shape)
            .ok_or_else(|| bad(format!("no readable 'shape' in header {header:?}")))?;

        let count: usize = shape.iter().product();
        let expected = count * dtype.size();
        let found = bytes.len() - data_offset;
        if found != expected {
            return Err(bad(format!(
                "{expected} bytes of data expected for shape {shape:?}, found {found}"
            )));
        }
        Ok(Array {
            dtype,
            shape,
            bytes,
            data_offset,
        })
    }

    fn data(&self) -> &[u8] {
        &self.bytes[self.data_offset..]
    }

    /// The elements as f32 (float32 arrays only).
    pub fn to_f32(&self) -> Option<Vec<f32>> {
        (self.dtype == Dtype::F32).then(|| {
            self.data()
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect()
        })
    }

    /// The elements as f64 (float64 arrays only).
    pub fn to_f64(&self) -> Option<Vec<f64>> {
        (self.dtype == Dtype::F64).then(|| {
            self.data()
                .chunks_exact(8)
                .map(|b| f64::from_le_bytes(b.try_into().expect("chunks of 8")))
                .collect()
        })
    }

    /// The elements of a uint8 array, reusing the file's buffer.
    pub fn into_u8(mut self) -> Option<Vec<u8>> {
        (self.dtype == Dtype::U8).then(|| {
            self.bytes.drain(..self.data_offset);
            self.bytes
        })
    }
}

/// The text of `key`'s value in the header dict, up to the end of the header (the callers
/// only read its start).
fn dict_value<'a>(header: &'a str, key: &str) -> Option<&'a str> {
    ["'", "\""].iter().find_map(|q| {
        let pattern = format!("{q}{key}{q}");
        let after = &header[header.find(&pattern)? + pattern.len()..];
        Some(after.trim_start().strip_prefix(':')?.trim_start())
    })
}

/// The content of a string literal at the start of `text`.
fn quoted(text: &str) -> Option<&str> {
    let q = text.chars().next().filter(|&c| c == '\'' || c == '"')?;
    let rest = &text[1..];
    Some(&rest[..rest.find(q)?])
}

/// A Python tuple of integers at the start of `text`: `()`, `(7,)`, `(7530, 512)`.
fn parse_shape(text: &str) -> Option<Vec<usize>> {
    let inner = text.strip_prefix('(')?;
    inner[..inner.find(')')?]
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| s.parse().ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn npy(header: &str, data: &[u8]) -> Vec<u8> {
        let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
        bytes.extend_from_slice(&(header.len() as u16).to_le_bytes());
        bytes.extend_from_slice(header.as_bytes());
        bytes.extend_from_slice(data);
        bytes
    }

    #[test]
    fn reads_a_float32_matrix() {
        let data: Vec<u8> = [1.0f32, -2.5, 3.0, 0.25, 5.0, 6.0]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        let header = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }    \n";
        let array = Array::parse("m", npy(header, &data)).unwrap();
        assert_eq!(array.shape, vec![2, 3]);
        assert_eq!(
            array.to_f32().unwrap(),
            vec![1.0, -2.5, 3.0, 0.25, 5.0, 6.0]
        );
    }

    #[test]
    fn reads_scalars_and_bytes() {
        let header = "{'descr': '<f8', 'fortran_order': False, 'shape': (), }\n";
        let array = Array::parse("eps", npy(header, &1e-12f64.to_le_bytes())).unwrap();
        assert!(array.shape.is_empty());
        assert_eq!(array.to_f64().unwrap(), vec![1e-12]);

        let header = "{'descr': '|u1', 'fortran_order': False, 'shape': (3,), }\n";
        let array = Array::parse("q", npy(header, &[7, 8, 9])).unwrap();
        assert_eq!(array.shape, vec![3]);
        assert_eq!(array.into_u8().unwrap(), vec![7, 8, 9]);
    }

    #[test]
    fn rejects_what_it_does_not_understand() {
        let header = "{'descr': '>f4', 'fortran_order': False, 'shape': (1,), }\n";
        assert!(Array::parse("x", npy(header, &[0; 4])).is_err());
        let header = "{'descr': '<f4', 'fortran_order': True, 'shape': (1,), }\n";
        assert!(Array::parse("x", npy(header, &[0; 4])).is_err());
        let header = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }\n";
        assert!(Array::parse("x", npy(header, &[0; 4])).is_err());
        assert!(Array::parse("x", b"PK\x03\x04".to_vec()).is_err());
    }
}
