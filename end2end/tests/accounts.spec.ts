import { expect, test } from '@playwright/test';
import { PASSWORD, signUp } from './helpers';

test('sign up by emailed link, log out, log in again', async ({ page, request }) => {
  const email = await signUp(page, request);
  await expect(page.locator('dd.email')).toHaveText(email);
  await expect(page.locator('dd.plan')).toHaveText('Free');
  await expect(page.locator('dd.usage')).toContainText('of 30 searches this month');
  await page.screenshot({ path: 'artifacts/account.png', fullPage: true });

  await page.getByRole('button', { name: 'Log out' }).click();
  await expect(page).toHaveURL(/\/$/);
  await expect(page.getByRole('link', { name: 'Log in' })).toBeVisible();

  await page.goto('/login');
  await page.getByLabel('Email').fill(email.toUpperCase());
  await page.getByLabel('Password').fill('not the password');
  await page.getByRole('button', { name: 'Log in' }).click();
  await expect(page.getByRole('alert')).toHaveText('Email or password is wrong.');
  await page.getByLabel('Email').fill(email.toUpperCase());
  await page.getByLabel('Password').fill(PASSWORD);
  await page.getByRole('button', { name: 'Log in' }).click();
  await expect(page).toHaveURL(/\/account$/);
  await expect(page.getByRole('link', { name: email })).toBeVisible();
});
