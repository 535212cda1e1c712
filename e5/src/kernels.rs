//! The arithmetic of the forward pass: C = A·Bᵀ over weights packed in panels of 32 output
//! columns, and the element-wise functions (layer norm, GELU, softmax). Every loop here is
//! `#[inline(always)]` and generic over an [`Isa`], so each of the three entry points in
//! `forward` compiles all of it for its instruction set, chosen at run time by [`Kernel`]:
//! AVX-512F, AVX2+FMA, or plain x86-64 / any CPU (what the compiler makes of portable code).

use std::fmt;

/// Output columns per packed panel: two AVX-512 registers of f32.
pub const PANEL: usize = 32;

/// Which code multiplies. [`Kernel::detect`] picks the widest the CPU has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kernel {
    /// Linear layers in bf16 (`vdpbf16ps`), attention in f32 AVX-512.
    Avx512Bf16,
    /// Linear layers in int8 (`vpdpbusd`) except the attention projections (bf16), attention
    /// in f32 AVX-512; needs AVX512_VNNI and AVX512_BF16. Never detected, only chosen.
    Avx512Vnni,
    Avx512,
    Avx2,
    Plain,
}

impl Kernel {
    pub const ALL: [Kernel; 5] = [
        Kernel::Avx512Bf16,
        Kernel::Avx512Vnni,
        Kernel::Avx512,
        Kernel::Avx2,
        Kernel::Plain,
    ];

    /// The widest kernel this CPU runs, the int8 one aside: it is faster but moves search
    /// results (cross-validated MRR 0.752 → 0.737 on the dev set, docs/measurements.md), so it
    /// is only taken when asked for.
    pub fn detect() -> Self {
        Self::ALL
            .into_iter()
            .filter(|&k| k != Kernel::Avx512Vnni)
            .find(|k| k.is_supported())
            .unwrap_or(Kernel::Plain)
    }

    pub fn is_supported(self) -> bool {
        match self {
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx512Bf16 => {
                std::arch::is_x86_feature_detected!("avx512f")
                    && std::arch::is_x86_feature_detected!("avx512bf16")
            }
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx512Vnni => {
                std::arch::is_x86_feature_detected!("avx512f")
                    && std::arch::is_x86_feature_detected!("avx512vnni")
                    && std::arch::is_x86_feature_detected!("avx512bf16")
            }
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx512 => std::arch::is_x86_feature_detected!("avx512f"),
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx2 => {
                std::arch::is_x86_feature_detected!("avx2")
                    && std::arch::is_x86_feature_detected!("fma")
            }
            #[cfg(not(target_arch = "x86_64"))]
            Kernel::Avx512Bf16 | Kernel::Avx512Vnni | Kernel::Avx512 | Kernel::Avx2 => false,
            Kernel::Plain => true,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Kernel::Avx512Bf16 => "avx512-bf16",
            Kernel::Avx512Vnni => "avx512-vnni",
            Kernel::Avx512 => "avx512",
            Kernel::Avx2 => "avx2",
            Kernel::Plain => "plain",
        }
    }

    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.name() == name)
    }
}

impl fmt::Display for Kernel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// 64 bytes: panels start on a cache line.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Line([f32; 16]);

/// B of C = A·Bᵀ, with B `n` × `k`: for each panel of 32 rows of B (output columns of C), the
/// `k` columns one after another, 32 values each; the last panel is padded with zeros.
pub struct Packed {
    n: usize,
    k: usize,
    lines: Vec<Line>,
}

impl Packed {
    pub fn new() -> Self {
        Self {
            n: 0,
            k: 0,
            lines: Vec::new(),
        }
    }

    fn reset(&mut self, n: usize, k: usize) {
        let floats = n.div_ceil(PANEL) * PANEL * k;
        self.n = n;
        self.k = k;
        self.lines.clear();
        self.lines.resize(floats / 16, Line([0.0; 16]));
    }

