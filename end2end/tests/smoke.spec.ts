import { expect, test } from '@playwright/test';

test('home page renders on the server and hydrates', async ({ page, request }) => {
  // Server-rendered: the search form is in the HTML before any script runs.
  const html = await (await request.get('/')).text();
  expect(html).toContain('<form');
  expect(html).toContain('name="q"');
  expect(html).not.toContain('data-hydrated');

  await page.goto('/');
  await expect(page.getByRole('heading', { level: 1, name: 'Zenbu' })).toBeVisible();
  await expect(page.locator('body')).toHaveAttribute('data-hydrated', 'true');

  // The example buttons only work once the wasm runs.
  const search = page.getByLabel('Describe the anime you are looking for');
  await expect(search).toHaveValue('');
  const example = page.getByRole('button', { name: 'algo tranquilo, de alguien que viaja solo y ayuda a la gente' });
  await example.click();
  await expect(search).toHaveValue('algo tranquilo, de alguien que viaja solo y ayuda a la gente');

  await page.screenshot({ path: 'artifacts/home.png', fullPage: true });
});

test('submitting the form says plainly that search is not live yet', async ({ page }) => {
  await page.goto('/');
  await expect(page.locator('body')).toHaveAttribute('data-hydrated', 'true');
  await page.getByLabel('Describe the anime you are looking for').fill('piratas buscando un tesoro');
  await page.getByRole('button', { name: 'Search' }).click();
  await expect(page).toHaveURL(/\?q=piratas/);
  await expect(page.getByRole('status')).toContainText('Search is not available yet');
  await expect(page.getByRole('status')).toContainText('piratas buscando un tesoro');
});

test('healthz reports PostgreSQL and pgvector versions', async ({ request }) => {
  const response = await request.get('/healthz');
  expect(response.status()).toBe(200);
  const body = await response.json();
  expect(body.status).toBe('ok');
  expect(body.postgres).toMatch(/^18\./);
  expect(body.pgvector).toMatch(/^0\.8\./);
});

test('unknown pages answer 404 with a way back', async ({ page }) => {
  const response = await page.goto('/no-such-page');
  expect(response?.status()).toBe(404);
  await expect(page.getByRole('heading', { name: 'Page not found' })).toBeVisible();
  await expect(page.getByRole('link', { name: 'Back to search' })).toHaveAttribute('href', '/');
});
