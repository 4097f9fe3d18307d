import { test, expect } from '@playwright/test';
import { appReady, signIn } from './helpers';

// Issue: operator safety (fast off localhost). Pages and the bundle go compressed, and the
// bundle's name carries a hash of its content so browsers keep it for good.

test('the page and its bundle load compressed, and the bundle is cached for good', async ({ page }) => {
  await signIn(page);
  const wasm = page.waitForResponse((r) => /\/pkg\/[^/]+\.wasm$/.test(r.url()));
  const html = page.waitForResponse((r) => new URL(r.url()).pathname === '/pipelines');
  await page.goto('/pipelines');
  await appReady(page);

  const bundle = await wasm;
  expect(bundle.url()).toMatch(/\/pkg\/vectorflow\.[\w-]+\.wasm$/);
  const headers = await bundle.allHeaders();
  expect(headers['content-encoding']).toMatch(/^(br|gzip)$/);
  expect(headers['cache-control']).toBe('public, max-age=31536000, immutable');
  expect((await (await html).allHeaders())['content-encoding']).toMatch(/^(br|gzip)$/);
});
