import { expect, test } from '@playwright/test';

// Demo ids by what the fake AniList does with their posters (playwright.config.ts): Mushishi
// has one; 1572 (divisible by 3) has none; 1445 (divisible by 5) has one whose host answers 500.
const PRESENT = 457;
const MISSING = 1572;
const BROKEN = 1445;

test('a poster, a missing one and a broken upstream: the page never shows a broken image', async ({ page }) => {
  await page.goto(`/anime/${PRESENT}`);
  const poster = page.locator('.anime-details .poster img');
  await expect(poster).toHaveAttribute('src', `/img/anime/${PRESENT}/cover`);
  await expect(poster).toHaveAttribute('alt', 'Mushishi');
  await expect.poll(() => poster.evaluate((img: HTMLImageElement) => img.complete && img.naturalWidth)).toBeGreaterThan(0);
  const served = await page.request.get(`/img/anime/${PRESENT}/cover`);
  expect(served.headers()['content-type']).toBe('image/png');

  await page.goto(`/anime/${MISSING}`);
  await expect(page.locator('.anime-details .poster-missing')).toBeVisible();
  await expect(page.locator('.anime-details .poster img')).toHaveCount(0);
  await expect(page.locator('.anime-details .poster-missing text')).not.toHaveText('');

  await page.goto(`/anime/${BROKEN}`);
  const broken = page.locator('.anime-details .poster img');
  // The proxy answers its placeholder for a failing upstream: the image still loads.
  await expect.poll(() => broken.evaluate((img: HTMLImageElement) => img.complete && img.naturalWidth)).toBeGreaterThan(0);
  const placeholder = await page.request.get(`/img/anime/${BROKEN}/cover`);
  expect(placeholder.headers()['content-type']).toBe('image/svg+xml');
});

test('cards keep their place while posters load (layout shift under 0.05)', async ({ page }) => {
  // Record every layout shift from the first paint on.
  await page.addInitScript(() => {
    (window as any).__shift = 0;
    new PerformanceObserver((list) => {
      for (const entry of list.getEntries() as any[]) {
        if (!entry.hadRecentInput) (window as any).__shift += entry.value;
      }
    }).observe({ type: 'layout-shift', buffered: true });
  });
  await page.goto('/?q=' + encodeURIComponent('un samurai vagabundo que no quiere matar'));
  const images = page.locator('.card .poster img');
  expect(await images.count()).toBeGreaterThan(0);
  await page.evaluate(async () => {
    // Scroll through so every lazy poster loads, then wait for all of them.
    for (let y = 0; y < document.body.scrollHeight; y += 400) {
      window.scrollTo(0, y);
      await new Promise((r) => setTimeout(r, 50));
    }
    await Promise.all(
      Array.from(document.querySelectorAll<HTMLImageElement>('.card .poster img')).map((img) =>
        img.complete ? null : new Promise((r) => img.addEventListener('load', r, { once: true })),
      ),
    );
  });
  const shift = await page.evaluate(() => (window as any).__shift as number);
  expect(shift).toBeLessThan(0.05);
});
