//! The forward pass: token ids of a few sentences to their 512-d vectors.
//!
//! A port of `_encode_batch` in the reference's `backends/numpy.py`:
//! 1. dequantise each token's embedding;
//! 2. project it for the three n-gram branches (orders 2, 3, 5) and layer-norm the result;
//! 3. per branch, two window convolutions (the window's rows concatenated, times a matrix), each
//!    with a ReLU and a residual add; window slots outside the token's own sentence are zero;
//! 4. concatenate [embedding | three branches], layer-norm, average over the sentence's tokens
//!    through a linear projection (scaled by 1/sqrt(len), not 1/len, as the model does);
//! 5. a small feed-forward head with skip connections, tanh, L2 normalisation.
//!
//! Several sentences run as one flat batch: their tokens are stacked into one matrix so that
//! each weight matrix is read once per batch rather than once per sentence. Nothing crosses a
//! sentence boundary (the windows are clamped per sentence), so a sentence's vector does not
//! depend on its batch-mates.

use crate::matmul::{MatMut, MatRef, matmul};
use crate::weights::{BRANCH_DIM, EMBEDDING_DIM, FEATURE_DIM, HEAD_HIDDEN_DIM, Weights};

/// Buffers reused from one batch to the next (a few MB at the batch sizes used).
#[derive(Default)]
pub struct Scratch {
    /// tokens x FEATURE_DIM: [embedding | branch 2 | branch 3 | branch 5].
    features: Vec<f32>,
    /// tokens x 3·BRANCH_DIM: the layer-normed branch inputs.
    projected: Vec<f32>,
    /// tokens x order·BRANCH_DIM: the convolution windows.
    window: Vec<f32>,
    /// tokens x BRANCH_DIM: a branch's first convolution.
    hidden: Vec<f32>,
}

/// The vectors of `sentences` (token ids, BOS/EOS included; none may be empty), in order.
pub fn encode_batch(
    weights: &Weights,
    sentences: &[Vec<u32>],
    scratch: &mut Scratch,
) -> Vec<Vec<f32>> {
    let tokens: usize = sentences.iter().map(Vec::len).sum();
    let bounds: Vec<(usize, usize)> = sentences
        .iter()
        .scan(0, |start, ids| {
            let range = (*start, *start + ids.len());
            *start += ids.len();
            Some(range)
        })
        .collect();
    let Scratch {
        features,
        projected,
        window,
        hidden,
    } = scratch;
    // Every element is written before it is read, so stale contents are fine.
    features.resize(tokens * FEATURE_DIM, 0.0);
    let branches_width = weights.branches.len() * BRANCH_DIM;
    projected.resize(tokens * branches_width, 0.0);
    hidden.resize(tokens * BRANCH_DIM, 0.0);

    for (row, &id) in features
        .chunks_exact_mut(FEATURE_DIM)
        .zip(sentences.iter().flatten())
    {
        weights
            .embedding
            .dequantize_into(id, &mut row[..EMBEDDING_DIM]);
    }

    let embeddings = MatRef {
        data: features,
        rows: tokens,
        cols: EMBEDDING_DIM,
        row_stride: FEATURE_DIM,
    };
    let projection = &weights.branch_projection;
    matmul(
        MatMut::new(projected, tokens, branches_width),
        embeddings,
        MatRef::new(&projection.data, projection.rows, projection.cols),
        false,
    );
    for row in projected.chunks_exact_mut(branches_width) {
        add(row, &weights.branch_projection_bias);
        layer_norm(
            row,
            &weights.branch_norm_gamma,
            &weights.branch_norm_beta,
            weights.eps,
        );
    }

    for (b, branch) in weights.branches.iter().enumerate() {
        let window_width = branch.order * BRANCH_DIM;
        window.resize(tokens * window_width, 0.0);
        let input = MatRef {
            data: &projected[b * BRANCH_DIM..],
            rows: tokens,
            cols: BRANCH_DIM,
            row_stride: branches_width,
        };

        gather_windows(window, input, &bounds, branch.order, branch.left);
        matmul(
            MatMut::new(hidden, tokens, BRANCH_DIM),
            MatRef::new(window, tokens, window_width),
            MatRef::new(&branch.conv1.data, branch.conv1.rows, branch.conv1.cols),
            false,
        );
        for (t, row) in hidden.chunks_exact_mut(BRANCH_DIM).enumerate() {
            let residual = &input.data[t * input.row_stride..][..BRANCH_DIM];
            bias_relu_residual(row, &branch.conv1_bias, residual);
        }

        let input = MatRef::new(hidden, tokens, BRANCH_DIM);
        gather_windows(window, input, &bounds, branch.order, branch.left);
        let offset = EMBEDDING_DIM + b * BRANCH_DIM;
        matmul(
            MatMut {
                data: &mut features[offset..],
                rows: tokens,
                cols: BRANCH_DIM,
                row_stride: FEATURE_DIM,
            },
            MatRef::new(window, tokens, window_width),
            MatRef::new(&branch.conv2.data, branch.conv2.rows, branch.conv2.cols),
            false,
        );
        for (row, residual) in features
            .chunks_exact_mut(FEATURE_DIM)
            .zip(hidden.chunks_exact(BRANCH_DIM))
        {
            bias_relu_residual(
                &mut row[offset..offset + BRANCH_DIM],
                &branch.conv2_bias,
                residual,
            );
        }
    }

    for row in features.chunks_exact_mut(FEATURE_DIM) {
        layer_norm(
            row,
            &weights.feature_norm_gamma,
            &weights.feature_norm_beta,
            weights.eps,
        );
    }

    // Sum, then project: the sum over tokens commutes with the linear pooling projection, so
    // the product has one row per sentence instead of one per token (as the reference does).
    let count = sentences.len();
    let mut sums = vec![0.0f32; count * FEATURE_DIM];
    for (sum, &(start, end)) in sums.chunks_exact_mut(FEATURE_DIM).zip(&bounds) {
        for row in features[start * FEATURE_DIM..end * FEATURE_DIM].chunks_exact(FEATURE_DIM) {
            add(sum, row);
        }
    }
    let mut pooled = product(&sums, count, &weights.pooling_projection);
    for (row, &(start, end)) in pooled.chunks_exact_mut(EMBEDDING_DIM).zip(&bounds) {
        let len = (end - start) as f32;
        let inv_sqrt_len = 1.0 / len.sqrt();
        for (x, &b) in row.iter_mut().zip(&weights.pooling_bias) {
            *x = (*x + len * b) * inv_sqrt_len;
        }
    }

    let [d0, d1, d2, d3] = &weights.head_dense;
    let mut y0 = product(&pooled, count, d0);
    relu(&mut y0);
    let mut y1 = product(&pooled, count, &weights.head_skip1);
    accumulate_product(&mut y1, &y0, count, d1);
    relu(&mut y1);
    let mut y2 = product(&y1, count, d2);
    relu(&mut y2);
    let mut out = product(&y1, count, &weights.head_skip3);
    accumulate_product(&mut out, &y2, count, d3);

    debug_assert_eq!(d1.cols, HEAD_HIDDEN_DIM);
    out.chunks_exact(EMBEDDING_DIM)
        .map(|row| {
            let mut v: Vec<f32> = row.iter().map(|x| x.tanh()).collect();
            let norm_sq: f32 = v.iter().map(|x| x * x).sum();
            let scale = 1.0 / norm_sq.max(weights.eps).sqrt();
            v.iter_mut().for_each(|x| *x *= scale);
            v
        })
        .collect()
}

