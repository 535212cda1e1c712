import { expect, test } from '@playwright/test';
import { PASSWORD, deliveredMail, signUp } from './helpers';

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

test('a forgotten password is reset through the delivered mail, then the account deleted', async ({ page, request }) => {
  const email = await signUp(page, request);
  await page.getByRole('button', { name: 'Log out' }).click();
  await expect(page).toHaveURL(/\/$/);

  await page.goto('/login');
  await page.getByRole('link', { name: 'Forgot your password?' }).click();
  await expect(page).toHaveURL(/\/password\/forgot$/);
  await page.getByLabel('Email').fill(email);
  await page.getByRole('button', { name: 'Mail me a link' }).click();
  await expect(page).toHaveURL(/\/password\/sent$/);

  const mail = await deliveredMail(request, email, /\/password\/reset\?token=/);
  expect(mail.subject).toBe('Zenbu: reset your password');
  expect(mail.html).toContain('/password/reset?token=');
  const link = /\/password\/reset\?token=[0-9a-f]+/.exec(mail.text)![0];
  await page.goto(link);
  await page.getByLabel('New password').fill('a brand new password');
  await page.getByRole('button', { name: 'Set my password' }).click();
  await expect(page).toHaveURL(/\/login\?notice=password-reset$/);
  await expect(page.getByRole('status')).toContainText('Your password is changed');

  await page.getByLabel('Email').fill(email);
  await page.getByLabel('Password').fill(PASSWORD);
  await page.getByRole('button', { name: 'Log in' }).click();
  await expect(page.getByRole('alert')).toHaveText('Email or password is wrong.');
  await page.getByLabel('Email').fill(email);
  await page.getByLabel('Password').fill('a brand new password');
  await page.getByRole('button', { name: 'Log in' }).click();
  await expect(page).toHaveURL(/\/account$/);
  await expect((await deliveredMail(request, email, /was just changed/)).subject).toBe(
    'Zenbu: your password was changed',
  );

  // Deleting the account: the password again, then the account is gone.
  await page.locator('#delete-password').fill('a brand new password');
  await page.getByRole('button', { name: 'Delete my account' }).click();
  await expect(page).toHaveURL(/\/login\?notice=account-deleted$/);
  await expect(page.getByRole('status')).toContainText('Your account is deleted.');
  await page.getByLabel('Email').fill(email);
  await page.getByLabel('Password').fill('a brand new password');
  await page.getByRole('button', { name: 'Log in' }).click();
  await expect(page.getByRole('alert')).toHaveText('Email or password is wrong.');
});

test('el correo llega en español a quien usa la interfaz en español', async ({ browser, request }) => {
  const context = await browser.newContext({ locale: 'es-ES' });
  const page = await context.newPage();
  const email = `e2e-es-${Date.now()}@example.com`;
  await page.goto('/register');
  await page.getByLabel('Correo').fill(email);
  await page.getByRole('button', { name: 'Crear cuenta' }).click();
  await expect(page).toHaveURL(/\/register\/sent$/);
  const mail = await deliveredMail(request, email, /\/register\/confirm\?token=/);
  expect(mail.subject).toBe('Zenbu: termina de crear tu cuenta');
  await context.close();
});
