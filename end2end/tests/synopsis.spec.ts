import { expect, test } from '@playwright/test';

// Mushishi's page in the Spanish interface: Apertium's translation of the synopsis, said to be
// one, and the original behind "Ver el original" — with JavaScript off (a plain <details>) and on
// (after hydration).
for (const javaScriptEnabled of [false, true]) {
  test.describe(`the Spanish synopsis, JavaScript ${javaScriptEnabled ? 'on' : 'off'}`, () => {
    test.use({ locale: 'es-ES', javaScriptEnabled });

    test('shows the translation and opens the original', async ({ page }) => {
      await page.goto('/anime/457');
      if (javaScriptEnabled) {
        await expect(page.locator('body')).toHaveAttribute('data-hydrated', 'true');
      } else {
        await expect(page.locator('body')).not.toHaveAttribute('data-hydrated', 'true');
      }
      await expect(page.locator('.anime-details .description[lang="es"]')).toContainText(' que ');
      await expect(page.locator('.machine-translated')).toHaveText('Traducción automática del inglés.');
      const original = page.locator('.original-synopsis .description[lang="en"]');
      await expect(original).toBeHidden();
      await page.getByText('Ver el original (en inglés)').click();
      await expect(original).toBeVisible();
      await expect(original).toContainText('Ginko');
    });
  });
}

test('the English interface shows the original only', async ({ page }) => {
  await page.goto('/anime/457');
  await expect(page.locator('.anime-details .description[lang="en"]')).toContainText('Ginko');
  await expect(page.locator('.machine-translated')).toHaveCount(0);
});
