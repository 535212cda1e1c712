import { expect, test } from '@playwright/test';

const DESCRIBE = 'Describe the anime you are looking for';

test('searching after hydration does not reload the page, shows why each result matched', async ({ page }) => {
  await page.goto('/');
  await expect(page.locator('body')).toHaveAttribute('data-hydrated', 'true');
  await expect(page.locator('p.quota')).toContainText('10 of 10 searches left this year');
  // A marker that a full page load would wipe out.
  await page.evaluate(() => ((window as any).zenbuMarker = 'still here'));
  await page.getByLabel(DESCRIBE).fill('pirates looking for a legendary treasure');
  await page.getByRole('button', { name: 'Search', exact: true }).click();
  await expect(page).toHaveURL(/\?q=pirates/);
  const hits = page.locator('ol.hits > li.hit');
  await expect(hits.first()).toBeVisible();
  expect(await page.evaluate(() => (window as any).zenbuMarker)).toBe('still here');
  // The allowance line changed in place.
  await expect(page.locator('p.quota')).toContainText('9 of 10 searches left this year');
  // Every result says which search found it; word matches say which words or title.
  for (const badge of await hits.locator('.badge').allTextContents()) {
    expect(['words', 'meaning', 'words + meaning']).toContain(badge);
  }
  await expect(page.locator('li.hit .why').first()).toContainText(/Matching words:|Title match:/);
  await expect(page.locator('li.hit .why').filter({ hasText: 'treasure' }).first()).toBeVisible();
});

test('filters narrow the results and stay in the URL', async ({ page }) => {
  await page.goto('/');
  await expect(page.locator('body')).toHaveAttribute('data-hydrated', 'true');
  await page.getByLabel(DESCRIBE).fill('a boy who can see ghosts');
  await page.getByText('Filters').click();
  await page.getByLabel('Format').selectOption('TV');
  await page.getByLabel('From year').fill('2000');
  await page.getByLabel('To year').fill('2015');
  await page.getByRole('button', { name: 'Search', exact: true }).click();
  await expect(page).toHaveURL(/format=TV/);
  await expect(page).toHaveURL(/from=2000/);
  await expect(page).toHaveURL(/to=2015/);
  const facts = page.locator('li.hit .facts');
  await expect(facts.first()).toBeVisible();
  for (const line of await facts.allTextContents()) {
    const [year, format] = line.split(' — ')[0].split(' · ');
    expect(Number(year)).toBeGreaterThanOrEqual(2000);
    expect(Number(year)).toBeLessThanOrEqual(2015);
    expect(format).toBe('TV');
  }
  await page.screenshot({ path: 'artifacts/filters.png', fullPage: true });
  // The URL alone brings the same search back, filters shown as chosen.
  const url = page.url();
  await page.goto(url);
  await expect(page.getByLabel('Format')).toHaveValue('TV');
  await expect(page.getByLabel('From year')).toHaveValue('2000');
});

test('similar-to navigation goes from anime to anime', async ({ page }) => {
  await page.goto('/?q=mushishi');
  await page.locator('li.hit h3 a').first().click();
  await expect(page).toHaveURL(/\/anime\/\d+$/);
  const first = await page.getByRole('heading', { level: 1 }).textContent();
  const similar = page.locator('section.similar li.hit h3 a').first();
  const next = await similar.textContent();
  await similar.click();
  await expect(page).toHaveURL(/\/anime\/\d+$/);
  await expect(page.getByRole('heading', { level: 1 })).toHaveText(next!);
  expect(next).not.toBe(first);
  await expect(page.locator('section.similar li.hit').first()).toBeVisible();
});

test.describe('without JavaScript', () => {
  test.use({ javaScriptEnabled: false });

  test('the whole search flow works with plain forms and links', async ({ page }) => {
    await page.goto('/');
    await page.getByLabel(DESCRIBE).fill('algo tranquilo, de alguien que viaja solo y ayuda a la gente');
    await page.getByText('Filters').click();
    await page.getByLabel('Format').selectOption('TV');
    await page.getByRole('button', { name: 'Search', exact: true }).click();
    await expect(page).toHaveURL(/\?q=algo\+tranquilo.*format=TV/);
    const mushishi = page.locator('li.hit h3 a', { hasText: /^Mushishi/ }).first();
    await expect(mushishi).toBeVisible();
    await expect(page.locator('p.quota')).toContainText('9 of 10 searches left this year');
    await page.screenshot({ path: 'artifacts/results-no-js.png', fullPage: true });
    await mushishi.click();
    await expect(page.getByRole('heading', { level: 1 })).toContainText('Mushishi');
    await page.locator('section.similar li.hit h3 a').first().click();
    await expect(page).toHaveURL(/\/anime\/\d+$/);
    await page.getByRole('link', { name: '← Search' }).click();
    await expect(page.getByLabel(DESCRIBE)).toBeVisible();
  });
});

test('keyboard only, on a phone-width screen', async ({ page }) => {
  await page.setViewportSize({ width: 375, height: 740 });
  await page.goto('/');
  await expect(page.locator('body')).toHaveAttribute('data-hydrated', 'true');
  // Tab from the top of the page reaches the search box through the header links.
  let reached = false;
  for (let i = 0; i < 12 && !reached; i++) {
    await page.keyboard.press('Tab');
    reached = await page.evaluate(() => document.activeElement?.id === 'q');
  }
  expect(reached).toBe(true);
  await page.keyboard.type('piratas buscando un tesoro legendario');
  await page.keyboard.press('Enter');
  await expect(page.locator('ol.hits > li.hit').first()).toBeVisible();
  // Nothing wider than the screen.
  const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  expect(overflow).toBeLessThanOrEqual(0);
  await page.screenshot({ path: 'artifacts/results-phone.png', fullPage: true });
});
