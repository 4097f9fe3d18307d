import { test, expect, Page } from '@playwright/test';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { createPipeline, signIn, startAgent, unique, AgentProcess } from './helpers';

// Issue: operator UI. A two-stage plan authored in the deploy dialog, two real agents
// labelled rollout-wave=a and rollout-wave=b, checked from what the agents themselves received.

const shots = path.resolve(__dirname, '../test-results/screenshots');

/** The config the simulated agent of `agent` wrote for `pipelineId` (null: not served). */
function servedConfig(agent: AgentProcess, pipelineId: string): string | null {
  const file = path.join(agent.dataDir, 'sim-0', 'pipelines', `${pipelineId}.yaml`);
  return fs.existsSync(file) ? fs.readFileSync(file, 'utf8') : null;
}

async function deployNow(page: Page, config: string) {
  await page.getByRole('radio', { name: 'Deploy now' }).check();
  await page.getByLabel('Config (YAML)').fill(config);
  await page.getByLabel('Changelog').fill('baseline');
  await page.getByRole('button', { name: 'Deploy now' }).click();
  await expect(page.getByRole('status').filter({ hasText: /Deployed v\d+/ })).toBeVisible();
}

async function expectRunning(page: Page, node: string, version: string) {
  const row = page.getByTestId('pipeline-nodes').locator(`tr[data-node="${node}"]`);
  await expect(row).toHaveAttribute('data-running', version, { timeout: 30_000 });
}

/** Fills stage `n` (1-based) of the plan editor with a labels selector and an error-rate gate. */
async function fillStage(page: Page, n: number, wave: string) {
  const stage = page.getByRole('group', { name: `Stage ${n}` });
  await stage.getByLabel('Selector').selectOption({ label: 'Labels' });
  await stage.getByLabel('Labels').fill(`rollout-wave=${wave}`);
  await stage.getByLabel('Bake time').fill('30');
  await stage.getByLabel('Unit').selectOption({ label: 'seconds' });
  await stage.getByLabel('Error rate').check();
  await stage.getByLabel('Max error %').fill('5');
}

async function authorTwoStagePlan(page: Page, config: string, autoAdvance: boolean) {
  await page.getByRole('radio', { name: 'Progressive Rollout' }).check();
  await page.getByLabel('Config (YAML)').fill(config);
  await page.getByLabel('Changelog').fill('two waves');
  await fillStage(page, 1, 'a');
  await page.getByRole('button', { name: 'Add stage' }).click();
  await fillStage(page, 2, 'b');
  if (!autoAdvance) await page.getByLabel('Auto-advance').uncheck();
}