    fn data_mut(&mut self) -> &mut [f32] {
        let len = self.lines.len() * 16;
        // SAFETY: `Line` is 16 f32s with no padding (repr(C), 64 bytes).
        unsafe { std::slice::from_raw_parts_mut(self.lines.as_mut_ptr().cast::<f32>(), len) }
    }

    fn data(&self) -> &[f32] {
        let len = self.lines.len() * 16;
        // SAFETY: as in `data_mut`.
        unsafe { std::slice::from_raw_parts(self.lines.as_ptr().cast::<f32>(), len) }
    }

    /// Packs B given row by row (`n` rows of `k`, `stride` apart): weights stored out × in.
    pub fn pack_rows(&mut self, b: &[f32], n: usize, k: usize, stride: usize) {
        self.reset(n, k);
        let data = self.data_mut();
        for row in 0..n {
            let (panel, lane) = (row / PANEL, row % PANEL);
            let src = &b[row * stride..row * stride + k];
            let dst = &mut data[panel * PANEL * k..];
            for (p, &value) in src.iter().enumerate() {
                dst[p * PANEL + lane] = value;
            }
        }
    }

    /// Packs B given as Bᵀ (`k` rows of `n`, `stride` apart), e.g. the values of one attention head.
    #[inline(always)]
    pub fn pack_columns(&mut self, bt: &[f32], k: usize, n: usize, stride: usize) {
        self.reset(n, k);
        let data = self.data_mut();
        for panel in 0..n.div_ceil(PANEL) {
            let (col, width) = (panel * PANEL, PANEL.min(n - panel * PANEL));
            let dst = &mut data[panel * PANEL * k..(panel + 1) * PANEL * k];
            for (p, chunk) in dst.chunks_exact_mut(PANEL).enumerate() {
                chunk[..width].copy_from_slice(&bt[p * stride + col..p * stride + col + width]);
            }
        }
    }

    pub fn rows(&self) -> usize {
        self.n
    }
}

impl Default for Packed {
    fn default() -> Self {
        Self::new()
    }
}

/// The output of one tile: up to [`MAX_ROWS`] rows of one panel.
pub const MAX_ROWS: usize = 12;
type Tile = [[f32; PANEL]; MAX_ROWS];

/// One instruction set's tile: `rows` rows of A (`lda` apart) times one packed panel of depth `k`.
pub trait Isa {
    /// Rows per tile (what fits in the registers).
    const ROWS: usize;
    /// # Safety
    /// `a` holds `rows` rows of `k` values `lda` apart, `panel` `k` × 32 values; the CPU has
    /// the instruction set.
    unsafe fn tile(
        rows: usize,
        a: *const f32,
        lda: usize,
        panel: *const f32,
        k: usize,
        out: &mut Tile,
    );
}

/// C (`m` × `b.rows()`, `ldc` apart) = A (`m` × `b.k`, `lda` apart) · Bᵀ.
#[inline(always)]
pub fn matmul<I: Isa>(a: &[f32], lda: usize, m: usize, b: &Packed, c: &mut [f32], ldc: usize) {
    let (n, k) = (b.n, b.k);
    if m == 0 || n == 0 {
        return;
    }
    assert!(a.len() >= (m - 1) * lda + k && lda >= k, "A is too small");
    assert!(c.len() >= (m - 1) * ldc + n && ldc >= n, "C is too small");
    let data = b.data();
    let mut out: Tile = [[0.0; PANEL]; MAX_ROWS];
    for panel in 0..n.div_ceil(PANEL) {
        let col = panel * PANEL;
        let width = PANEL.min(n - col);
        let panel_data = &data[panel * PANEL * k..(panel + 1) * PANEL * k];
        let mut row = 0;
        while row < m {
            let rows = I::ROWS.min(m - row);
            // SAFETY: bounds asserted above; the caller chose an `Isa` the CPU has.
            unsafe {
                I::tile(
                    rows,
                    a[row * lda..].as_ptr(),
                    lda,
                    panel_data.as_ptr(),
                    k,
                    &mut out,
                );
            }
            for r in 0..rows {
                c[(row + r) * ldc + col..][..width].copy_from_slice(&out[r][..width]);
            }
            row += rows;
        }
    }
}

