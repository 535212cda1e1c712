//! Matrix products on bounds-checked row-major views, computed by the `gemm` crate.
//!
//! `gemm` picks AVX-512, AVX2+FMA or portable kernels at run time; its entry point takes raw
//! pointers and strides, so this module checks every view against its slice first and is the
//! crate's only `unsafe`. It is there because it was measured necessary: on the 200-synopsis
//! benchmark (`tests/bench.rs`, 2 cores with AVX-512), the encoder ran at 64 texts/s with the
//! safe loop of `matmul_portable` (all LLVM can vectorise for baseline x86-64, and slower than
//! the numpy reference) against 520 texts/s with gemm.

/// A read-only `rows` x `cols` view of `data` whose row `r` starts at `r * row_stride`.
#[derive(Clone, Copy)]
pub struct MatRef<'a> {
    pub data: &'a [f32],
    pub rows: usize,
    pub cols: usize,
    pub row_stride: usize,
}

/// A writable view, laid out like [`MatRef`].
pub struct MatMut<'a> {
    pub data: &'a mut [f32],
    pub rows: usize,
    pub cols: usize,
    pub row_stride: usize,
}

impl<'a> MatRef<'a> {
    /// A dense matrix.
    pub fn new(data: &'a [f32], rows: usize, cols: usize) -> Self {
        MatRef {
            data,
            rows,
            cols,
            row_stride: cols,
        }
    }

    fn check(&self, what: &str) {
        check_view(what, self.data.len(), self.rows, self.cols, self.row_stride);
    }
}

impl<'a> MatMut<'a> {
    /// A dense matrix.
    pub fn new(data: &'a mut [f32], rows: usize, cols: usize) -> Self {
        MatMut {
            data,
            rows,
            cols,
            row_stride: cols,
        }
    }
}

/// Panics unless every element of the view lies inside a slice of `len` elements.
fn check_view(what: &str, len: usize, rows: usize, cols: usize, row_stride: usize) {
    assert!(
        cols <= row_stride || rows <= 1,
        "{what}: {cols} columns overlap with a row stride of {row_stride}"
    );
    let needed = if rows == 0 || cols == 0 {
        0
    } else {
        (rows - 1) * row_stride + cols
    };
    assert!(
        needed <= len,
        "{what}: a {rows}x{cols} view with row stride {row_stride} needs {needed} elements, the slice has {len}"
    );
}

/// `dst = lhs · rhs`, or `dst += lhs · rhs` when `accumulate`.
pub fn matmul(dst: MatMut<'_>, lhs: MatRef<'_>, rhs: MatRef<'_>, accumulate: bool) {
    lhs.check("lhs");
    rhs.check("rhs");
    check_view("dst", dst.data.len(), dst.rows, dst.cols, dst.row_stride);
    assert_eq!(lhs.cols, rhs.rows, "inner dimensions differ");
    assert_eq!(dst.rows, lhs.rows, "dst and lhs rows differ");
    assert_eq!(dst.cols, rhs.cols, "dst and rhs columns differ");
    let (m, n, k) = (dst.rows, dst.cols, lhs.cols);
    if m == 0 || n == 0 {
        return;
    }
    if k == 0 {
        if !accumulate {
            for row in dst.data.chunks_mut(dst.row_stride).take(m) {
                row[..n].fill(0.0);
            }
        }
        return;
    }
    // SAFETY: the three views were checked above to lie inside their slices with non-overlapping
    // columns (`cols <= row_stride`), so every element gemm reads or writes at
    // `row * row_stride + col` (col stride 1) is in bounds; `dst` is borrowed mutably, so it
    // cannot alias `lhs` or `rhs`. Strides fit in isize because they index live slices.
    // `read_dst` with alpha 1 accumulates; without it dst is overwritten (`beta` scales
    // lhs·rhs). f32 is one of the types gemm supports, so it does not panic on the type.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            dst.data.as_mut_ptr(),
            1,
            dst.row_stride as isize,
            accumulate,
            lhs.data.as_ptr(),
            1,
            lhs.row_stride as isize,
            rhs.data.as_ptr(),
            1,
            rhs.row_stride as isize,
            1.0f32,
            1.0f32,
            false,
            false,
            false,
            gemm::Parallelism::None,
        );
    }
}

/// The same product with plain loops: the check for [`matmul`], and the measured alternative
/// to its `unsafe` (see the module docs).
#[cfg(test)]
pub fn matmul_portable(dst: MatMut<'_>, lhs: MatRef<'_>, rhs: MatRef<'_>, accumulate: bool) {
    assert_eq!(lhs.cols, rhs.rows);
    for r in 0..dst.rows {
        let out = &mut dst.data[r * dst.row_stride..r * dst.row_stride + dst.cols];
        if !accumulate {
            out.fill(0.0);
        }
        let a = &lhs.data[r * lhs.row_stride..r * lhs.row_stride + lhs.cols];
        for (depth, &a) in a.iter().enumerate() {
            let b = &rhs.data[depth * rhs.row_stride..depth * rhs.row_stride + rhs.cols];
            for (o, &b) in out.iter_mut().zip(b) {
                *o += a * b;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sequence(len: usize, seed: u32) -> Vec<f32> {
        // A small deterministic pseudo-random sequence in [-1, 1).
        let mut state = seed.wrapping_mul(2_654_435_761).wrapping_add(1);
        (0..len)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 17;
                state ^= state << 5;
                (state as f32 / u32::MAX as f32) * 2.0 - 1.0
            })
            .collect()
    }

    #[test]
    fn strided_views_match_the_portable_loop() {
        // lhs: columns 3..3+37 of a 19x50 buffer; dst: columns 5..5+29 of a 19x40 buffer.
        let (m, k, n) = (19, 37, 29);
        let lhs_buf = sequence(19 * 50, 1);
        let rhs = sequence(k * n, 2);
        let initial = sequence(19 * 40, 3);
        for accumulate in [false, true] {
            let mut fast = initial.clone();
            let mut slow = initial.clone();
            let lhs = MatRef {
                data: &lhs_buf[3..],
                rows: m,
                cols: k,
                row_stride: 50,
            };
            let rhs = MatRef::new(&rhs, k, n);
            fn view(data: &mut [f32], rows: usize, cols: usize) -> MatMut<'_> {
                MatMut {
                    data: &mut data[5..],
                    rows,
                    cols,
                    row_stride: 40,
                }
            }
            matmul(view(&mut fast, m, n), lhs, rhs, accumulate);
            matmul_portable(view(&mut slow, m, n), lhs, rhs, accumulate);
            for (f, s) in fast.iter().zip(&slow) {
                assert!((f - s).abs() < 1e-4, "{f} vs {s}");
            }
        }
    }

    #[test]
    #[should_panic(expected = "needs")]
    fn rejects_a_view_past_its_slice() {
        let data = vec![0.0; 10];
        let mut out = vec![0.0; 4];
        let lhs = MatRef {
            data: &data,
            rows: 2,
            cols: 3,
            row_stride: 8,
        };
        let rhs = MatRef::new(&data[..6], 3, 2);
        matmul(MatMut::new(&mut out, 2, 2), lhs, rhs, false);
    }
}
