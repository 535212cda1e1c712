//! `weights.npz`: the model's arrays, checked against the shapes the forward pass assumes.
//!
//! The archive (a zip of `.npy` files, see [`crate::npy`]) holds the token embedding table as 17
//! uint8 blocks `q1`..`q17` with one affine dequantisation (`scale`, `lo`) per block, and every
//! other layer in float32. Names follow the reference's `backends/numpy.py`.

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

use zip::ZipArchive;

use crate::Error;
use crate::npy::Array;

/// Width of a token embedding, and of the sentence vector.
pub const EMBEDDING_DIM: usize = 512;
/// Width of each n-gram CNN branch.
pub const BRANCH_DIM: usize = 256;
/// The embedding table's quantisation blocks: token `id` is row `id / 17` of block `id % 17`.
pub const QUANT_BLOCKS: usize = 17;
/// (n-gram order, tokens of left context) of the three CNN branches, in the order their
/// outputs are concatenated.
pub const BRANCH_ORDERS: [(usize, usize); 3] = [(2, 0), (3, 1), (5, 2)];
/// Per-token features before pooling: the raw embedding, then the three branches.
pub const FEATURE_DIM: usize = EMBEDDING_DIM + BRANCH_ORDERS.len() * BRANCH_DIM;
/// Width of the first two layers of the feed-forward head.
pub const HEAD_HIDDEN_DIM: usize = 320;

/// A row-major float32 matrix.
pub struct Matrix {
    pub rows: usize,
    pub cols: usize,
    pub data: Vec<f32>,
}

/// The token embedding table, left quantised (65 MB instead of 262 MB in float32); rows are
/// dequantised when a batch gathers them, as the reference does.
pub struct EmbeddingTable {
    /// `blocks[b]` holds the rows of the tokens `id` with `id % 17 == b`, in `id / 17` order.
    blocks: Vec<Vec<u8>>,
    rows_per_block: usize,
    scale: Vec<f32>,
    lo: Vec<f32>,
}

impl EmbeddingTable {
    /// How many token ids have a row.
    pub fn rows(&self) -> usize {
        self.blocks.len() * self.rows_per_block
    }

    /// Writes the float32 embedding of token `id` into `out` (`EMBEDDING_DIM` long).
    ///
    /// Computed as `q * scale + lo` with two roundings, like numpy's in-place `*=` then `+=`.
    pub fn dequantize_into(&self, id: u32, out: &mut [f32]) {
        let id = id as usize;
        let block = id % QUANT_BLOCKS;
        let row = id / QUANT_BLOCKS;
        let quantized = &self.blocks[block][row * EMBEDDING_DIM..(row + 1) * EMBEDDING_DIM];
        let (scale, lo) = (self.scale[block], self.lo[block]);
        for (o, &q) in out.iter_mut().zip(quantized) {
            *o = f32::from(q) * scale + lo;
        }
    }
}

/// One n-gram branch: two window convolutions, each followed by a ReLU and a residual add.
pub struct Branch {
    /// Tokens per window.
    pub order: usize,
    /// How many of them precede the token the window is centred on.
    pub left: usize,
    /// `order * BRANCH_DIM` x `BRANCH_DIM`: the window's concatenated rows times `conv1`.
    pub conv1: Matrix,
    pub conv1_bias: Vec<f32>,
    pub conv2: Matrix,
    pub conv2_bias: Vec<f32>,
}