/// Dispatches a tile height known only at run time to the code compiled for it.
macro_rules! tile_by_rows {
    ($rows:expr, $f:ident, $($arg:expr),*) => {
        match $rows {
            1 => $f::<1>($($arg),*), 2 => $f::<2>($($arg),*), 3 => $f::<3>($($arg),*),
            4 => $f::<4>($($arg),*), 5 => $f::<5>($($arg),*), 6 => $f::<6>($($arg),*),
            7 => $f::<7>($($arg),*), 8 => $f::<8>($($arg),*), 9 => $f::<9>($($arg),*),
            10 => $f::<10>($($arg),*), 11 => $f::<11>($($arg),*), 12 => $f::<12>($($arg),*),
            _ => unreachable!("tile of {} rows", $rows),
        }
    };
}

/// Portable code: whatever the compiler makes of it for the target (SSE2 on x86-64).
pub struct Plain;

impl Isa for Plain {
    const ROWS: usize = 4;
    unsafe fn tile(
        rows: usize,
        a: *const f32,
        lda: usize,
        panel: *const f32,
        k: usize,
        out: &mut Tile,
    ) {
        // SAFETY: forwarded from the caller.
        unsafe { tile_by_rows!(rows, plain_tile, a, lda, panel, k, out) }
    }
}

#[inline(always)]
unsafe fn plain_tile<const R: usize>(
    a: *const f32,
    lda: usize,
    panel: *const f32,
    k: usize,
    out: &mut Tile,
) {
    let mut acc = [[0.0f32; PANEL]; R];
    for p in 0..k {
        // SAFETY: `panel` has `k` rows of 32, `a` `R` rows of `k`.
        let b = unsafe { &*panel.add(p * PANEL).cast::<[f32; PANEL]>() };
        for (r, acc) in acc.iter_mut().enumerate() {
            // SAFETY: row `r` < `R` of `a` holds `k` > `p` values at stride `lda` (the caller's
            // contract, as for `panel` above).
            let x = unsafe { *a.add(r * lda + p) };
            for j in 0..PANEL {
                acc[j] += x * b[j];
            }
        }
    }
    out[..R].copy_from_slice(&acc);
}

#[cfg(target_arch = "x86_64")]
pub use x86::{Avx2, Avx512};

