import { test, expect } from '@playwright/test';
import { callApi, createPipeline, signIn, startAgent, unique, AgentProcess } from './helpers';

// Issue: gates that act during a bake. A stage's error-rate gate is checked every 10 s while
// it bakes; the stage card shows the live value beside its limit and updates without a reload.

test.describe('gate checks during a bake', () => {
  let agent: AgentProcess | undefined;
  test.afterEach(async () => {
    await agent?.stop();
    agent = undefined;
  });

  test('the live error rate appears in the stage card and keeps updating while the stage bakes', async ({ page, request, baseURL }) => {
    await signIn(page);
    const run = unique('live');
    agent = startAgent(baseURL!, ['--simulate', '1', '--hostname-template', `${run}-a`, '--label', `e2e-run=${run}`]);
    const pipelineId = await createPipeline(page, run, 'checks');
    // Deploy now's confirmation and reason; later the rollback's.
    page.on('dialog', (d) => d.accept());
    await page.getByRole('radio', { name: 'Deploy now' }).check();
    await page.getByLabel('Config (YAML)').fill('sources: {}\n# baseline v1\n');
    await page.getByLabel('Changelog').fill('baseline');
    await page.getByRole('button', { name: 'Deploy now' }).click();
    const row = page.getByTestId('pipeline-nodes').locator(`tr[data-node="${run}-a"]`);
    await expect(row).toHaveAttribute('data-running', 'v1', { timeout: 30_000 });

    // A canary whose nodes report 2 % errors, checked every 10 s during a 10-minute bake.
    await callApi(request, 'release.canary.create', {
      pipeline_id: pipelineId,
      config_yaml: 'sources: {}\n# canary v2\n# vf-simulate: error_rate=0.02\n',
      changelog: 'checked live',
      rollout_plan: {
        stages: [{ selector: { percentage: 100 }, bakeSeconds: 600, gates: [{ errorRate: { maxPercent: 5, intervalSeconds: 10 } }] }],
      },
    });

    // The open page picks the release up on its own refresh: no reload from here on.
    const stage = page.getByTestId('stage-1');
    await expect(stage).toHaveAttribute('data-state', 'baking');
    const gate = stage.getByTestId('live-checks').locator('tr[data-gate="errorRate"]');
    await expect(gate).toHaveAttribute('data-checks', '0');
    await expect(gate.getByTestId('live-value')).toHaveText('-');
    await expect(gate).toContainText('max 5%');

    // The first check lands and its value replaces the dash; the next one follows.
    await expect(gate).toHaveAttribute('data-checks', '1', { timeout: 30_000 });
    await expect(gate.getByTestId('live-value')).toHaveText(/^\d+\.\d\d%$/);
    await expect(gate).toHaveAttribute('data-checks', '2', { timeout: 30_000 });
    await expect(gate).toHaveAttribute('data-verdict', 'PASS');
    await expect(gate.getByTestId('live-value')).toHaveText('2.00%');
    await expect(gate.locator('svg.sparkline circle').first()).toBeVisible();
    await expect(page.getByTestId('rollout')).toHaveAttribute('data-status', 'CANARY_DEPLOYED');
    // The stage's live chart: error rate against its 5 % limit and events/s, with times (UTC).
    const chart = stage.getByTestId('stage-chart');
    await expect(chart).toBeVisible({ timeout: 30_000 });
    await expect(chart).toContainText('Error rate (%)');
    await expect(chart).toContainText('Events/s');
    await expect(chart).toContainText('max 5%');
    await expect(chart.locator('text.time').first()).toHaveText(/^\d\d:\d\d$/);
    await expect(chart).toHaveAttribute('aria-label', /^Error rate up to [\d.]+% and throughput up to [\d.]+ events\/s over \d+ minutes?, \d\d:\d\d to \d\d:\d\d UTC$/);
    // While the release is in flight the deploy dialog gives way to a notice.
    await expect(page.getByTestId('deploy-locked')).toContainText('A rollout of v2 is in flight');
    await expect(page.getByRole('form', { name: 'Deploy' })).toHaveCount(0);

    await page.getByRole('button', { name: 'Roll back' }).click();
    await expect(page.getByTestId('rollout')).toHaveAttribute('data-status', 'ROLLED_BACK');
    // Once the release left flight, the dialog is back, fresh.
    await expect(page.getByTestId('deploy-locked')).toHaveCount(0);
    await expect(page.getByRole('form', { name: 'Deploy' })).toBeVisible();
    await expect(page.getByLabel('Changelog')).toHaveValue('');
  });
});