/// Every array of the model, in the layout the forward pass uses.
pub struct Weights {
    pub embedding: EmbeddingTable,
    /// `EMBEDDING_DIM` x `3 * BRANCH_DIM`: the three branches' input projections side by side,
    /// so that one matrix product feeds all of them (the reference concatenates them too).
    pub branch_projection: Matrix,
    pub branch_projection_bias: Vec<f32>,
    /// Layer norm over all `3 * BRANCH_DIM` projected columns at once (as the reference does).
    pub branch_norm_gamma: Vec<f32>,
    pub branch_norm_beta: Vec<f32>,
    pub branches: Vec<Branch>,
    /// Layer norm of the `FEATURE_DIM` per-token features.
    pub feature_norm_gamma: Vec<f32>,
    pub feature_norm_beta: Vec<f32>,
    /// `FEATURE_DIM` x `EMBEDDING_DIM`, applied per token and then averaged (the reference
    /// sums first and projects the sum, which is the same linear map).
    pub pooling_projection: Matrix,
    pub pooling_bias: Vec<f32>,
    /// The feed-forward head (reference names `d0`..`d3`):
    /// `y0 = relu(x d0)`, `y1 = relu(x skip1 + y0 d1)`, `y2 = relu(y1 d2)`,
    /// `out = tanh(y1 skip3 + y2 d3)`.
    pub head_dense: [Matrix; 4],
    /// The head's skip connections (reference names `p1`, `p3`).
    pub head_skip1: Matrix,
    pub head_skip3: Matrix,
    /// The layer norms' epsilon (stored as float64, used in float32 like numpy does).
    pub eps: f32,
}

impl Weights {
    /// Reads and checks every array of `path`.
    pub fn load(path: &Path) -> Result<Self, Error> {
        let mut npz = Npz::open(path)?;

        let scale = npz.f32("scale", &[QUANT_BLOCKS])?;
        let lo = npz.f32("lo", &[QUANT_BLOCKS])?;
        let mut blocks = Vec::with_capacity(QUANT_BLOCKS);
        let mut rows_per_block = 0;
        for b in 0..QUANT_BLOCKS {
            let name = format!("q{}", b + 1);
            let array = npz.array(&name)?;
            if b == 0 {
                rows_per_block = array.shape.first().copied().unwrap_or(0);
            }
            check_shape(&name, &array, &[rows_per_block, EMBEDDING_DIM])?;
            blocks.push(array.into_u8().ok_or_else(|| Error::Npy {
                name,
                reason: "uint8 expected".into(),
            })?);
        }
        let embedding = EmbeddingTable {
            blocks,
            rows_per_block,
            scale,
            lo,
        };

        let mut branch_projection = Matrix {
            rows: EMBEDDING_DIM,
            cols: BRANCH_ORDERS.len() * BRANCH_DIM,
            data: vec![0.0; EMBEDDING_DIM * BRANCH_ORDERS.len() * BRANCH_DIM],
        };
        let mut branch_projection_bias = Vec::new();
        let mut branch_norm_gamma = Vec::new();
        let mut branch_norm_beta = Vec::new();
        let mut branches = Vec::new();
        for (i, &(order, left)) in BRANCH_ORDERS.iter().enumerate() {
            let part = npz.matrix(&format!("proj{order}"), EMBEDDING_DIM, BRANCH_DIM)?;
            let cols = branch_projection.cols;
            for (dst, src) in branch_projection
                .data
                .chunks_exact_mut(cols)
                .zip(part.data.chunks_exact(BRANCH_DIM))
            {
                dst[i * BRANCH_DIM..(i + 1) * BRANCH_DIM].copy_from_slice(src);
            }
            branch_projection_bias.extend(npz.f32(&format!("proj_b{order}"), &[BRANCH_DIM])?);
            branch_norm_gamma.extend(npz.f32(&format!("ln_g{order}"), &[BRANCH_DIM])?);
            branch_norm_beta.extend(npz.f32(&format!("ln_b{order}"), &[BRANCH_DIM])?);
            branches.push(Branch {
                order,
                left,
                conv1: npz.matrix(&format!("w1_{order}"), order * BRANCH_DIM, BRANCH_DIM)?,
                conv1_bias: npz.f32(&format!("b1_{order}"), &[BRANCH_DIM])?,
                conv2: npz.matrix(&format!("w2_{order}"), order * BRANCH_DIM, BRANCH_DIM)?,
                conv2_bias: npz.f32(&format!("b2_{order}"), &[BRANCH_DIM])?,
            });
        }

        let eps_array = npz.array("eps")?;
        let eps = match eps_array.to_f64().as_deref() {
            Some(&[eps]) => eps as f32,
            _ => {
                return Err(Error::Npy {
                    name: "eps".into(),
                    reason: "one float64 expected".into(),
                });
            }
        };

        Ok(Weights {
            embedding,
            branch_projection,
            branch_projection_bias,
            branch_norm_gamma,
            branch_norm_beta,
            branches,
            feature_norm_gamma: npz.f32("ln_g", &[FEATURE_DIM])?,
            feature_norm_beta: npz.f32("ln_b", &[FEATURE_DIM])?,
            pooling_projection: npz.matrix("cnn_W", FEATURE_DIM, EMBEDDING_DIM)?,
            pooling_bias: npz.f32("cnn_b", &[EMBEDDING_DIM])?,
            head_dense: [
                npz.matrix("d0", EMBEDDING_DIM, HEAD_HIDDEN_DIM)?,
                npz.matrix("d1", HEAD_HIDDEN_DIM, HEAD_HIDDEN_DIM)?,
                npz.matrix("d2", HEAD_HIDDEN_DIM, EMBEDDING_DIM)?,
                npz.matrix("d3", EMBEDDING_DIM, EMBEDDING_DIM)?,
            ],
            head_skip1: npz.matrix("p1", EMBEDDING_DIM, HEAD_HIDDEN_DIM)?,
            head_skip3: npz.matrix("p3", HEAD_HIDDEN_DIM, EMBEDDING_DIM)?,
            eps,
        })
    }
}

