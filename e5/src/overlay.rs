//! Trained layers laid over the base weights: a safetensors file whose tensors carry the
//! container's names (`l11.q.w`, `l11.aln.b`, …) and replace those tensors at load.
//!
//! Written by `scripts/training/train.py`. A linear layer's weight is int8 (rows × cols) with
//! one f32 scale per row under the same name ending in `.s` (a quarter of f32's size, and the
//! forward pass dequantises every layer to f32 at load anyway); biases and layer norms are f32.

use std::{collections::HashMap, path::Path};

use crate::error::{OrFormat, Result, bail_format, ensure_format};
use safetensors::{Dtype, SafeTensors};

pub struct Overlay {
    tensors: HashMap<String, Vec<f32>>,
    metadata: HashMap<String, String>,
}

impl Overlay {
    pub fn read(path: &Path) -> Result<Self> {
        let bytes = std::fs::read(path).map_err(crate::Error::io(path))?;
        Self::parse(&bytes).or_format(|| format!("reading {}", path.display()))
    }

    pub fn parse(bytes: &[u8]) -> Result<Self> {
        let (_, header) = SafeTensors::read_metadata(bytes)
            .or_format(|| "reading the overlay's header".into())?;
        let metadata = header.metadata().clone().unwrap_or_default();
        let file = SafeTensors::deserialize(bytes).or_format(|| "reading the overlay".into())?;
        let mut tensors = HashMap::new();
        for (name, view) in file.tensors() {
            if name.ends_with(".s") {
                continue; // read with its weight
            }
            let values = match view.dtype() {
                Dtype::F32 => view
                    .data()
                    .chunks_exact(4)
                    .map(|c| f32::from_le_bytes(c.try_into().expect("chunks of 4")))
                    .collect(),
                Dtype::I8 => {
                    let shape = view.shape();
                    ensure_format!(shape.len() == 2, "{name}: an int8 tensor must be a matrix");
                    let (rows, cols) = (shape[0], shape[1]);
                    let scale_name = format!("{}.s", name.trim_end_matches(".w"));
                    let scales = file
                        .tensor(&scale_name)
                        .or_format(|| format!("{name} has no row scales {scale_name}"))?;
                    ensure_format!(
                        scales.dtype() == Dtype::F32 && scales.shape() == [rows],
                        "{scale_name}: expected {rows} f32 scales"
                    );
                    let scales: Vec<f32> = scales
                        .data()
                        .chunks_exact(4)
                        .map(|c| f32::from_le_bytes(c.try_into().expect("chunks of 4")))
                        .collect();
                    view.data()
                        .chunks_exact(cols)
                        .zip(&scales)
                        .flat_map(|(row, &scale)| row.iter().map(move |&q| q as i8 as f32 * scale))
                        .collect()
                }
                other => bail_format!("{name}: unsupported dtype {other:?}"),
            };
            tensors.insert(name, values);
        }
        Ok(Self { tensors, metadata })
    }

    /// The trained values of `name`, when this overlay replaces it; refused if their count
    /// differs from the base tensor's.
    pub fn get(&self, name: &str, elements: usize) -> Result<Option<&[f32]>> {
        match self.tensors.get(name) {
            None => Ok(None),
            Some(values) => {
                ensure_format!(
                    values.len() == elements,
                    "overlay tensor {name} has {} values, the model's has {elements}",
                    values.len()
                );
                Ok(Some(values))
            }
        }
    }

    /// Every tensor name the overlay carries (each must replace one of the base's).
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.tensors.keys().map(String::as_str)
    }

    /// The training run's description (version, base, trained layers, steps).
    pub fn metadata(&self) -> &HashMap<String, String> {
        &self.metadata
    }
}
