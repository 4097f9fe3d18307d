import { test, expect } from '@playwright/test';
import { appReady, signIn } from './helpers';

// Issue: operator safety. With the app's bundle missing, a page used to look normal with
// every button dead; now it says so.

test('a page whose bundle does not load says it could not start', async ({ page }) => {
  await signIn(page);
  await page.goto('/pipelines');
  await appReady(page);
  await expect(page.getByText('This page could not start in your browser')).toBeHidden();

  await page.route('**/pkg/*.wasm', (route) => route.abort());
  await page.goto('/pipelines');
  const notice = page.getByRole('alert').filter({ hasText: 'could not start in your browser' });
  await expect(notice).toBeVisible({ timeout: 20_000 });
  await expect(page.locator('html')).not.toHaveAttribute('data-hydrated', 'true');
});