test.describe('progressive rollout from the deploy dialog', () => {
  let agents: AgentProcess[] = [];
  let consoleErrors: string[] = [];
  test.beforeEach(async ({ page }) => {
    consoleErrors = [];
    // Deploy now and Complete all remaining ask for confirmation and a reason: accept.
    page.on('dialog', (d) => d.accept());
    page.on('console', (m) => {
      if (m.type() === 'error') consoleErrors.push(m.text());
    });
    await signIn(page);
  });
  test.afterEach(async () => {
    // The pages hydrate cleanly: a hydration error means the browser stopped updating them.
    expect(consoleErrors.filter((e) => /hydrat|panicked/i.test(e))).toEqual([]);
    await Promise.all(agents.map((a) => a.stop()));
    agents = [];
  });

  function startWaves(baseURL: string, run: string) {
    const a = startAgent(baseURL, ['--simulate', '1', '--hostname-template', `${run}-a`, '--label', 'rollout-wave=a', '--label', `e2e-run=${run}`]);
    const b = startAgent(baseURL, ['--simulate', '1', '--hostname-template', `${run}-b`, '--label', 'rollout-wave=b', '--label', `e2e-run=${run}`]);
    agents = [a, b];
    return { a, b };
  }

  test('a failing error-rate gate rolls stage 1 back and stage 2 never opens', async ({ page, baseURL }) => {
    const run = unique('fail');
    const { a, b } = startWaves(baseURL!, run);
    const pipelineId = await createPipeline(page, run, 'rollout');
    await deployNow(page, 'sources: {}\n# baseline v1\n');
    await expectRunning(page, `${run}-a`, 'v1');
    await expectRunning(page, `${run}-b`, 'v1');

    // A bad canary: the simulated agents running it report 50 % errors.
    await authorTwoStagePlan(page, 'sources: {}\n# canary v2\n# vf-simulate: error_rate=0.5\n', true);
    // Blur first: Chromium scrolls a focused input back into view after a full-page shot.
    await page.evaluate(() => (document.activeElement as HTMLElement | null)?.blur());
    await page.screenshot({ path: path.join(shots, 'deploy-dialog.png'), fullPage: true });
    await page.getByRole('button', { name: 'Start rollout' }).click();

    const rollout = page.getByTestId('rollout');
    await expect(rollout.getByTestId('release-diff')).toContainText('What v2 changes against v1');
    await expect(rollout).toHaveAttribute('data-status', 'CANARY_DEPLOYED');
    await expect(page.getByTestId('stage-1')).toHaveAttribute('data-state', 'baking');
    // While stage 1 bakes: wave a received and runs the canary, wave b is held on v1.
    await expect.poll(() => servedConfig(a, pipelineId)).toContain('canary v2');
    await expect.poll(() => servedConfig(b, pipelineId)).toContain('baseline v1');
    await expectRunning(page, `${run}-a`, 'v2');
    await expectRunning(page, `${run}-b`, 'v1');
    await expect(page.getByTestId('not-targeted')).toContainText(`${run}-b`);
    await expect(page.getByTestId('bake-countdown')).toContainText('bake ends in');
    await page.screenshot({ path: path.join(shots, 'rollout-view.png'), fullPage: true });
    expect(servedConfig(b, pipelineId)).toContain('baseline v1');

    // The scheduler rolls back when the bake ends; stage 2 never opened.
    await expect(rollout).toHaveAttribute('data-status', 'ROLLED_BACK', { timeout: 60_000 });
    await expect(page.getByTestId('stage-1')).toHaveAttribute('data-state', 'failed');
    await expect(page.getByTestId('stage-2')).toHaveAttribute('data-state', 'not opened');
    await expect(page.getByTestId('failure-reason')).toContainText('errorRate');
    await expect(page.getByTestId('stage-1').locator('table.gates tr[data-gate="errorRate"]')).toHaveAttribute('data-verdict', 'FAIL');

    // Both agents converge on the reverted version (v3, the config of v1).
    await expect.poll(() => servedConfig(a, pipelineId), { timeout: 30_000 }).toContain('baseline v1');
    await expect.poll(() => servedConfig(b, pipelineId)).toContain('baseline v1');
    await expectRunning(page, `${run}-a`, 'v3');
    await expectRunning(page, `${run}-b`, 'v3');
  });

  test('with auto-advance off a passing stage holds, then an operator advances and completes', async ({ page, baseURL }) => {
    const run = unique('hold');
    const { a, b } = startWaves(baseURL!, run);
    const pipelineId = await createPipeline(page, run, 'rollout');
    await deployNow(page, 'sources: {}\n# baseline v1\n');
    await expectRunning(page, `${run}-a`, 'v1');
    await expectRunning(page, `${run}-b`, 'v1');

    await authorTwoStagePlan(page, 'sources: {}\n# healthy v2\n', false);
    await page.getByRole('button', { name: 'Start rollout' }).click();
    const rollout = page.getByTestId('rollout');
    await expect(rollout).toHaveAttribute('data-status', 'CANARY_DEPLOYED');
    await expect.poll(() => servedConfig(a, pipelineId)).toContain('healthy v2');
    expect(servedConfig(b, pipelineId)).toContain('baseline v1');

    // Stage 1 passes and holds for an operator.
    await expect(rollout).toHaveAttribute('data-status', 'HEALTH_CHECK', { timeout: 60_000 });
    await expect(page.getByTestId('hold-reason')).toContainText('waiting for an operator');
    expect(servedConfig(b, pipelineId)).toContain('baseline v1');
    // The canary node's log shows in the rollout view and its name links to its page; so do
    // the names of the nodes not targeted yet.
    const canaryLogs = page.getByTestId('canary-logs');
    await expect(canaryLogs).toContainText('v2 started (simulated)', { timeout: 15_000 });
    await expect(canaryLogs.locator('a[href^="/nodes/"]')).toHaveText([`${run}-a`]);
    await expect(page.getByTestId('not-targeted').locator('a[href^="/nodes/"]')).toContainText([`${run}-b`]);

    await page.getByRole('button', { name: 'Advance next stage' }).click();
    await expect(page.getByTestId('stage-2')).toHaveAttribute('data-state', 'baking');
    await expect.poll(() => servedConfig(b, pipelineId)).toContain('healthy v2');
    await expectRunning(page, `${run}-b`, 'v2');

    // Complete re-checks stage 2's gates: it passes once wave b has served traffic. It asks
    // for confirmation and an optional reason first (accepted in beforeEach).
    await expect(async () => {
      await page.getByRole('button', { name: 'Complete all remaining' }).click();
      await expect(rollout).toHaveAttribute('data-status', 'BROADENED', { timeout: 3_000 });
    }).toPass({ timeout: 60_000 });
    await expect(page.getByTestId('deployed-version')).toHaveText('v2');
  });
});
