//! Linear layers in 8-bit integers on CPUs with AVX512_VNNI: each weight row rounded to int8
//! with a scale of its own, each input row to uint8 with a scale of its own, products summed
//! exactly in i32 by `vpdpbusd`, which does four multiply-adds per lane where `vdpbf16ps` does
//! two: on this project's AMD EPYC, queries embed 1.5× and documents 1.4× as fast as with bf16,
//! at a cosine of 0.99975 to the f32 path (`server bench embed` prints both). That still moves
//! search results (docs/measurements.md), so [`crate::Kernel::detect`] never picks it: it runs
//! only when chosen by name.
//!
//! `vpdpbusd` multiplies unsigned by signed bytes, so an input row goes in as `q` in 0..=255
//! over its own range, `x ≈ min + scale·q`, and the product is `scale·Σ q·w + min·Σ w`: the
//! whole 256 steps cover the range a row has (a GELU's output is mostly positive), where a
//! symmetric int8 would leave half of them unused.

use crate::kernels::{MAX_ROWS, PANEL};

/// W (`n` × `k`, out × in) in int8: per panel of 32 outputs, per quad of inputs, 128 bytes:
/// outputs 0–15 then 16–31, each as inputs 4p..4p+3.
pub struct PackedInt8 {
    n: usize,
    /// `k` rounded up to a multiple of 4 (the pad is zero).
    k4: usize,
    k: usize,
    data: Vec<i8>,
    /// Per output (padded to whole panels): the weight row is `scale × its int8 values`.
    scales: Vec<f32>,
    /// Per output, likewise: the sum of its (rounded) weights, scale × the int8 values' sum.
    sums: Vec<f32>,
}

impl PackedInt8 {
    pub fn pack_rows(b: &[f32], n: usize, k: usize) -> Self {
        let k4 = k.div_ceil(4) * 4;
        let panels = n.div_ceil(PANEL);
        let mut data = vec![0i8; panels * PANEL * k4];
        // Padded to whole panels, so a tile reads 32 of each.
        let (mut scales, mut sums) = (vec![0.0; panels * PANEL], vec![0.0; panels * PANEL]);
        for row in 0..n {
            let values = &b[row * k..(row + 1) * k];
            let scale = values.iter().fold(0.0f32, |m, v| m.max(v.abs())) / 127.0;
            let inverse = if scale > 0.0 { 1.0 / scale } else { 0.0 };
            let (panel, lane) = (row / PANEL, row % PANEL);
            let (half, lane) = (lane / 16, lane % 16);
            let mut sum = 0i32;
            for (p, &v) in values.iter().enumerate() {
                let q = (v * inverse).round().clamp(-127.0, 127.0) as i8;
                sum += i32::from(q);
                let at = panel * PANEL * k4 + (p / 4) * 128 + half * 64 + lane * 4 + p % 4;
                data[at] = q;
            }
            scales[row] = scale;
            sums[row] = scale * sum as f32;
        }
        Self {
            n,
            k4,
            k,
            data,
            scales,
            sums,
        }
    }

    pub fn rows(&self) -> usize {
        self.n
    }

    pub fn depth(&self) -> usize {
        self.k
    }
}

/// Rows of A in uint8 (`k4` apart): each row `x ≈ min + scale × q`, `q` in 0..=255, over the
/// row's range widened to hold 0.
#[derive(Default)]
pub struct Quantized {
    values: Vec<u8>,
    scales: Vec<f32>,
    mins: Vec<f32>,
}

