import { expect, test } from '@playwright/test';

// Each test's browser context is a new anonymous visitor: 10 text searches a year.

test('the 11th distinct search is refused with the reset date; a repeat counts once', async ({ page }) => {
  const nextYear = new Date().getUTCFullYear() + 1;
  await page.goto('/?q=pirates+treasure');
  await expect(page.locator('p.quota')).toContainText('9 of 10 searches left this year');
  // The same query again within 3 minutes: not counted.
  await page.goto('/?q=pirates+treasure');
  await expect(page.locator('p.quota')).toContainText('9 of 10 searches left this year');
  await page.goto('/?q=Pirates++TREASURE');
  await expect(page.locator('p.quota')).toContainText('9 of 10 searches left this year');

  for (let i = 2; i <= 10; i++) {
    await page.goto(`/?q=${encodeURIComponent(`a story number ${i}`)}`);
    await expect(page.locator('p.quota')).toContainText(`${10 - i} of 10 searches left this year`);
  }
  const refused = await page.goto('/?q=one+more+story');
  expect(refused?.status()).toBe(429);
  await expect(page.getByRole('heading', { name: 'You have used all your searches' })).toBeVisible();
  await expect(page.getByRole('alert')).toContainText(`They come back on ${nextYear}-01-01`);
  await expect(page.getByRole('link', { name: 'create a free account' })).toHaveAttribute('href', '/register');
  await page.screenshot({ path: 'artifacts/quota-exhausted.png', fullPage: true });
  // Browsing stays free.
  await page.goto('/?q=pirates+treasure');
  await page.locator('li.hit h3 a').first().click();
  await expect(page.locator('section.similar li.hit').first()).toBeVisible();
});
