//! Linear layers in bfloat16 on CPUs with AVX512_BF16: weights and inputs rounded to bf16 (8
//! bits of mantissa), products summed in f32 by `vdpbf16ps`, which does two multiply-adds per
//! lane where an f32 FMA does one. Used only when its agreement with the f32 path is measured
//! (the `e5` tests and `server bench embed` print it).

use crate::kernels::{MAX_ROWS, PANEL};

/// W (`n` × `k`, out × in) in bf16: per panel of 32 outputs, per pair of inputs, 64 values:
/// outputs 0–15 then 16–31, each as (input 2p, input 2p+1).
pub struct PackedBf16 {
    n: usize,
    /// `k` rounded up to even (the pad is zero).
    k2: usize,
    k: usize,
    data: Vec<u16>,
}

/// f32 to bf16, rounding to nearest even (inputs here are finite).
#[inline(always)]
pub fn to_bf16(x: f32) -> u16 {
    let bits = x.to_bits();
    ((bits + 0x7fff + ((bits >> 16) & 1)) >> 16) as u16
}

impl PackedBf16 {
    pub fn pack_rows(b: &[f32], n: usize, k: usize) -> Self {
        let k2 = k.div_ceil(2) * 2;
        let panels = n.div_ceil(PANEL);
        let mut data = vec![0u16; panels * PANEL * k2];
        for row in 0..n {
            let (panel, lane) = (row / PANEL, row % PANEL);
            let (half, lane) = (lane / 16, lane % 16);
            for p in 0..k {
                let pair = p / 2;
                let at = panel * PANEL * k2 + pair * 64 + half * 32 + lane * 2 + p % 2;
                data[at] = to_bf16(b[row * k + p]);
            }
        }
        Self { n, k2, k, data }
    }

    pub fn rows(&self) -> usize {
        self.n
    }

    pub fn depth(&self) -> usize {
        self.k
    }
}

/// C (`m` × n, `ldc` apart) = A (`m` × k, dense) · Wᵀ; `scratch` holds A in bf16.
///
/// # Safety
/// The CPU has AVX-512F and AVX512_BF16.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bf16")]
pub unsafe fn matmul(
    a: &[f32],
    m: usize,
    w: &PackedBf16,
    c: &mut [f32],
    ldc: usize,
    scratch: &mut Vec<u16>,
) {
    let (n, k, k2) = (w.n, w.k, w.k2);
    if m == 0 || n == 0 {
        return;
    }
    assert!(a.len() >= m * k, "A is too small");
    assert!(c.len() >= (m - 1) * ldc + n && ldc >= n, "C is too small");
    scratch.clear();
    scratch.resize(m * k2, 0);
    for r in 0..m {
        for (dst, &src) in scratch[r * k2..r * k2 + k]
            .iter_mut()
            .zip(&a[r * k..(r + 1) * k])
        {
            *dst = to_bf16(src);
        }
    }
    let mut out = [[0.0f32; PANEL]; MAX_ROWS];
    for panel in 0..n.div_ceil(PANEL) {
        let col = panel * PANEL;
        let width = PANEL.min(n - col);
        let weights = &w.data[panel * PANEL * k2..(panel + 1) * PANEL * k2];
        let mut row = 0;
        while row < m {
            let rows = MAX_ROWS.min(m - row);
            let a_rows = scratch[row * k2..].as_ptr();
            // SAFETY: `rows` rows of `k2` bf16 from `a_rows`, `k2 / 2` pairs of the panel.
            unsafe { tile_by_rows!(rows, bf16_tile, a_rows, k2, weights.as_ptr(), &mut out) };
            for r in 0..rows {
                c[(row + r) * ldc + col..][..width].copy_from_slice(&out[r][..width]);
            }
            row += rows;
        }
    }
}

#[cfg(target_arch = "x86_64")]
use x86::tile as bf16_tile;

// As in `kernels`: the row index picks the accumulator and the row of A.
#[allow(clippy::needless_range_loop)]
#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    use crate::kernels::{MAX_ROWS, PANEL};

    #[target_feature(enable = "avx512f,avx512bf16")]
    pub unsafe fn tile<const R: usize>(
        a: *const u16,
        k2: usize,
        w: *const u16,
        out: &mut [[f32; PANEL]; MAX_ROWS],
    ) {
        let mut low = [_mm512_setzero_ps(); R];
        let mut high = [_mm512_setzero_ps(); R];
        for pair in 0..k2 / 2 {
            // SAFETY: the caller's bounds: `R` rows of `k2` values, `k2 / 2` pairs of 64.
            unsafe {
                let w0: __m512bh = std::mem::transmute(_mm512_loadu_si512(w.add(pair * 64).cast()));
                let w1: __m512bh =
                    std::mem::transmute(_mm512_loadu_si512(w.add(pair * 64 + 32).cast()));
                for r in 0..R {
                    let x = a.add(r * k2 + pair * 2).cast::<i32>().read_unaligned();
                    let x: __m512bh = std::mem::transmute(_mm512_set1_epi32(x));
                    low[r] = _mm512_dpbf16_ps(low[r], x, w0);
                    high[r] = _mm512_dpbf16_ps(high[r], x, w1);
                }
            }
        }
        for r in 0..R {
            // SAFETY: each row of `out` has 32 f32.
            unsafe {
                _mm512_storeu_ps(out[r].as_mut_ptr(), low[r]);
                _mm512_storeu_ps(out[r].as_mut_ptr().add(16), high[r]);
            }
        }
    }
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::*;

    #[test]
    fn bf16_rounds_to_nearest_even() {
        assert_eq!(to_bf16(1.0), 0x3f80);
        // 1 + 2^-8 is halfway between two bf16 values: to the even one, 1.0.
        assert_eq!(to_bf16(1.0 + 1.0 / 256.0), 0x3f80);
        assert_eq!(to_bf16(1.0 + 3.0 / 256.0), 0x3f82);
        assert_eq!(to_bf16(-2.5), 0xc020);
    }

    /// Products within bf16's rounding of the f64 result, at sizes with partial tiles, panels
    /// and an odd depth.
    #[test]
    fn the_bf16_kernel_multiplies_like_the_definition() {
        if !crate::Kernel::Avx512Bf16.is_supported() {
            eprintln!("skipped: this CPU has no AVX512_BF16");
            return;
        }
        crate::kernels::check_against_definition(
            |a, m, b, n, k, c, ldc| {
                let packed = PackedBf16::pack_rows(b, n, k);
                // SAFETY: checked above that the CPU has the instructions.
                unsafe { matmul(a, m, &packed, c, ldc, &mut Vec::new()) };
            },
            |row, column| {
                let scale: f64 = row
                    .iter()
                    .zip(column)
                    .map(|(x, w)| (x * w).abs() as f64)
                    .sum();
                1e-2 * scale + 1e-6
            },
        );
    }
}
