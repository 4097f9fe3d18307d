import { test, expect, Page } from '@playwright/test';
import { appReady, callApi, signIn, unique } from './helpers';

// Issue: operator safety (works on a phone). At 390 px no page scrolls sideways (a wide
// table scrolls inside its card) and the navigation folds into a menu.

test.use({ viewport: { width: 390, height: 844 } });

async function noSidewaysScroll(page: Page, path: string) {
  await page.goto(path);
  await appReady(page);
  const { scroll, width } = await page.evaluate(() => ({
    scroll: document.documentElement.scrollWidth,
    width: document.documentElement.clientWidth,
  }));
  expect(scroll, `${path} is ${scroll} px wide in a ${width} px window`).toBeLessThanOrEqual(width);
}

test('every page fits a 390 px phone and the navigation is a menu', async ({ page, request }) => {
  await signIn(page);
  const envs = await callApi<{ id: string; name: string }[]>(request, 'environment.list', {});
  const pipeline = await callApi<{ id: string }>(request, 'pipeline.create', {
    environment_id: envs[0].id,
    name: unique('phone'),
    node_selector: { 'e2e-run': 'phone' },
  });
  for (const path of ['/', '/groups', '/pipelines', `/pipelines/${pipeline.id}`, '/environments', '/admin/edge-config', '/audit', '/users', '/account']) {
    await noSidewaysScroll(page, path);
  }
  await noSidewaysScroll(page, `/pipelines/${pipeline.id}`);
  await page.screenshot({ path: 'test-results/screenshots/phone-pipeline.png', fullPage: false });

  // The menu: folded, opened by its button, folded again after following a link.
  const nav = page.getByRole('navigation', { name: 'Main' });
  await expect(nav).toBeHidden();
  await page.getByRole('button', { name: 'Menu' }).click();
  await expect(nav).toBeVisible();
  await page.screenshot({ path: 'test-results/screenshots/phone-menu.png', fullPage: false });
  await nav.getByRole('link', { name: 'Pipelines' }).click();
  await expect(page.getByRole('heading', { level: 1, name: 'Pipelines' })).toBeVisible();
  await expect(nav).toBeHidden();
});