// Register tiles read clearest with the row index spelled out: it picks the accumulator and
// the row of A at once.
#[allow(clippy::needless_range_loop)]
#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    use super::{Isa, PANEL, Tile};

    /// 12 rows × 32 columns: 24 accumulators, two panel registers and a broadcast (of 32).
    pub struct Avx512;

    impl Isa for Avx512 {
        const ROWS: usize = 12;
        unsafe fn tile(
            rows: usize,
            a: *const f32,
            lda: usize,
            panel: *const f32,
            k: usize,
            out: &mut Tile,
        ) {
            // SAFETY: forwarded from the caller, who checked the CPU has AVX-512F.
            unsafe { tile_by_rows!(rows, avx512_tile, a, lda, panel, k, out) }
        }
    }

    #[target_feature(enable = "avx512f")]
    unsafe fn avx512_tile<const R: usize>(
        a: *const f32,
        lda: usize,
        panel: *const f32,
        k: usize,
        out: &mut Tile,
    ) {
        let mut low = [_mm512_setzero_ps(); R];
        let mut high = [_mm512_setzero_ps(); R];
        for p in 0..k {
            // SAFETY: `panel` has `k` rows of 32 f32, `a` `R` rows of `k`.
            unsafe {
                let b0 = _mm512_loadu_ps(panel.add(p * PANEL));
                let b1 = _mm512_loadu_ps(panel.add(p * PANEL + 16));
                for r in 0..R {
                    let x = _mm512_set1_ps(*a.add(r * lda + p));
                    low[r] = _mm512_fmadd_ps(x, b0, low[r]);
                    high[r] = _mm512_fmadd_ps(x, b1, high[r]);
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

    /// 6 rows × 16 columns, twice per panel: 12 accumulators, two panel registers and a
    /// broadcast (of 16 registers).
    pub struct Avx2;

    impl Isa for Avx2 {
        const ROWS: usize = 6;
        unsafe fn tile(
            rows: usize,
            a: *const f32,
            lda: usize,
            panel: *const f32,
            k: usize,
            out: &mut Tile,
        ) {
            // SAFETY: forwarded from the caller, who checked the CPU has AVX2 and FMA.
            unsafe { tile_by_rows!(rows, avx2_tile, a, lda, panel, k, out) }
        }
    }

    #[target_feature(enable = "avx2,fma")]
    unsafe fn avx2_tile<const R: usize>(
        a: *const f32,
        lda: usize,
        panel: *const f32,
        k: usize,
        out: &mut Tile,
    ) {
        for half in 0..2 {
            let mut acc = [[_mm256_setzero_ps(); 2]; R];
            for p in 0..k {
                // SAFETY: as in `avx512_tile`.
                unsafe {
                    let b = panel.add(p * PANEL + half * 16);
                    let (b0, b1) = (_mm256_loadu_ps(b), _mm256_loadu_ps(b.add(8)));
                    for r in 0..R {
                        let x = _mm256_set1_ps(*a.add(r * lda + p));
                        acc[r][0] = _mm256_fmadd_ps(x, b0, acc[r][0]);
                        acc[r][1] = _mm256_fmadd_ps(x, b1, acc[r][1]);
                    }
                }
            }
            for r in 0..R {
                // SAFETY: each row of `out` has 32 f32.
                unsafe {
                    _mm256_storeu_ps(out[r].as_mut_ptr().add(half * 16), acc[r][0]);
                    _mm256_storeu_ps(out[r].as_mut_ptr().add(half * 16 + 8), acc[r][1]);
                }
            }
        }
    }
}

/// `row += bias` for each row of `m` (`n` wide, `ld` apart).
#[inline(always)]
pub fn add_bias(m: &mut [f32], rows: usize, n: usize, ld: usize, bias: &[f32]) {
    for r in 0..rows {
        for (x, b) in m[r * ld..r * ld + n].iter_mut().zip(bias) {
            *x += b;
        }
    }
}

/// `x = layer_norm(x + residual)` row by row (`n` wide, `ld` apart, both).
#[inline(always)]
pub fn add_and_norm(
    x: &mut [f32],
    residual: &[f32],
    rows: usize,
    n: usize,
    weight: &[f32],
    bias: &[f32],
    eps: f32,
) {
    for r in 0..rows {
        let row = &mut x[r * n..(r + 1) * n];
        for (v, res) in row.iter_mut().zip(&residual[r * n..(r + 1) * n]) {
            *v += res;
        }
        layer_norm_row(row, weight, bias, eps);
    }
}

#[inline(always)]
pub fn layer_norm_row(row: &mut [f32], weight: &[f32], bias: &[f32], eps: f32) {
    let n = row.len() as f32;
    let mean = sum(row) / n;
    let mut var = 0.0f32;
    let mut lanes = [0.0f32; 16];
    let mut chunks = row.chunks_exact(16);
    for chunk in &mut chunks {
        for j in 0..16 {
            let d = chunk[j] - mean;
            lanes[j] += d * d;
        }
    }
    for v in chunks.remainder() {
        var += (v - mean) * (v - mean);
    }
    var = (var + lanes.iter().sum::<f32>()) / n;
    let inv = 1.0 / (var + eps).sqrt();
    for ((v, w), b) in row.iter_mut().zip(weight).zip(bias) {
        *v = (*v - mean) * inv * w + b;
    }
}

/// A sum in 16 lanes (vectorisable: float addition is not reassociated by the compiler).
#[inline(always)]
pub fn sum(values: &[f32]) -> f32 {
    let mut lanes = [0.0f32; 16];
    let mut chunks = values.chunks_exact(16);
    for chunk in &mut chunks {
        for j in 0..16 {
            lanes[j] += chunk[j];
        }
    }
    lanes.iter().sum::<f32>() + chunks.remainder().iter().sum::<f32>()
}

#[inline(always)]
fn max(values: &[f32]) -> f32 {
    let mut lanes = [f32::NEG_INFINITY; 16];
    let mut chunks = values.chunks_exact(16);
    for chunk in &mut chunks {
        for j in 0..16 {
            lanes[j] = lanes[j].max(chunk[j]);
        }
    }
    let tail = chunks
        .remainder()
        .iter()
        .copied()
        .fold(f32::NEG_INFINITY, f32::max);
    lanes.iter().copied().fold(tail, f32::max)
}

/// Softmax of one row, in place.
#[inline(always)]
pub fn softmax_row(row: &mut [f32]) {
    let top = max(row);
    for v in row.iter_mut() {
        *v = exp(*v - top);
    }
    let inv = 1.0 / sum(row);
    for v in row.iter_mut() {
        *v *= inv;
    }
}

/// GELU with the exact (erf) form, as BERT uses, in place.
#[inline(always)]
pub fn gelu(values: &mut [f32]) {
    for v in values.iter_mut() {
        *v = 0.5 * *v * (1.0 + erf(*v * std::f32::consts::FRAC_1_SQRT_2));
    }
}

/// eˣ for f32 without branches or library calls, so loops over it vectorise: 2ⁿ·e^r with
/// n = round(x/ln 2) (by the add-and-subtract trick, which needs no rounding instruction) and
/// a degree-6 polynomial on |r| ≤ ln2/2; relative error about 2e-7.
#[inline(always)]
pub fn exp(x: f32) -> f32 {
    const MAGIC: f32 = 12_582_912.0; // 1.5 · 2²³
    let x = x.clamp(-87.0, 88.0);
    let shifted = x * std::f32::consts::LOG2_E + MAGIC;
    let n = shifted - MAGIC;
    let r = x - n * 0.693_145_75 - n * 1.428_606_8e-6;
    let p = 1.0
        + r * (1.0
            + r * (0.5
                + r * (1.0 / 6.0 + r * (1.0 / 24.0 + r * (1.0 / 120.0 + r * (1.0 / 720.0))))));
    // The low bits of `shifted` hold n as an integer.
    let bits = (shifted.to_bits() as i32 - MAGIC.to_bits() as i32 + 127) << 23;
    p * f32::from_bits(bits as u32)
}

/// erf(x), Abramowitz & Stegun 7.1.26 (absolute error under 1.5e-7), branch-free.
#[inline(always)]
pub fn erf(x: f32) -> f32 {
    let a = x.abs();
    let t = 1.0 / (1.0 + 0.327_591_1 * a);
    let poly = t
        * (0.254_829_6
            + t * (-0.284_496_74 + t * (1.421_413_7 + t * (-1.453_152 + t * 1.061_405_4))));
    let y = 1.0 - poly * exp(-a * a);
    y.copysign(x)
}

/// The check the reduced-precision kernels' tests share: C = A·Bᵀ against the f64 definition
/// at sizes with partial tiles, partial panels and odd depths, C written with 3 columns of
/// padding that must stay untouched. `multiply(a, m, b, n, k, c, ldc)` runs the kernel;
/// `tolerance(row of A, row of B)` is the error allowed for that product.
#[cfg(test)]
pub(crate) fn check_against_definition(
    multiply: impl Fn(&[f32], usize, &[f32], usize, usize, &mut [f32], usize),
    tolerance: impl Fn(&[f32], &[f32]) -> f64,
) {
    for (m, k, n) in [(1, 1, 1), (5, 7, 33), (13, 64, 32), (25, 385, 70)] {
        let a: Vec<f32> = (0..m * k)
            .map(|i| ((i * 37 % 101) as f32 - 50.0) / 50.0)
            .collect();
        let b: Vec<f32> = (0..n * k)
            .map(|i| ((i * 53 % 97) as f32 - 48.0) / 48.0)
            .collect();
        let ldc = n + 3;
        let mut c = vec![f32::NAN; m * ldc];
        multiply(&a, m, &b, n, k, &mut c, ldc);
        for i in 0..m {
            let row = &a[i * k..(i + 1) * k];
            for j in 0..n {
                let column = &b[j * k..(j + 1) * k];
                let exact: f64 = row
                    .iter()
                    .zip(column)
                    .map(|(x, w)| *x as f64 * *w as f64)
                    .sum();
                let allowed = tolerance(row, column);
                let got = c[i * ldc + j] as f64;
                assert!(
                    (got - exact).abs() <= allowed,
                    "{m}x{k}x{n} [{i},{j}]: {got} vs {exact} (allowed {allowed})"
                );
            }
            assert!(
                c[i * ldc + n..(i + 1) * ldc].iter().all(|v| v.is_nan()),
                "wrote outside C"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn naive(a: &[f32], m: usize, k: usize, b: &[f32], n: usize) -> Vec<f32> {
        let mut c = vec![0.0; m * n];
        for i in 0..m {
            for j in 0..n {
                c[i * n + j] = (0..k)
                    .map(|p| a[i * k + p] as f64 * b[j * k + p] as f64)
                    .sum::<f64>() as f32;
            }
        }
        c
    }

    fn numbers(count: usize, seed: u32) -> Vec<f32> {
        let mut state = seed.wrapping_mul(2_654_435_761).max(1);
        (0..count)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 17;
                state ^= state << 5;
                (state % 2001) as f32 / 1000.0 - 1.0
            })
            .collect()
    }

    fn run(kernel: Kernel, a: &[f32], lda: usize, m: usize, b: &Packed, c: &mut [f32], ldc: usize) {
        match kernel {
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx512 | Kernel::Avx512Bf16 | Kernel::Avx512Vnni => {
                matmul::<Avx512>(a, lda, m, b, c, ldc)
            }
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx2 => matmul::<Avx2>(a, lda, m, b, c, ldc),
            _ => matmul::<Plain>(a, lda, m, b, c, ldc),
        }
    }

    /// The int8 kernel moves search results, so it runs only when chosen by name.
    #[test]
    fn the_int8_kernel_is_never_detected() {
        assert_ne!(Kernel::detect(), Kernel::Avx512Vnni);
        assert!(Kernel::detect().is_supported());
        assert_eq!(Kernel::from_name("avx512-vnni"), Some(Kernel::Avx512Vnni));
    }

    /// Every kernel this CPU has, at sizes that leave partial tiles and partial panels.
    #[test]
    fn every_kernel_multiplies_like_the_definition() {
        for kernel in Kernel::ALL.into_iter().filter(|k| k.is_supported()) {
            for (m, k, n) in [
                (1, 1, 1),
                (5, 7, 33),
                (13, 64, 32),
                (25, 384, 70),
                (2, 100, 96),
            ] {
                let a = numbers(m * k, 1);
                let b = numbers(n * k, 2);
                let mut packed = Packed::new();
                packed.pack_rows(&b, n, k, k);
                let mut c = vec![f32::NAN; m * n];
                run(kernel, &a, k, m, &packed, &mut c, n);
                let expected = naive(&a, m, k, &b, n);
                for (x, y) in c.iter().zip(&expected) {
                    assert!(
                        (x - y).abs() < 1e-4 * (k as f32).sqrt(),
                        "{kernel} {m}x{k}x{n}: {x} vs {y}"
                    );
                }
                // The same B given transposed packs to the same panels.
                let bt: Vec<f32> = (0..k)
                    .flat_map(|p| (0..n).map(move |j| (p, j)))
                    .map(|(p, j)| b[j * k + p])
                    .collect();
                let mut from_columns = Packed::new();
                from_columns.pack_columns(&bt, k, n, n);
                assert!(
                    from_columns.data() == packed.data(),
                    "pack_columns differs from pack_rows"
                );
            }
        }
    }

    #[test]
    fn strided_operands_are_read_and_written_in_place() {
        let (m, k, n, lda, ldc) = (4, 8, 3, 20, 10);
        let a = numbers(m * lda, 3);
        let b = numbers(n * k, 4);
        let mut packed = Packed::new();
        packed.pack_rows(&b, n, k, k);
        let mut c = vec![7.0; m * ldc];
        matmul::<Plain>(&a, lda, m, &packed, &mut c, ldc);
        let dense_a: Vec<f32> = (0..m)
            .flat_map(|i| a[i * lda..i * lda + k].to_vec())
            .collect();
        let expected = naive(&dense_a, m, k, &b, n);
        for i in 0..m {
            for j in 0..n {
                assert!((c[i * ldc + j] - expected[i * n + j]).abs() < 1e-5);
            }
            assert!(
                c[i * ldc + n..(i + 1) * ldc].iter().all(|&v| v == 7.0),
                "wrote outside C"
            );
        }
    }

    #[test]
    fn exp_and_erf_match_the_library() {
        for i in -2000..=2000 {
            let x = i as f32 / 40.0;
            let (ours, libm) = (exp(x), x.exp());
            assert!(
                (ours - libm).abs() <= 4e-7 * libm,
                "exp({x}) = {ours}, not {libm}"
            );
            let reference = erf_reference(x as f64);
            assert!(
                (erf(x) as f64 - reference).abs() < 3e-7,
                "erf({x}) = {}, not {reference}",
                erf(x)
            );
        }
        assert_eq!(exp(-1000.0), exp(-87.0));
        assert!(exp(1000.0).is_finite());
    }

    /// erf by its Taylor series (|x| ≤ 3) or its asymptotic value, in f64.
    fn erf_reference(x: f64) -> f64 {
        if x.abs() > 3.0 {
            let a = x.abs();
            let tail = (-a * a).exp() / (a * std::f64::consts::PI.sqrt())
                * (1.0 - 0.5 / (a * a) + 0.75 / a.powi(4));
            return (1.0 - tail).copysign(x);
        }
        let (mut term, mut total) = (x, x);
        for n in 1..200 {
            term *= -x * x / n as f64;
            total += term / (2 * n + 1) as f64;
        }
        total * 2.0 / std::f64::consts::PI.sqrt()
    }

    #[test]
    fn softmax_and_layer_norm_do_what_they_say() {
        let mut row = vec![1.0, 2.0, 3.0, -100.0];
        softmax_row(&mut row);
        let denominator = 1f32.exp() + 2f32.exp() + 3f32.exp() + (-100f32).exp();
        assert!((row[2] - 3f32.exp() / denominator).abs() < 1e-6);
        assert!((row.iter().sum::<f32>() - 1.0).abs() < 1e-6);

        let mut row: Vec<f32> = (0..40).map(|i| i as f32).collect();
        layer_norm_row(&mut row, &[2.0; 40], &[1.0; 40], 0.0);
        let mean = row.iter().sum::<f32>() / 40.0;
        let var = row.iter().map(|v| (v - mean) * (v - mean)).sum::<f32>() / 40.0;
        assert!(
            (mean - 1.0).abs() < 1e-5 && (var - 4.0).abs() < 1e-4,
            "{mean} {var}"
        );
    }
}
