import { expect, test } from '@playwright/test';
import { signUp } from './helpers';

test('Go Premium: fake Stripe Checkout, signed webhook, Premium with 200 searches', async ({ page, request }) => {
  await signUp(page, request);
  await expect(page.locator('dd.plan')).toHaveText('Free');

  await page.goto('/premium');
  await page.screenshot({ path: 'artifacts/premium.png', fullPage: true });
  await page.getByRole('button', { name: 'Go Premium' }).click();
  // Stripe's hosted page (the fake's).
  await expect(page.getByRole('heading', { level: 1 })).toHaveText('Fake Stripe Checkout');
  await page.getByRole('button', { name: 'Pay' }).click();
  // The fake delivered the signed webhook before redirecting back.
  await expect(page).toHaveURL(/\/premium\/success\?session_id=cs_/);
  await expect(page.getByRole('heading', { level: 1 })).toHaveText('Thank you!');

  await page.goto('/account');
  await expect(page.locator('dd.plan')).toHaveText('Premium');
  await expect(page.locator('dd.usage')).toContainText('of 200 searches this month');
  await expect(page.getByRole('button', { name: 'Manage billing' })).toBeVisible();
  await page.screenshot({ path: 'artifacts/account-premium.png', fullPage: true });

  // Cancelling in the billing portal: Stripe's webhook takes Premium away.
  await page.getByRole('button', { name: 'Manage billing' }).click();
  await expect(page.getByRole('heading', { level: 1 })).toHaveText('Fake Stripe billing portal');
  await page.getByRole('button', { name: 'Cancel plan' }).click();
  await expect(page).toHaveURL(/\/account$/);
  await expect(page.locator('dd.plan')).toHaveText('Free');
});