impl Quantized {
    /// # Safety
    /// The CPU has AVX-512F.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f")]
    unsafe fn fill(&mut self, a: &[f32], m: usize, k: usize, k4: usize) {
        use std::arch::x86_64::*;
        self.values.clear();
        // The pad multiplies zero weights: any value will do.
        self.values.resize(m * k4, 0);
        self.scales.clear();
        self.mins.clear();
        for (r, row) in a[..m * k].chunks_exact(k).enumerate() {
            let (chunks, rest) = (k / 16, k % 16);
            // SAFETY: 16 f32 read per chunk, within the row.
            let (smallest, largest) = unsafe {
                let (mut smallest, mut largest) = (_mm512_set1_ps(0.0), _mm512_set1_ps(0.0));
                for c in 0..chunks {
                    let x = _mm512_loadu_ps(row.as_ptr().add(c * 16));
                    smallest = _mm512_min_ps(smallest, x);
                    largest = _mm512_max_ps(largest, x);
                }
                (
                    _mm512_reduce_min_ps(smallest),
                    _mm512_reduce_max_ps(largest),
                )
            };
            let (smallest, largest) = row[chunks * 16..]
                .iter()
                .fold((smallest, largest), |(s, l), &v| (s.min(v), l.max(v)));
            let scale = (largest - smallest) / 255.0;
            let inverse = if scale > 0.0 { 1.0 / scale } else { 0.0 };
            let dst = &mut self.values[r * k4..r * k4 + k];
            // SAFETY: 16 f32 read and 16 bytes written per chunk, within the row.
            unsafe {
                let (inv, base, top) = (
                    _mm512_set1_ps(inverse),
                    _mm512_set1_ps(smallest),
                    _mm512_set1_epi32(255),
                );
                for c in 0..chunks {
                    let x = _mm512_loadu_ps(row.as_ptr().add(c * 16));
                    let x = _mm512_mul_ps(_mm512_sub_ps(x, base), inv);
                    // Rounds to nearest even (the default rounding mode).
                    let q = _mm512_min_epi32(
                        _mm512_max_epi32(_mm512_cvtps_epi32(x), _mm512_setzero_si512()),
                        top,
                    );
                    _mm_storeu_si128(dst.as_mut_ptr().add(c * 16).cast(), _mm512_cvtepi32_epi8(q));
                }
            }
            for (d, &v) in dst[chunks * 16..]
                .iter_mut()
                .zip(&row[chunks * 16..])
                .take(rest)
            {
                *d = ((v - smallest) * inverse)
                    .round_ties_even()
                    .clamp(0.0, 255.0) as u8;
            }
            self.mins.push(smallest);
            self.scales.push(scale);
        }
    }
}

/// C (`m` × n, `ldc` apart) = A (`m` × k, dense) · Wᵀ; `scratch` holds A in uint8.
///
/// # Safety
/// The CPU has AVX-512F and AVX512_VNNI.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512vnni")]
pub unsafe fn matmul(
    a: &[f32],
    m: usize,
    w: &PackedInt8,
    c: &mut [f32],
    ldc: usize,
    scratch: &mut Quantized,
) {
    let (n, k, k4) = (w.n, w.k, w.k4);
    if m == 0 || n == 0 {
        return;
    }
    assert!(a.len() >= m * k, "A is too small");
    assert!(c.len() >= (m - 1) * ldc + n && ldc >= n, "C is too small");
    // SAFETY: the caller's CPU has AVX-512F.
    unsafe { scratch.fill(a, m, k, k4) };
    let mut out = [[0.0f32; PANEL]; MAX_ROWS];
    for panel in 0..n.div_ceil(PANEL) {
        let col = panel * PANEL;
        let width = PANEL.min(n - col);
        let weights = &w.data[panel * PANEL * k4..(panel + 1) * PANEL * k4];
        let outputs = Outputs {
            scales: w.scales[col..col + PANEL].as_ptr(),
            sums: w.sums[col..col + PANEL].as_ptr(),
        };
        let mut row = 0;
        while row < m {
            let rows = MAX_ROWS.min(m - row);
            let a_rows = scratch.values[row * k4..].as_ptr();
            let rows_of_a = Rows {
                scales: &scratch.scales[row..row + rows],
                mins: &scratch.mins[row..row + rows],
            };
            // SAFETY: `rows` rows of `k4` bytes from `a_rows` and as many scales, `k4 / 4`
            // quads of the panel, 32 scales and sums.
            unsafe {
                tile_by_rows!(
                    rows,
                    int8_tile,
                    a_rows,
                    k4,
                    weights.as_ptr(),
                    &rows_of_a,
                    &outputs,
                    &mut out
                )
            };
            for r in 0..rows {
                c[(row + r) * ldc + col..][..width].copy_from_slice(&out[r][..width]);
            }
            row += rows;
        }
    }
}

/// The tile's rows of A: each one's scale and minimum.
struct Rows<'a> {
    scales: &'a [f32],
    mins: &'a [f32],
}

/// One panel's 32 output scales and weight sums.
struct Outputs {
    scales: *const f32,
    sums: *const f32,
}

#[cfg(target_arch = "x86_64")]
use x86::tile as int8_tile;