/// Row `t` of `window` := rows `t - left .. t - left + order` of `input`, side by side, with
/// zeros for the rows outside `t`'s sentence (`bounds` are the sentences' token ranges).
fn gather_windows(
    window: &mut [f32],
    input: MatRef<'_>,
    bounds: &[(usize, usize)],
    order: usize,
    left: usize,
) {
    let width = order * BRANCH_DIM;
    for &(start, end) in bounds {
        for t in start..end {
            let row = &mut window[t * width..(t + 1) * width];
            for (k, slot) in row.chunks_exact_mut(BRANCH_DIM).enumerate() {
                match (t + k).checked_sub(left) {
                    Some(p) if p >= start && p < end => {
                        let from = p * input.row_stride;
                        slot.copy_from_slice(&input.data[from..from + BRANCH_DIM]);
                    }
                    _ => slot.fill(0.0),
                }
            }
        }
    }
}

/// `lhs (rows x matrix.rows) · matrix`, as a new dense buffer.
fn product(lhs: &[f32], rows: usize, matrix: &crate::weights::Matrix) -> Vec<f32> {
    let mut out = vec![0.0; rows * matrix.cols];
    matmul(
        MatMut::new(&mut out, rows, matrix.cols),
        MatRef::new(lhs, rows, matrix.rows),
        MatRef::new(&matrix.data, matrix.rows, matrix.cols),
        false,
    );
    out
}

/// `dst += lhs (rows x matrix.rows) · matrix`.
fn accumulate_product(dst: &mut [f32], lhs: &[f32], rows: usize, matrix: &crate::weights::Matrix) {
    matmul(
        MatMut::new(dst, rows, matrix.cols),
        MatRef::new(lhs, rows, matrix.rows),
        MatRef::new(&matrix.data, matrix.rows, matrix.cols),
        true,
    );
}

fn add(dst: &mut [f32], src: &[f32]) {
    for (d, &s) in dst.iter_mut().zip(src) {
        *d += s;
    }
}

fn relu(xs: &mut [f32]) {
    for x in xs {
        *x = x.max(0.0);
    }
}

/// `x = relu(x + bias) + residual`.
fn bias_relu_residual(x: &mut [f32], bias: &[f32], residual: &[f32]) {
    for ((x, &b), &r) in x.iter_mut().zip(bias).zip(residual) {
        *x = (*x + b).max(0.0) + r;
    }
}

/// Sum of `f(x)` over `xs` in eight interleaved partial sums, which the compiler keeps in one
/// SIMD register (a single running sum cannot be reordered, so it would not vectorise).
fn sum_of(xs: &[f32], f: impl Fn(f32) -> f32) -> f32 {
    let mut lanes = [0.0f32; 8];
    let chunks = xs.chunks_exact(8);
    let rest: f32 = chunks.remainder().iter().map(|&x| f(x)).sum();
    for chunk in chunks {
        for (lane, &x) in lanes.iter_mut().zip(chunk) {
            *lane += f(x);
        }
    }
    lanes.iter().sum::<f32>() + rest
}

/// Layer norm of one row in place, in the reference's order of operations:
/// `(x - mean) * (1 / sqrt(var + eps)) * gamma + beta`.
fn layer_norm(x: &mut [f32], gamma: &[f32], beta: &[f32], eps: f32) {
    let n = x.len() as f32;
    let mean = sum_of(x, |v| v) / n;
    x.iter_mut().for_each(|v| *v -= mean);
    let variance = sum_of(x, |v| v * v) / n;
    let inv_std = 1.0 / (variance + eps).sqrt();
    for ((v, &g), &b) in x.iter_mut().zip(gamma).zip(beta) {
        *v = *v * inv_std * g + b;
    }
}
