import { test, expect } from '@playwright/test';
import { appReady, signIn, unique } from './helpers';

// Issue: operator safety. YAML that does not parse is marked on its line as it is typed,
// and the server refuses it with the same line and column.

test('broken YAML is marked on its line in the editor and refused by the server', async ({ page }) => {
  await signIn(page);
  const name = unique('yaml');
  await page.goto('/pipelines');
  await appReady(page);
  await page.getByLabel('Name').fill(name);
  await page.getByRole('button', { name: 'Create pipeline' }).click();
  await page.getByRole('status').getByRole('link', { name }).click();
  await expect(page.getByRole('heading', { level: 1, name })).toBeVisible();

  page.on('dialog', (d) => d.accept());
  await page.getByRole('radio', { name: 'Deploy now' }).check();
  const editor = page.getByLabel('Config (YAML)');
  await editor.fill('sources:\n  in: [1, 2\n  out: 3\n');
  await expect(page.getByTestId('config-error-line')).toHaveText('3');
  await expect(page.getByTestId('config-problem')).toContainText("line 3, column 6: illegal placement of ':' indicator");
  await expect(editor).toHaveAttribute('aria-invalid', 'true');

  // The server says the same if the operator sends it anyway.
  await page.getByLabel('Changelog').fill('broken');
  await page.getByRole('button', { name: 'Deploy now' }).click();
  await expect(page.getByRole('alert')).toContainText('configYaml: line 3, column 6');

  // Fixed, the mark goes away.
  await editor.fill('sources:\n  in: [1, 2]\n  out: 3\n');
  await expect(page.getByTestId('config-error-line')).toHaveCount(0);
  await expect(page.getByTestId('config-problem')).toHaveCount(0);
});

test('the deploy dialog opens on a progressive rollout and Enter in a field never starts anything', async ({ page }) => {
  await signIn(page);
  const name = unique('enter');
  await page.goto('/pipelines');
  await appReady(page);
  await page.getByLabel('Name').fill(name);
  await page.getByRole('button', { name: 'Create pipeline' }).click();
  await page.getByRole('status').getByRole('link', { name }).click();
  await expect(page.getByRole('heading', { level: 1, name })).toBeVisible();

  // Any confirmation would be accepted: Enter must not even ask.
  const asked: string[] = [];
  page.on('dialog', (d) => {
    asked.push(d.message());
    void d.accept();
  });
  await expect(page.getByRole('radio', { name: 'Progressive Rollout' })).toBeChecked();
  await page.getByLabel('Config (YAML)').fill('sources: {}\n');
  const changelog = page.getByLabel('Changelog');
  await changelog.fill('typed and pressed Enter');
  await changelog.press('Enter');
  await page.getByRole('radio', { name: 'Deploy now' }).check();
  await changelog.press('Enter');
  // Nothing was deployed or started: no status line, and the pipeline is still undeployed.
  await page.waitForTimeout(1_000);
  await expect(page.getByRole('status').filter({ hasText: /Deployed|started/ })).toHaveCount(0);
  await expect(page.getByTestId('deployed-version')).toHaveText('not deployed');
  expect(asked).toEqual([]);
});
