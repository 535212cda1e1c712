import { expect, test } from '@playwright/test';

test.describe('a Spanish browser', () => {
  test.use({ locale: 'es-ES' });

  test('gets the Spanish interface, and the switch to English sticks', async ({ page }) => {
    await page.goto('/');
    await expect(page.locator('html')).toHaveAttribute('lang', 'es');
    await expect(page.getByLabel('Describe el anime que buscas')).toBeVisible();
    await expect(page.locator('body')).toHaveAttribute('data-hydrated', 'true');
    await page.getByLabel('Describe el anime que buscas').fill('algo tranquilo, de alguien que viaja solo y ayuda a la gente');
    await page.getByRole('button', { name: 'Buscar', exact: true }).click();
    await expect(page.locator('li.hit h3 a', { hasText: /^Mushishi/ }).first()).toBeVisible();
    // The Spanish interface's own placeholder (the brief's example) puts Mushishi in the first
    // three, as the English interface's does (smoke.spec.ts).
    const firstThree = (await page.locator('li.hit h3 a').allTextContents()).slice(0, 3);
    expect(firstThree.some((title) => /^Mushishi/.test(title.trim())), firstThree.join(' | ')).toBe(true);
    await expect(page.locator('p.quota')).toContainText('Te quedan 9 de 10 búsquedas este año');
    await page.screenshot({ path: 'artifacts/results-es.png', fullPage: true });

    // The switch keeps the page and remembers the choice.
    await page.getByRole('link', { name: 'English' }).click();
    await expect(page).toHaveURL(/\?q=algo/);
    await expect(page.locator('html')).toHaveAttribute('lang', 'en');
    await expect(page.getByLabel('Describe the anime you are looking for')).toBeVisible();
    await page.goto('/login');
    await expect(page.getByRole('heading', { level: 1 })).toHaveText('Log in');
    await page.getByRole('link', { name: 'Español' }).click();
    await expect(page.getByRole('heading', { level: 1 })).toHaveText('Entrar');
  });
});
