import AxeBuilder from '@axe-core/playwright';
import { expect, test, type Page, type TestInfo } from '@playwright/test';
import { signUp } from './helpers';

// The pages a visitor sees most, checked by axe-core in both languages: no serious or critical
// violation. Screenshots at a phone's and a desktop's width go into the test report.
const PAGES: [string, string][] = [
  ['home', '/'],
  ['results', '/?q=' + encodeURIComponent('algo tranquilo, de alguien que viaja solo y ayuda a la gente')],
  ['anime', '/anime/457'],
  ['log-in', '/login'],
];
const WIDTHS: [string, number, number][] = [
  ['phone', 390, 844],
  ['desktop', 1280, 900],
];

async function check(page: Page, testInfo: TestInfo, name: string) {
  const results = await new AxeBuilder({ page }).analyze();
  expect(results.passes.length, `${name}: axe checked nothing`).toBeGreaterThan(10);
  const serious = results.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical');
  expect(
    serious.map((v) => `${v.id} (${v.impact}): ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`),
    name,
  ).toEqual([]);
  for (const [label, width, height] of WIDTHS) {
    await page.setViewportSize({ width, height });
    await testInfo.attach(`${name}-${label}.png`, {
      body: await page.screenshot({ fullPage: true }),
      contentType: 'image/png',
    });
  }
}

for (const locale of ['en-US', 'es-ES']) {
  test.describe(`accessibility (${locale})`, () => {
    test.use({ locale });

    test('home, results, anime and log-in pages', async ({ page }, testInfo) => {
      for (const [name, path] of PAGES) {
        await page.goto(path);
        await check(page, testInfo, `${locale}-${name}`);
      }
    });
  });
}

test('the account page, in both languages', async ({ page, request }, testInfo) => {
  await signUp(page, request);
  await check(page, testInfo, 'en-account');
  // The language switch (a cookie), then the same page in Spanish.
  await page.goto('/lang?to=es&back=/account');
  await expect(page.locator('html')).toHaveAttribute('lang', 'es');
  await check(page, testInfo, 'es-account');
});