// As in `kernels`: the row index picks the accumulator and the row of A.
#[allow(clippy::needless_range_loop)]
#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    use super::{Outputs, Rows};
    use crate::kernels::{MAX_ROWS, PANEL};

    #[target_feature(enable = "avx512f,avx512vnni")]
    pub unsafe fn tile<const R: usize>(
        a: *const u8,
        k4: usize,
        w: *const i8,
        rows: &Rows,
        outputs: &Outputs,
        out: &mut [[f32; PANEL]; MAX_ROWS],
    ) {
        let mut low = [_mm512_setzero_si512(); R];
        let mut high = [_mm512_setzero_si512(); R];
        for quad in 0..k4 / 4 {
            // SAFETY: the caller's bounds: `R` rows of `k4` bytes, `k4 / 4` quads of 128.
            unsafe {
                let w0 = _mm512_loadu_si512(w.add(quad * 128).cast());
                let w1 = _mm512_loadu_si512(w.add(quad * 128 + 64).cast());
                for r in 0..R {
                    let x = a.add(r * k4 + quad * 4).cast::<i32>().read_unaligned();
                    let x = _mm512_set1_epi32(x);
                    low[r] = _mm512_dpbusd_epi32(low[r], x, w0);
                    high[r] = _mm512_dpbusd_epi32(high[r], x, w1);
                }
            }
        }
        // SAFETY: 32 scales and sums; each row of `out` has 32 f32.
        // x·w = Σ (min + scale·q)·w = scale·Σ q·w + min·Σ w.
        unsafe {
            let (sum0, sum1) = (
                _mm512_loadu_ps(outputs.sums),
                _mm512_loadu_ps(outputs.sums.add(16)),
            );
            let (scale0, scale1) = (
                _mm512_loadu_ps(outputs.scales),
                _mm512_loadu_ps(outputs.scales.add(16)),
            );
            for r in 0..R {
                let (a_scale, a_min) =
                    (_mm512_set1_ps(rows.scales[r]), _mm512_set1_ps(rows.mins[r]));
                let out0 = _mm512_fmadd_ps(
                    _mm512_cvtepi32_ps(low[r]),
                    _mm512_mul_ps(scale0, a_scale),
                    _mm512_mul_ps(sum0, a_min),
                );
                let out1 = _mm512_fmadd_ps(
                    _mm512_cvtepi32_ps(high[r]),
                    _mm512_mul_ps(scale1, a_scale),
                    _mm512_mul_ps(sum1, a_min),
                );
                _mm512_storeu_ps(out[r].as_mut_ptr(), out0);
                _mm512_storeu_ps(out[r].as_mut_ptr().add(16), out1);
            }
        }
    }
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::*;

    /// Products within int8's rounding of the f64 result (each side off by at most half a
    /// step of its row's scale), at sizes with partial tiles, panels and a depth not a multiple
    /// of 4.
    #[test]
    fn the_int8_kernel_multiplies_like_the_definition() {
        if !crate::Kernel::Avx512Vnni.is_supported() {
            eprintln!("skipped: this CPU has no AVX512_VNNI");
            return;
        }
        crate::kernels::check_against_definition(
            |a, m, b, n, k, c, ldc| {
                let packed = PackedInt8::pack_rows(b, n, k);
                // SAFETY: checked above that the CPU has the instructions.
                unsafe { matmul(a, m, &packed, c, ldc, &mut Quantized::default()) };
            },
            |row, column| {
                let largest = |v: &[f32]| v.iter().fold(0.0f32, |m, x| m.max(x.abs())) as f64;
                // |x·w − x̃·w̃| ≤ Σ (|x|·δw + |w|·δx + δx·δw), δ = half a step.
                let (da, db) = (largest(row) / 254.0, largest(column) / 254.0);
                let bound: f64 = row
                    .iter()
                    .zip(column)
                    .map(|(x, w)| x.abs() as f64 * db + w.abs() as f64 * da + da * db)
                    .sum();
                bound * 1.0001 + 1e-6
            },
        );
    }

    /// Rows whose values all lie on their grid (`min + scale × q`) and weights that are whole
    /// multiples of their step are represented exactly, so the products are exact: the
    /// minimum's share (`min × Σ w`) is put back in full.
    #[test]
    fn inputs_on_their_grid_multiply_exactly() {
        if !crate::Kernel::Avx512Vnni.is_supported() {
            eprintln!("skipped: this CPU has no AVX512_VNNI");
            return;
        }
        let k = 20; // a chunk of 16 and a rest of 4
        let a: Vec<f32> = (0..2 * k)
            .map(|i| match i % k {
                0 => 0.0,
                1 => 255.0,
                p => (p * 13 % 256) as f32,
            } - if i < k { 0.0 } else { 40.0 })
            .collect();
        let b: Vec<f32> = (0..k)
            .map(|i| [127.0, -127.0, 5.0, 0.0, -3.0][i % 5])
            .collect();
        let packed = PackedInt8::pack_rows(&b, 1, k);
        let mut c = vec![0.0f32; 2];
        // SAFETY: checked above that the CPU has the instructions.
        unsafe { matmul(&a, 2, &packed, &mut c, 1, &mut Quantized::default()) };
        for (r, got) in c.iter().enumerate() {
            let exact: f32 = a[r * k..(r + 1) * k]
                .iter()
                .zip(&b)
                .map(|(x, w)| x * w)
                .sum();
            assert_eq!(*got, exact, "row {r}");
        }
    }
}