fn check_shape(name: &str, array: &Array, expected: &[usize]) -> Result<(), Error> {
    if array.shape == expected {
        Ok(())
    } else {
        Err(Error::Shape {
            name: name.to_owned(),
            expected: expected.to_vec(),
            found: array.shape.clone(),
        })
    }
}

/// An open `.npz` archive.
struct Npz {
    path: PathBuf,
    archive: ZipArchive<File>,
}

impl Npz {
    fn open(path: &Path) -> Result<Self, Error> {
        let io = |source| Error::Io {
            path: path.to_owned(),
            source,
        };
        let file = File::open(path).map_err(io)?;
        let archive = ZipArchive::new(file).map_err(|source| Error::Zip {
            path: path.to_owned(),
            source,
        })?;
        Ok(Npz {
            path: path.to_owned(),
            archive,
        })
    }

    /// The array stored as `{name}.npy`.
    fn array(&mut self, name: &str) -> Result<Array, Error> {
        let mut entry =
            self.archive
                .by_name(&format!("{name}.npy"))
                .map_err(|source| match source {
                    zip::result::ZipError::FileNotFound => Error::MissingArray {
                        path: self.path.clone(),
                        name: name.to_owned(),
                    },
                    source => Error::Zip {
                        path: self.path.clone(),
                        source,
                    },
                })?;
        let mut bytes = Vec::with_capacity(entry.size() as usize);
        entry.read_to_end(&mut bytes).map_err(|source| Error::Io {
            path: self.path.clone(),
            source,
        })?;
        Array::parse(name, bytes)
    }

    /// A float32 array of exactly `shape`.
    fn f32(&mut self, name: &str, shape: &[usize]) -> Result<Vec<f32>, Error> {
        let array = self.array(name)?;
        check_shape(name, &array, shape)?;
        array.to_f32().ok_or_else(|| Error::Npy {
            name: name.to_owned(),
            reason: format!("float32 expected, found {:?}", array.dtype),
        })
    }

    /// A `rows` x `cols` float32 matrix.
    fn matrix(&mut self, name: &str, rows: usize, cols: usize) -> Result<Matrix, Error> {
        Ok(Matrix {
            rows,
            cols,
            data: self.f32(name, &[rows, cols])?,
        })
    }
}
